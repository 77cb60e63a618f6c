package validation

import (
	"math"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	maxAttachedVolumeMetadataSize = 256 * (1 << 10) // 256 kB
	maxVolumeErrorMessageSize     = 1024
)

// VolumeAttachment validates a storage.k8s.io/v1 VolumeAttachment on
// create: attacher is a CSI driver name, nodeName a DNS subdomain, exactly
// one of source.persistentVolumeName and source.inlineVolumeSpec is set,
// and status metadata and error messages stay within kube's limits.
func VolumeAttachment(va *storagev1.VolumeAttachment) field.ErrorList {
	allErrs := volumeAttachment(va)
	// storage.k8s.io/v1 adds these on create.
	allErrs = append(allErrs, csiDriverName(va.Spec.Attacher, field.NewPath("spec", "attacher"))...)
	if pv := va.Spec.Source.PersistentVolumeName; pv != nil {
		allErrs = append(allErrs, invalidEach(field.NewPath("spec", "source", "persistentVolumeName"), *pv, apivalidation.NameIsDNSSubdomain(*pv, false))...)
	}
	return allErrs
}

// VolumeAttachmentUpdate validates an update: the spec is read-only.
func VolumeAttachmentUpdate(va, old *storagev1.VolumeAttachment) field.ErrorList {
	allErrs := volumeAttachment(va)
	if !equality.Semantic.DeepEqual(old.Spec, va.Spec) {
		allErrs = append(allErrs, field.Invalid(specPath, va.Spec, fieldImmutableMsg))
	}
	return allErrs
}

// VolumeAttachmentStatusUpdate validates an update through the status
// subresource (the spec is carried over from the stored object).
func VolumeAttachmentStatusUpdate(va, old *storagev1.VolumeAttachment) field.ErrorList {
	return VolumeAttachmentUpdate(va, old)
}

func volumeAttachment(va *storagev1.VolumeAttachment) field.ErrorList {
	allErrs := objectMeta(&va.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, metadataPath)
	if va.Spec.Attacher == "" {
		allErrs = append(allErrs, field.Required(specPath.Child("attacher"), ""))
	}
	srcPath := specPath.Child("source")
	const oneSource = "must specify exactly one of inlineVolumeSpec and persistentVolumeName"
	switch src := va.Spec.Source; {
	case src.InlineVolumeSpec == nil && src.PersistentVolumeName == nil:
		allErrs = append(allErrs, field.Required(srcPath, oneSource))
	case src.InlineVolumeSpec != nil && src.PersistentVolumeName != nil:
		allErrs = append(allErrs, field.Forbidden(srcPath, oneSource))
	case src.PersistentVolumeName != nil:
		if *src.PersistentVolumeName == "" {
			allErrs = append(allErrs, field.Required(srcPath.Child("persistentVolumeName"), "must specify non empty persistentVolumeName"))
		}
	default:
		allErrs = append(allErrs, pvSpec(src.InlineVolumeSpec, true, srcPath.Child("inlineVolumeSpec"))...)
	}
	allErrs = append(allErrs, dnsSubdomain(va.Spec.NodeName, specPath.Child("nodeName"))...)

	statusPath := field.NewPath("status")
	size := 0
	for k, v := range va.Status.AttachmentMetadata {
		size += len(k) + len(v)
	}
	if size > maxAttachedVolumeMetadataSize {
		allErrs = append(allErrs, field.TooLong(statusPath.Child("attachmentMetadata"), "", maxAttachedVolumeMetadataSize))
	}
	allErrs = append(allErrs, volumeError(va.Status.AttachError, statusPath.Child("attachError"))...)
	allErrs = append(allErrs, volumeError(va.Status.DetachError, statusPath.Child("detachError"))...)
	return allErrs
}

func volumeError(e *storagev1.VolumeError, fldPath *field.Path) field.ErrorList {
	if e == nil {
		return nil
	}
	var allErrs field.ErrorList
	if len(e.Message) > maxVolumeErrorMessageSize {
		// kube reports the metadata limit here, not the 1024 it checks.
		allErrs = append(allErrs, field.TooLong(fldPath.Child("message"), "", maxAttachedVolumeMetadataSize))
	}
	if e.ErrorCode != nil && *e.ErrorCode < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("errorCode"), *e.ErrorCode, utilvalidation.InclusiveRangeError(0, math.MaxInt32)))
	}
	return allErrs
}
