package defaults

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// Node applies kube's node defaults: allocatable falls back to capacity,
// and quantities are rounded up to milli precision.
func Node(n *corev1.Node) {
	if n.Status.Allocatable == nil && n.Status.Capacity != nil {
		n.Status.Allocatable = n.Status.Capacity.DeepCopy()
	}
	roundUp(n.Status.Capacity)
	roundUp(n.Status.Allocatable)
}

// Namespace applies kube's namespace defaults: the
// kubernetes.io/metadata.name label (when the name is known) and phase
// Active.
func Namespace(ns *corev1.Namespace) {
	if ns.Name != "" {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[corev1.LabelMetadataName] = ns.Name
	}
	if ns.Status.Phase == "" {
		ns.Status.Phase = corev1.NamespaceActive
	}
}

// NamespaceForCreate adds what kube's namespace strategy adds on create
// only: status phase Active and the "kubernetes" finalizer in
// spec.finalizers. It is not a default because the finalizer may later be
// removed (namespace deletion does), so it must not come back on update.
func NamespaceForCreate(ns *corev1.Namespace) {
	Namespace(ns)
	ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
	for _, f := range ns.Spec.Finalizers {
		if f == corev1.FinalizerKubernetes {
			return
		}
	}
	ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
}

// PersistentVolume applies kube's PV defaults: phase Pending, reclaim
// policy Retain, volume mode Filesystem, and the per-source defaults.
func PersistentVolume(pv *corev1.PersistentVolume) {
	if pv.Status.Phase == "" {
		pv.Status.Phase = corev1.VolumePending
	}
	if pv.Spec.PersistentVolumeReclaimPolicy == "" {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	}
	if pv.Spec.VolumeMode == nil {
		m := corev1.PersistentVolumeFilesystem
		pv.Spec.VolumeMode = &m
	}
	pvSpec(&pv.Spec)
}

// pvSpec applies the per-source defaults of a PersistentVolumeSpec.
func pvSpec(spec *corev1.PersistentVolumeSpec) {
	roundUp(spec.Capacity)
	src := &spec.PersistentVolumeSource
	if src.HostPath != nil {
		hostPathType(src.HostPath)
	}
	if s := src.RBD; s != nil {
		rbd(&s.RBDPool, &s.RadosUser, &s.Keyring)
	}
	if s := src.ISCSI; s != nil && s.ISCSIInterface == "" {
		s.ISCSIInterface = "default"
	}
	if s := src.AzureDisk; s != nil {
		azureDisk(s)
	}
	if s := src.ScaleIO; s != nil {
		scaleIO(&s.StorageMode, &s.FSType)
	}
}

// PersistentVolumeClaim applies kube's PVC defaults: phase Pending and
// volume mode Filesystem.
func PersistentVolumeClaim(pvc *corev1.PersistentVolumeClaim) {
	if pvc.Status.Phase == "" {
		pvc.Status.Phase = corev1.ClaimPending
	}
	pvcSpec(&pvc.Spec)
	roundUp(pvc.Status.Capacity)
	roundUp(pvc.Status.AllocatedResources)
}

func pvcSpec(spec *corev1.PersistentVolumeClaimSpec) {
	if spec.VolumeMode == nil {
		m := corev1.PersistentVolumeFilesystem
		spec.VolumeMode = &m
	}
	roundUp(spec.Resources.Limits)
	roundUp(spec.Resources.Requests)
}

// VolumeAttachment applies the per-source defaults to an inline volume
// spec, as kube does.
func VolumeAttachment(va *storagev1.VolumeAttachment) {
	if s := va.Spec.Source.InlineVolumeSpec; s != nil {
		pvSpec(s)
	}
}

// StorageClass defaults reclaimPolicy to Delete and volumeBindingMode to
// Immediate.
func StorageClass(sc *storagev1.StorageClass) {
	if sc.ReclaimPolicy == nil {
		p := corev1.PersistentVolumeReclaimDelete
		sc.ReclaimPolicy = &p
	}
	if sc.VolumeBindingMode == nil {
		m := storagev1.VolumeBindingImmediate
		sc.VolumeBindingMode = &m
	}
}
