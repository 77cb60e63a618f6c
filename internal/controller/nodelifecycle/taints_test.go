package nodelifecycle

import (
	"reflect"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func cond(t corev1.NodeConditionType, s corev1.ConditionStatus) corev1.NodeCondition {
	return corev1.NodeCondition{Type: t, Status: s}
}

func noSchedule(key string) corev1.Taint {
	return corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule}
}

func keys(ts []corev1.Taint) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Key+":"+string(t.Effect))
	}
	sort.Strings(out)
	return out
}

func TestNoScheduleTaints(t *testing.T) {
	ns := func(k string) string { return k + ":NoSchedule" }
	tests := []struct {
		name          string
		conditions    []corev1.NodeCondition
		unschedulable bool
		taints        []corev1.Taint
		wantAdd       []string
		wantRemove    []string
	}{
		{"a Ready node needs no taint", []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionTrue)}, false, nil, nil, nil},
		{"Ready=False calls for not-ready", []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionFalse)}, false, nil,
			[]string{ns(corev1.TaintNodeNotReady)}, nil},
		{"Ready=Unknown calls for unreachable", []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionUnknown)}, false, nil,
			[]string{ns(corev1.TaintNodeUnreachable)}, nil},
		{"each pressure and network-unavailable calls for its taint", []corev1.NodeCondition{
			cond(corev1.NodeReady, corev1.ConditionTrue),
			cond(corev1.NodeMemoryPressure, corev1.ConditionTrue),
			cond(corev1.NodeDiskPressure, corev1.ConditionTrue),
			cond(corev1.NodePIDPressure, corev1.ConditionTrue),
			cond(corev1.NodeNetworkUnavailable, corev1.ConditionTrue),
		}, false, nil, []string{
			ns(corev1.TaintNodeDiskPressure), ns(corev1.TaintNodeMemoryPressure),
			ns(corev1.TaintNodeNetworkUnavailable), ns(corev1.TaintNodePIDPressure),
		}, nil},
		{"a pressure condition that is Unknown calls for nothing", []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, corev1.ConditionUnknown)}, false, nil, nil, nil},
		{"spec.unschedulable calls for unschedulable", nil, true, nil, []string{ns(corev1.TaintNodeUnschedulable)}, nil},
		{"a recovered node loses unreachable and keeps what it still needs", []corev1.NodeCondition{
			cond(corev1.NodeReady, corev1.ConditionTrue)}, true,
			[]corev1.Taint{noSchedule(corev1.TaintNodeUnreachable), noSchedule(corev1.TaintNodeUnschedulable)},
			nil, []string{ns(corev1.TaintNodeUnreachable)}},
		{"a node without a Ready condition loses the admission's not-ready taint", nil, false,
			[]corev1.Taint{noSchedule(corev1.TaintNodeNotReady)}, nil, []string{ns(corev1.TaintNodeNotReady)}},
		{"other NoSchedule taints and other effects are left alone", []corev1.NodeCondition{
			cond(corev1.NodeReady, corev1.ConditionTrue)}, false,
			[]corev1.Taint{
				noSchedule("example.com/dedicated"),
				{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute},
				{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectPreferNoSchedule},
			}, nil, nil},
		{"a taint already present with another value is kept", []corev1.NodeCondition{
			cond(corev1.NodeReady, corev1.ConditionFalse)}, false,
			[]corev1.Taint{{Key: corev1.TaintNodeNotReady, Value: "x", Effect: corev1.TaintEffectNoSchedule}}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := &corev1.Node{
				Spec:   corev1.NodeSpec{Unschedulable: tt.unschedulable, Taints: tt.taints},
				Status: corev1.NodeStatus{Conditions: tt.conditions},
			}
			add, remove := NoScheduleTaints(node, t0)
			if got := keys(add); !reflect.DeepEqual(got, tt.wantAdd) {
				t.Errorf("add = %v, want %v", got, tt.wantAdd)
			}
			if got := keys(remove); !reflect.DeepEqual(got, tt.wantRemove) {
				t.Errorf("remove = %v, want %v", got, tt.wantRemove)
			}
			for _, a := range add {
				if a.TimeAdded == nil || !a.TimeAdded.Time.Equal(t0) {
					t.Errorf("added taint %s has timeAdded %v, want %v", a.Key, a.TimeAdded, t0)
				}
			}
		})
	}
}

func TestBetaLabels(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		want   map[string]string
	}{
		{"stable os and arch are copied to the beta labels", map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64"},
			map[string]string{"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "arm64"}},
		{"a different beta value is overwritten", map[string]string{"kubernetes.io/os": "linux", "beta.kubernetes.io/os": "windows"},
			map[string]string{"beta.kubernetes.io/os": "linux"}},
		{"equal labels need nothing", map[string]string{"kubernetes.io/arch": "amd64", "beta.kubernetes.io/arch": "amd64"}, nil},
		{"a missing stable label changes nothing", map[string]string{"beta.kubernetes.io/os": "linux"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := BetaLabels(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: tt.labels}})
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("BetaLabels = %v, want %v", got, tt.want)
			}
		})
	}
}
