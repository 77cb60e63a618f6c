package tainttoleration_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
	ft "github.com/nodeplane/nodeplane/internal/scheduler/framework/frameworktest"
	"github.com/nodeplane/nodeplane/internal/scheduler/plugins/tainttoleration"
)

func TestTolerates(t *testing.T) {
	taint := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name string
		tol  corev1.Toleration
		want bool
	}{
		{name: "same key, value and effect tolerates", tol: corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}, want: true},
		{name: "an empty operator means Equal", tol: corev1.Toleration{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}, want: true},
		{name: "Equal with another value does not", tol: corev1.Toleration{Key: "dedicated", Value: "cpu", Effect: corev1.TaintEffectNoSchedule}, want: false},
		{name: "Exists ignores the value", tol: corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}, want: true},
		{name: "an empty effect matches every effect", tol: corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists}, want: true},
		{name: "another effect does not", tol: corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}, want: false},
		{name: "an empty key with Exists tolerates every taint", tol: corev1.Toleration{Operator: corev1.TolerationOpExists}, want: true},
		{name: "an empty key with Exists still respects the effect", tol: corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectPreferNoSchedule}, want: false},
		{name: "another key does not", tol: corev1.Toleration{Key: "other", Operator: corev1.TolerationOpExists}, want: false},
		{name: "the alpha Gt operator never tolerates", tol: corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpGt, Value: "1"}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.tol.ToleratesTaint(klog.Background(), &taint, false); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFilter(t *testing.T) {
	notReady := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
	unreachableExec := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}
	prefer := corev1.Taint{Key: "spot", Value: "true", Effect: corev1.TaintEffectPreferNoSchedule}
	tests := []struct {
		name   string
		taints []corev1.Taint
		tols   []corev1.Toleration
		want   framework.Code
	}{
		{name: "an untainted node fits", want: framework.Success},
		{name: "an untolerated NoSchedule taint rejects for good", taints: []corev1.Taint{notReady}, want: framework.UnschedulableAndUnresolvable},
		{name: "an untolerated NoExecute taint rejects", taints: []corev1.Taint{unreachableExec}, want: framework.UnschedulableAndUnresolvable},
		{name: "a PreferNoSchedule taint only affects scoring", taints: []corev1.Taint{prefer}, want: framework.Success},
		{
			name: "a tolerated taint fits", taints: []corev1.Taint{notReady},
			tols: []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			want: framework.Success,
		},
		{
			name: "tolerating one of two taints is not enough", taints: []corev1.Taint{notReady, unreachableExec},
			tols: []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists}},
			want: framework.UnschedulableAndUnresolvable,
		},
		{
			name: "an empty-key Exists toleration tolerates every taint", taints: []corev1.Taint{notReady, unreachableExec},
			tols: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			want: framework.Success,
		},
		{
			name: "a toleration with an empty effect covers NoExecute too", taints: []corev1.Taint{unreachableExec},
			tols: []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists}},
			want: framework.Success,
		},
	}
	p := tainttoleration.New()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ni := ft.NodeInfo(ft.Node("n1", ft.Taints(tt.taints...)))
			st := p.Filter(context.Background(), framework.NewCycleState(), ft.Pod("p", ft.Tolerations(tt.tols...)), ni)
			if st.Code() != tt.want {
				t.Fatalf("code %v, want %v", st.Code(), tt.want)
			}
			if st.Code() != framework.Success && st.Message() != "node(s) had untolerated taint(s)" {
				t.Errorf("reason %q, want the upstream text", st.Message())
			}
		})
	}
}

func TestScorePrefersFewerUntoleratedPreferNoScheduleTaints(t *testing.T) {
	spot := corev1.Taint{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}
	old := corev1.Taint{Key: "old", Effect: corev1.TaintEffectPreferNoSchedule}
	hard := corev1.Taint{Key: "hard", Effect: corev1.TaintEffectNoSchedule}
	nodes := []*framework.NodeInfo{
		ft.NodeInfo(ft.Node("clean", ft.Taints(hard))), // NoSchedule taints do not count here
		ft.NodeInfo(ft.Node("one", ft.Taints(spot))),
		ft.NodeInfo(ft.Node("two", ft.Taints(spot, old))),
	}
	tests := []struct {
		name string
		tols []corev1.Toleration
		want map[string]int64
	}{
		{name: "each untolerated taint costs", want: map[string]int64{"clean": 100, "one": 50, "two": 0}},
		{
			name: "a toleration without effect removes the cost of its taint",
			tols: []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists}},
			want: map[string]int64{"clean": 100, "one": 100, "two": 0},
		},
		{
			name: "a NoSchedule toleration does not help against PreferNoSchedule",
			tols: []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			want: map[string]int64{"clean": 100, "one": 50, "two": 0},
		},
	}
	p := tainttoleration.New()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, state, pod := context.Background(), framework.NewCycleState(), ft.Pod("p", ft.Tolerations(tt.tols...))
			if st := p.PreScore(ctx, state, pod, nodes, nodes); !st.IsSuccess() {
				t.Fatal(st)
			}
			scores := make(framework.NodeScoreList, len(nodes))
			for i, ni := range nodes {
				s, st := p.Score(ctx, state, pod, ni)
				if !st.IsSuccess() {
					t.Fatal(st)
				}
				scores[i] = framework.NodeScore{Name: ni.Name(), Score: s}
			}
			p.NormalizeScore(ctx, state, pod, scores)
			for _, s := range scores {
				if s.Score != tt.want[s.Name] {
					t.Errorf("%s scored %d, want %d", s.Name, s.Score, tt.want[s.Name])
				}
			}
		})
	}
}
