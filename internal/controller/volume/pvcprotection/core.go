package pvcprotection

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

const (
	// ControllerName is the upstream kube-controller-manager name.
	ControllerName = "persistentvolumeclaim-protection-controller"
	// Finalizer is the finalizer that keeps a claim while pods use it.
	Finalizer = "kubernetes.io/pvc-protection"
)

// Action is the one write a claim needs.
type Action int

// Actions.
const (
	// Nothing: the claim is as it should be (or still in use).
	Nothing Action = iota
	// AddFinalizer: a live claim without the finalizer.
	AddFinalizer
	// RemoveFinalizer: a deleted claim no pod uses any more.
	RemoveFinalizer
)

// Decide returns what claim needs, given the pods of its namespace.
func Decide(claim *corev1.PersistentVolumeClaim, pods []*corev1.Pod) Action {
	has := slices.Contains(claim.Finalizers, Finalizer)
	switch {
	case claim.DeletionTimestamp == nil && !has:
		return AddFinalizer
	case claim.DeletionTimestamp != nil && has && UsedBy(claim, pods) == nil:
		return RemoveFinalizer
	}
	return Nothing
}

// UsedBy returns the first pod that uses claim: a pod of its namespace
// bound to a node with a persistentVolumeClaim volume naming it. As
// upstream, an unscheduled pod does not count (the agent never starts a
// pod whose claim is being deleted) and a scheduled pod counts whatever
// its phase, until it is deleted.
func UsedBy(claim *corev1.PersistentVolumeClaim, pods []*corev1.Pod) *corev1.Pod {
	for _, p := range pods {
		if p.Namespace != claim.Namespace || p.Spec.NodeName == "" {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim.Name {
				return p
			}
		}
	}
	return nil
}
