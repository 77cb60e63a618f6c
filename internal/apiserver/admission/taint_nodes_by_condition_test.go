package admission

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestTaintNodesByCondition(t *testing.T) {
	nodes := schema.GroupResource{Resource: "nodes"}
	tests := []struct {
		name   string
		attrs  Attributes
		taints []corev1.Taint
		want   int
	}{
		{"a new node gets the not-ready NoSchedule taint", Attributes{Operation: Create, Resource: nodes}, nil, 1},
		{"a new node that has it keeps one", Attributes{Operation: Create, Resource: nodes},
			[]corev1.Taint{{Key: taintNotReady, Effect: corev1.TaintEffectNoSchedule}}, 1},
		{"registration taints are kept beside it", Attributes{Operation: Create, Resource: nodes},
			[]corev1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}, 2},
		{"an update is left alone", Attributes{Operation: Update, Resource: nodes}, nil, 0},
		{"a status write is left alone", Attributes{Operation: Create, Resource: nodes, Subresource: "status"}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &corev1.Node{Spec: corev1.NodeSpec{Taints: tt.taints}}
			tt.attrs.Object = n
			if err := (TaintNodesByCondition{}).Admit(context.Background(), tt.attrs); err != nil {
				t.Fatal(err)
			}
			if len(n.Spec.Taints) != tt.want {
				t.Errorf("taints = %+v, want %d", n.Spec.Taints, tt.want)
			}
		})
	}
}
