package pvprotection

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

const (
	// ControllerName is the upstream kube-controller-manager name.
	ControllerName = "persistentvolume-protection-controller"
	// Finalizer is the finalizer that keeps a volume while it is bound.
	Finalizer = "kubernetes.io/pv-protection"
)

// Action is the one write a volume needs.
type Action int

// Actions.
const (
	// Nothing: the volume is as it should be (or still bound).
	Nothing Action = iota
	// AddFinalizer: a live volume without the finalizer.
	AddFinalizer
	// RemoveFinalizer: a deleted volume that is not Bound.
	RemoveFinalizer
)

// Decide returns what pv needs. As upstream, a volume is in use exactly
// while its phase is Bound.
func Decide(pv *corev1.PersistentVolume) Action {
	has := slices.Contains(pv.Finalizers, Finalizer)
	switch {
	case pv.DeletionTimestamp == nil && !has:
		return AddFinalizer
	case pv.DeletionTimestamp != nil && has && pv.Status.Phase != corev1.VolumeBound:
		return RemoveFinalizer
	}
	return Nothing
}
