package validation

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const maxProvisionerParameterSize = 256 * (1 << 10) // 256 kB

var (
	storageClassReclaimPolicies = []string{string(corev1.PersistentVolumeReclaimDelete), string(corev1.PersistentVolumeReclaimRetain)}
	volumeBindingModes          = []string{string(storagev1.VolumeBindingImmediate), string(storagev1.VolumeBindingWaitForFirstConsumer)}
)

// StorageClass validates a storage.k8s.io/v1 StorageClass on create: the
// provisioner is a qualified name (as a CSI driver name), parameters stay
// within 256 kB and have no empty key, reclaimPolicy is Delete or Retain,
// volumeBindingMode is Immediate or WaitForFirstConsumer, and allowed
// topologies name at least one term.
func StorageClass(sc *storagev1.StorageClass) field.ErrorList {
	allErrs := objectMeta(&sc.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, metadataPath)
	allErrs = append(allErrs, provisioner(sc.Provisioner, field.NewPath("provisioner"))...)
	allErrs = append(allErrs, storageParameters(sc.Parameters, field.NewPath("parameters"))...)
	if sc.ReclaimPolicy == nil {
		allErrs = append(allErrs, field.Required(field.NewPath("reclaimPolicy"), ""))
	} else if !sets.New(storageClassReclaimPolicies...).Has(string(*sc.ReclaimPolicy)) {
		allErrs = append(allErrs, field.NotSupported(field.NewPath("reclaimPolicy"), *sc.ReclaimPolicy, storageClassReclaimPolicies))
	}
	if sc.VolumeBindingMode == nil {
		allErrs = append(allErrs, field.Required(field.NewPath("volumeBindingMode"), ""))
	} else if !sets.New(volumeBindingModes...).Has(string(*sc.VolumeBindingMode)) {
		allErrs = append(allErrs, field.NotSupported(field.NewPath("volumeBindingMode"), *sc.VolumeBindingMode, volumeBindingModes))
	}
	topoPath := field.NewPath("allowedTopologies")
	for i, term := range sc.AllowedTopologies {
		if len(term.MatchLabelExpressions) == 0 {
			allErrs = append(allErrs, field.Required(topoPath.Index(i).Child("matchLabelExpressions"), "must contain at least one key-value pair"))
		}
		for j, req := range term.MatchLabelExpressions {
			p := topoPath.Index(i).Child("matchLabelExpressions").Index(j)
			allErrs = append(allErrs, qualifiedName(req.Key, p.Child("key"))...)
			if len(req.Values) == 0 {
				allErrs = append(allErrs, field.Required(p.Child("values"), "must contain at least one value"))
			}
		}
	}
	return allErrs
}

// StorageClassUpdate validates an update: parameters, provisioner,
// reclaimPolicy and volumeBindingMode are immutable.
func StorageClassUpdate(sc, old *storagev1.StorageClass) field.ErrorList {
	allErrs := objectMetaUpdate(&sc.ObjectMeta, &old.ObjectMeta, metadataPath)
	allErrs = append(allErrs, StorageClass(sc)...)
	if !equality.Semantic.DeepEqual(sc.Parameters, old.Parameters) {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("parameters"), "updates to parameters are forbidden."))
	}
	if sc.Provisioner != old.Provisioner {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("provisioner"), "updates to provisioner are forbidden."))
	}
	if !equality.Semantic.DeepEqual(sc.ReclaimPolicy, old.ReclaimPolicy) {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("reclaimPolicy"), "updates to reclaimPolicy are forbidden."))
	}
	allErrs = append(allErrs, immutable(sc.VolumeBindingMode, old.VolumeBindingMode, field.NewPath("volumeBindingMode"))...)
	return allErrs
}

func provisioner(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	return qualifiedName(name, fldPath)
}

func storageParameters(params map[string]string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	size := 0
	for k, v := range params {
		if k == "" {
			allErrs = append(allErrs, field.Invalid(fldPath, k, "field can not be empty."))
		}
		size += len(k) + len(v)
	}
	if size > maxProvisionerParameterSize {
		allErrs = append(allErrs, field.TooLong(fldPath, "", maxProvisionerParameterSize))
	}
	return allErrs
}
