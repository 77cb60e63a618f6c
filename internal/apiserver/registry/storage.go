package registry

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeplane/nodeplane/internal/apiserver/defaults"
	"github.com/nodeplane/nodeplane/internal/apiserver/printers"
	"github.com/nodeplane/nodeplane/internal/apiserver/validation"
)

// PersistentVolumes declares persistentvolumes (+status).
func PersistentVolumes() *Resource {
	return &Resource{
		GroupVersion: coreV1, Resource: "persistentvolumes", Singular: "persistentvolume", Kind: "PersistentVolume", ListKind: "PersistentVolumeList",
		ShortNames: []string{"pv"},
		New:        func() runtime.Object { return &corev1.PersistentVolume{} },
		NewList:    func() runtime.Object { return &corev1.PersistentVolumeList{} },
		Fields: func(obj runtime.Object) fields.Set {
			return fields.Set{"status.phase": string(obj.(*corev1.PersistentVolume).Status.Phase)}
		},
		Subresources: []Subresource{{Name: "status", Verbs: statusVerbs}},
		Printer:      printers.PersistentVolumes(),
		Strategy: Strategy{
			PrepareForCreate: func(obj runtime.Object) {
				obj.(*corev1.PersistentVolume).Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumePending}
			},
			Default: func(obj runtime.Object) { defaults.PersistentVolume(obj.(*corev1.PersistentVolume)) },
			PrepareForUpdate: func(obj, old runtime.Object) {
				obj.(*corev1.PersistentVolume).Status = old.(*corev1.PersistentVolume).Status
			},
			PrepareForStatusUpdate: func(obj, old runtime.Object) {
				obj.(*corev1.PersistentVolume).Spec = old.(*corev1.PersistentVolume).Spec
			},
			Validate: func(obj runtime.Object) field.ErrorList {
				return validation.PersistentVolume(obj.(*corev1.PersistentVolume))
			},
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.PersistentVolumeUpdate(obj.(*corev1.PersistentVolume), old.(*corev1.PersistentVolume))
			},
			ValidateStatusUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.PersistentVolumeStatusUpdate(obj.(*corev1.PersistentVolume), old.(*corev1.PersistentVolume))
			},
		},
	}
}

// PersistentVolumeClaims declares persistentvolumeclaims (+status).
func PersistentVolumeClaims() *Resource {
	return &Resource{
		GroupVersion: coreV1, Resource: "persistentvolumeclaims", Singular: "persistentvolumeclaim", Kind: "PersistentVolumeClaim", ListKind: "PersistentVolumeClaimList",
		Namespaced:   true,
		ShortNames:   []string{"pvc"},
		New:          func() runtime.Object { return &corev1.PersistentVolumeClaim{} },
		NewList:      func() runtime.Object { return &corev1.PersistentVolumeClaimList{} },
		Subresources: []Subresource{{Name: "status", Verbs: statusVerbs}},
		Printer:      printers.PersistentVolumeClaims(),
		Strategy: Strategy{
			PrepareForCreate: func(obj runtime.Object) {
				obj.(*corev1.PersistentVolumeClaim).Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
			},
			Default: func(obj runtime.Object) { defaults.PersistentVolumeClaim(obj.(*corev1.PersistentVolumeClaim)) },
			PrepareForUpdate: func(obj, old runtime.Object) {
				obj.(*corev1.PersistentVolumeClaim).Status = old.(*corev1.PersistentVolumeClaim).Status
			},
			PrepareForStatusUpdate: func(obj, old runtime.Object) {
				obj.(*corev1.PersistentVolumeClaim).Spec = old.(*corev1.PersistentVolumeClaim).Spec
			},
			Validate: func(obj runtime.Object) field.ErrorList {
				return validation.PersistentVolumeClaim(obj.(*corev1.PersistentVolumeClaim))
			},
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.PersistentVolumeClaimUpdate(obj.(*corev1.PersistentVolumeClaim), old.(*corev1.PersistentVolumeClaim))
			},
			ValidateStatusUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.PersistentVolumeClaimStatusUpdate(obj.(*corev1.PersistentVolumeClaim), old.(*corev1.PersistentVolumeClaim))
			},
		},
	}
}

// VolumeAttachments declares storage.k8s.io/v1 volumeattachments (+status).
func VolumeAttachments() *Resource {
	return &Resource{
		GroupVersion: storagev1.SchemeGroupVersion, Resource: "volumeattachments", Singular: "volumeattachment", Kind: "VolumeAttachment", ListKind: "VolumeAttachmentList",
		New:          func() runtime.Object { return &storagev1.VolumeAttachment{} },
		NewList:      func() runtime.Object { return &storagev1.VolumeAttachmentList{} },
		Subresources: []Subresource{{Name: "status", Verbs: statusVerbs}},
		Printer:      printers.VolumeAttachments(),
		Strategy: Strategy{
			PrepareForCreate: func(obj runtime.Object) {
				obj.(*storagev1.VolumeAttachment).Status = storagev1.VolumeAttachmentStatus{}
			},
			PrepareForUpdate: func(obj, old runtime.Object) {
				obj.(*storagev1.VolumeAttachment).Status = old.(*storagev1.VolumeAttachment).Status
			},
			PrepareForStatusUpdate: func(obj, old runtime.Object) {
				obj.(*storagev1.VolumeAttachment).Spec = old.(*storagev1.VolumeAttachment).Spec
			},
			Validate: func(obj runtime.Object) field.ErrorList {
				return validation.VolumeAttachment(obj.(*storagev1.VolumeAttachment))
			},
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.VolumeAttachmentUpdate(obj.(*storagev1.VolumeAttachment), old.(*storagev1.VolumeAttachment))
			},
			ValidateStatusUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.VolumeAttachmentStatusUpdate(obj.(*storagev1.VolumeAttachment), old.(*storagev1.VolumeAttachment))
			},
		},
	}
}

// StorageClasses declares storage.k8s.io/v1 storageclasses (cluster-scoped,
// no status).
func StorageClasses() *Resource {
	return &Resource{
		GroupVersion: storagev1.SchemeGroupVersion, Resource: "storageclasses", Singular: "storageclass", Kind: "StorageClass", ListKind: "StorageClassList",
		ShortNames: []string{"sc"},
		New:        func() runtime.Object { return &storagev1.StorageClass{} },
		NewList:    func() runtime.Object { return &storagev1.StorageClassList{} },
		Printer:    printers.StorageClasses(),
		Strategy: Strategy{
			Default: func(obj runtime.Object) { defaults.StorageClass(obj.(*storagev1.StorageClass)) },
			Validate: func(obj runtime.Object) field.ErrorList {
				return validation.StorageClass(obj.(*storagev1.StorageClass))
			},
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.StorageClassUpdate(obj.(*storagev1.StorageClass), old.(*storagev1.StorageClass))
			},
		},
	}
}
