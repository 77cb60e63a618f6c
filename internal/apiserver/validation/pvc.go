package validation

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// betaStorageClassAnnotation is the pre-1.6 way to name a storage class.
const betaStorageClassAnnotation = corev1.BetaStorageClassAnnotation

// PersistentVolumeClaimUpdate validates a PVC update. The spec is immutable
// except spec.volumeName (settable once, for binding), the storage request
// and volumeAttributesClassName of a bound claim (expansion and modify),
// and a nil storageClassName becoming set.
func PersistentVolumeClaimUpdate(pvc, old *corev1.PersistentVolumeClaim) field.ErrorList {
	allErrs := objectMetaUpdate(&pvc.ObjectMeta, &old.ObjectMeta, metadataPath)
	allErrs = append(allErrs, PersistentVolumeClaim(pvc)...)
	newSpec, oldSpec := pvc.Spec.DeepCopy(), old.Spec.DeepCopy()

	// The PV controller binds a claim by setting volumeName once.
	if old.Spec.VolumeName == "" {
		oldSpec.VolumeName = newSpec.VolumeName
	}
	if storageClassUpgradeFromAnnotation(old, pvc) {
		newSpec.StorageClassName = nil
		oldSpec.StorageClassName = nil
	} else {
		if n, o := pvc.Annotations[betaStorageClassAnnotation], old.Annotations[betaStorageClassAnnotation]; n != o {
			allErrs = append(allErrs, field.Invalid(metadataPath.Child("annotations", betaStorageClassAnnotation), n, fieldImmutableMsg))
		}
		if storageClassUpgradeFromNil(old, pvc) {
			newSpec.StorageClassName = oldSpec.StorageClassName
		}
	}
	if pvc.Status.Phase == corev1.ClaimBound {
		if newSpec.Resources.Requests != nil {
			newSpec.Resources.Requests[corev1.ResourceStorage] = old.Spec.Resources.Requests[corev1.ResourceStorage]
		}
		if newSpec.VolumeAttributesClassName != nil {
			newSpec.VolumeAttributesClassName = oldSpec.VolumeAttributesClassName
		}
	}
	if !equality.Semantic.DeepEqual(*newSpec, *oldSpec) {
		diff := fieldDiff(*oldSpec, *newSpec)
		allErrs = append(allErrs, field.Forbidden(specPath, fmt.Sprintf("spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n%v", diff)))
	}

	// Shrinking is only allowed back down to what status.capacity holds,
	// to recover from a failed expansion.
	newSize, oldSize := pvc.Spec.Resources.Requests[corev1.ResourceStorage], old.Spec.Resources.Requests[corev1.ResourceStorage]
	statusSize := old.Status.Capacity[corev1.ResourceStorage]
	if newSize.Cmp(oldSize) < 0 && newSize.Cmp(statusSize) <= 0 {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("spec", "resources", "requests", "storage"), "field can not be less than status.capacity"))
	}
	allErrs = append(allErrs, immutable(pvc.Spec.VolumeMode, old.Spec.VolumeMode, field.NewPath("volumeMode"))...)
	if old.Spec.VolumeAttributesClassName != nil {
		vacPath := field.NewPath("spec", "volumeAttributesClassName")
		switch {
		case pvc.Spec.VolumeAttributesClassName == nil:
			allErrs = append(allErrs, field.Forbidden(vacPath, "update from non-nil value to nil is forbidden"))
		case *pvc.Spec.VolumeAttributesClassName == "" && *old.Spec.VolumeAttributesClassName != "":
			allErrs = append(allErrs, field.Forbidden(vacPath, "update from non-nil value to an empty string is forbidden"))
		}
	}
	return allErrs
}

// storageClassUpgradeFromAnnotation: the old claim named its class only in
// the beta annotation, and the new one moves the same name to the field.
func storageClassUpgradeFromAnnotation(old, pvc *corev1.PersistentVolumeClaim) bool {
	oldClass, oldHas := old.Annotations[betaStorageClassAnnotation]
	newAnn, newHas := pvc.Annotations[betaStorageClassAnnotation]
	return oldHas && old.Spec.StorageClassName == nil &&
		pvc.Spec.StorageClassName != nil && *pvc.Spec.StorageClassName == oldClass &&
		(!newHas || newAnn == oldClass)
}

// storageClassUpgradeFromNil: a claim without a class may get one (the
// default class admission sets it), if it agrees with any beta annotation.
func storageClassUpgradeFromNil(old, pvc *corev1.PersistentVolumeClaim) bool {
	oldAnn, oldHas := old.Annotations[betaStorageClassAnnotation]
	return pvc.Spec.StorageClassName != nil && old.Spec.StorageClassName == nil &&
		(!oldHas || *pvc.Spec.StorageClassName == oldAnn)
}

var validResizeStatuses = []corev1.ClaimResourceStatus{
	corev1.PersistentVolumeClaimControllerResizeInProgress,
	corev1.PersistentVolumeClaimControllerResizeInfeasible,
	corev1.PersistentVolumeClaimNodeResizeInProgress,
	corev1.PersistentVolumeClaimNodeResizeInfeasible,
	corev1.PersistentVolumeClaimNodeResizePending,
}

// PersistentVolumeClaimStatusUpdate validates an update through the status
// subresource: capacities and allocated resources are valid quantities and
// resize statuses are known values.
func PersistentVolumeClaimStatusUpdate(pvc, old *corev1.PersistentVolumeClaim) field.ErrorList {
	allErrs := objectMetaUpdate(&pvc.ObjectMeta, &old.ObjectMeta, metadataPath)
	if pvc.ResourceVersion == "" {
		allErrs = append(allErrs, field.Required(field.NewPath("resourceVersion"), ""))
	}
	if len(pvc.Spec.AccessModes) == 0 {
		// kube capitalises this path.
		allErrs = append(allErrs, field.Required(field.NewPath("Spec", "accessModes"), ""))
	}
	capPath := field.NewPath("status", "capacity")
	for r, q := range pvc.Status.Capacity {
		allErrs = append(allErrs, basicResource(q, capPath.Key(string(r)))...)
	}
	statusPath := field.NewPath("status", "allocatedResourceStatus")
	for k, v := range pvc.Status.AllocatedResourceStatuses {
		allErrs = append(allErrs, pvcResourceKey(k, statusPath)...)
		known := false
		for _, s := range validResizeStatuses {
			known = known || v == s
		}
		if !known {
			allErrs = append(allErrs, field.NotSupported(statusPath, k, validResizeStatuses))
		}
	}
	allocPath := field.NewPath("status", "allocatedResources")
	for r, q := range pvc.Status.AllocatedResources {
		if errs := pvcResourceKey(r, allocPath); len(errs) > 0 {
			allErrs = append(allErrs, errs...)
			continue
		}
		if errs := basicResource(q, allocPath.Key(string(r))); len(errs) > 0 {
			allErrs = append(allErrs, errs...)
		} else {
			allErrs = append(allErrs, resourceQuantityValue(corev1.ResourceStorage, q, allocPath.Key(string(r)))...)
		}
	}
	return allErrs
}

// pvcResourceKey: a qualified name, and "storage" if it is a native one.
func pvcResourceKey(name corev1.ResourceName, fldPath *field.Path) field.ErrorList {
	if errs := qualifiedName(string(name), fldPath); len(errs) != 0 {
		return errs
	}
	if isNativeResource(name) && name != corev1.ResourceStorage {
		return field.ErrorList{field.NotSupported(fldPath, name, []corev1.ResourceName{corev1.ResourceStorage})}
	}
	return nil
}
