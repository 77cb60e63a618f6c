package admission

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Finalizers the StorageObjectInUseProtection plugin adds (the protection
// controllers remove them).
const (
	PVCProtectionFinalizer = "kubernetes.io/pvc-protection"
	PVProtectionFinalizer  = "kubernetes.io/pv-protection"
)

// StorageObjectInUseProtection adds the kubernetes.io/pvc-protection
// finalizer to every new PersistentVolumeClaim and
// kubernetes.io/pv-protection to every new PersistentVolume, as upstream's
// plugin of that name: a claim a pod uses, or a bound volume, is then only
// marked for deletion until its protection controller lets it go.
type StorageObjectInUseProtection struct{}

// Name implements Plugin.
func (StorageObjectInUseProtection) Name() string { return "StorageObjectInUseProtection" }

// Admit implements Plugin: creates of the main resource only.
func (StorageObjectInUseProtection) Admit(_ context.Context, a Attributes) error {
	if a.Operation != Create || a.Resource.Group != "" || a.Subresource != "" {
		return nil
	}
	switch obj := a.Object.(type) {
	case *corev1.PersistentVolumeClaim:
		if a.Resource.Resource == "persistentvolumeclaims" && !slices.Contains(obj.Finalizers, PVCProtectionFinalizer) {
			obj.Finalizers = append(obj.Finalizers, PVCProtectionFinalizer)
		}
	case *corev1.PersistentVolume:
		if a.Resource.Resource == "persistentvolumes" && !slices.Contains(obj.Finalizers, PVProtectionFinalizer) {
			obj.Finalizers = append(obj.Finalizers, PVProtectionFinalizer)
		}
	}
	return nil
}
