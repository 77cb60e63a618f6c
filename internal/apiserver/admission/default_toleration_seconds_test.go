package admission

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

func TestDefaultTolerationSeconds(t *testing.T) {
	notReady := corev1.Toleration{Key: taintNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}
	unreachable := corev1.Toleration{Key: taintUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}
	tests := []struct {
		name string
		in   []corev1.Toleration
		want []corev1.Toleration
	}{
		{"a pod without tolerations gets both defaults", nil, []corev1.Toleration{notReady, unreachable}},
		{
			"a pod tolerating not-ready for 5s keeps it and only gets unreachable",
			[]corev1.Toleration{{Key: taintNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](5)}},
			[]corev1.Toleration{{Key: taintNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](5)}, unreachable},
		},
		{
			"an empty-key Exists toleration covers both families",
			[]corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			[]corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		},
		{
			"a NoSchedule toleration of unreachable does not count",
			[]corev1.Toleration{{Key: taintUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			[]corev1.Toleration{{Key: taintUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}, notReady, unreachable},
		},
		{
			"an Equal toleration with an empty effect counts whatever its value",
			[]corev1.Toleration{{Key: taintUnreachable, Operator: corev1.TolerationOpEqual, Value: "x"}},
			[]corev1.Toleration{{Key: taintUnreachable, Operator: corev1.TolerationOpEqual, Value: "x"}, notReady},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{Tolerations: tt.in}}
			d := DefaultTolerationSeconds{NotReadySeconds: 300, UnreachableSeconds: 300}
			if err := d.Admit(context.Background(), Attributes{Operation: Create, Resource: schema.GroupResource{Resource: "pods"}, Object: pod}); err != nil {
				t.Fatal(err)
			}
			if len(pod.Spec.Tolerations) != len(tt.want) {
				t.Fatalf("got %d tolerations %+v, want %+v", len(pod.Spec.Tolerations), pod.Spec.Tolerations, tt.want)
			}
			for i := range tt.want {
				got, want := pod.Spec.Tolerations[i], tt.want[i]
				if got.Key != want.Key || got.Effect != want.Effect || got.Operator != want.Operator || ptr.Deref(got.TolerationSeconds, -1) != ptr.Deref(want.TolerationSeconds, -1) {
					t.Errorf("toleration %d: got %+v, want %+v", i, got, want)
				}
			}
		})
	}
}

func TestDefaultTolerationSecondsSkipsSubresourcesAndOtherResources(t *testing.T) {
	d := DefaultTolerationSeconds{NotReadySeconds: 300, UnreachableSeconds: 300}
	for _, a := range []Attributes{
		{Operation: Update, Resource: schema.GroupResource{Resource: "pods"}, Subresource: "status"},
		{Operation: Create, Resource: schema.GroupResource{Resource: "nodes"}},
	} {
		pod := &corev1.Pod{}
		a.Object = pod
		if err := d.Admit(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		if len(pod.Spec.Tolerations) != 0 {
			t.Errorf("%+v: tolerations added: %+v", a, pod.Spec.Tolerations)
		}
	}
}
