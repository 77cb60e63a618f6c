package admission

import (
	"context"

	corev1 "k8s.io/api/core/v1"
)

// TaintNodesByCondition puts node.kubernetes.io/not-ready:NoSchedule on
// every new Node, as upstream's admission plugin of that name does: a node
// is not schedulable until the node lifecycle controller has seen it Ready
// and removed the taint (SPEC §1.6). Without it, a pod could be scheduled on
// a node in the window before its first health check.
type TaintNodesByCondition struct{}

// Name implements Plugin.
func (TaintNodesByCondition) Name() string { return "TaintNodesByCondition" }

// Admit implements Plugin: node creates only.
func (TaintNodesByCondition) Admit(_ context.Context, a Attributes) error {
	if a.Operation != Create || a.Resource.Group != "" || a.Resource.Resource != "nodes" || a.Subresource != "" {
		return nil
	}
	node, ok := a.Object.(*corev1.Node)
	if !ok {
		return nil
	}
	for _, t := range node.Spec.Taints {
		if t.Key == taintNotReady && t.Effect == corev1.TaintEffectNoSchedule {
			return nil
		}
	}
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: taintNotReady, Effect: corev1.TaintEffectNoSchedule})
	return nil
}
