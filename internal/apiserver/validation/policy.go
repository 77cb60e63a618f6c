package validation

import (
	policyv1 "k8s.io/api/policy/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// unhealthyPodEvictionPolicies are the values spec.unhealthyPodEvictionPolicy
// accepts (unset means IfHealthyBudget).
var unhealthyPodEvictionPolicies = []string{string(policyv1.AlwaysAllow), string(policyv1.IfHealthyBudget)}

// PodDisruptionBudget validates a policy/v1 PodDisruptionBudget on create:
// at most one of minAvailable and maxUnavailable (neither is allowed, as in
// kube: such a budget wants no healthy pods), each a non-negative integer
// or a percentage of at most 100%, a valid selector (optional: a missing
// selector selects no pods, an empty one every pod) and a known
// unhealthyPodEvictionPolicy. The status is the server's (cleared on
// create), so it is not checked here.
func PodDisruptionBudget(pdb *policyv1.PodDisruptionBudget) field.ErrorList {
	allErrs := objectMeta(&pdb.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metadataPath)
	return append(allErrs, pdbSpec(&pdb.Spec, false, specPath)...)
}

// PodDisruptionBudgetUpdate validates an update: the spec is mutable (since
// Kubernetes 1.15) under the create rules; a selector that already carried
// label values the current rules refuse may keep them.
func PodDisruptionBudgetUpdate(pdb, old *policyv1.PodDisruptionBudget) field.ErrorList {
	allErrs := objectMetaUpdate(&pdb.ObjectMeta, &old.ObjectMeta, metadataPath)
	allowInvalid := old.Spec.Selector != nil &&
		len(metav1validation.ValidateLabelSelector(old.Spec.Selector, metav1validation.LabelSelectorValidationOptions{}, specPath.Child("selector"))) > 0
	return append(allErrs, pdbSpec(&pdb.Spec, allowInvalid, specPath)...)
}

// PodDisruptionBudgetStatusUpdate validates a write of the status
// subresource: valid conditions and non-negative counters.
func PodDisruptionBudgetStatusUpdate(pdb, old *policyv1.PodDisruptionBudget) field.ErrorList {
	allErrs := objectMetaUpdate(&pdb.ObjectMeta, &old.ObjectMeta, metadataPath)
	s, p := &pdb.Status, field.NewPath("status")
	allErrs = append(allErrs, metav1validation.ValidateConditions(s.Conditions, p.Child("conditions"))...)
	allErrs = append(allErrs, nonNegative(int64(s.DisruptionsAllowed), p.Child("disruptionsAllowed"))...)
	allErrs = append(allErrs, nonNegative(int64(s.CurrentHealthy), p.Child("currentHealthy"))...)
	allErrs = append(allErrs, nonNegative(int64(s.DesiredHealthy), p.Child("desiredHealthy"))...)
	return append(allErrs, nonNegative(int64(s.ExpectedPods), p.Child("expectedPods"))...)
}

func pdbSpec(spec *policyv1.PodDisruptionBudgetSpec, allowInvalidLabelValues bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if spec.MinAvailable != nil && spec.MaxUnavailable != nil {
		allErrs = append(allErrs, field.Invalid(fldPath, spec, "minAvailable and maxUnavailable cannot be both set"))
	}
	if v := spec.MinAvailable; v != nil {
		allErrs = append(allErrs, intOrPercent(*v, fldPath.Child("minAvailable"))...)
		allErrs = append(allErrs, notMoreThan100Percent(*v, fldPath.Child("minAvailable"))...)
	}
	if v := spec.MaxUnavailable; v != nil {
		allErrs = append(allErrs, intOrPercent(*v, fldPath.Child("maxUnavailable"))...)
		allErrs = append(allErrs, notMoreThan100Percent(*v, fldPath.Child("maxUnavailable"))...)
	}
	allErrs = append(allErrs, metav1validation.ValidateLabelSelector(spec.Selector,
		metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: allowInvalidLabelValues}, fldPath.Child("selector"))...)
	if p := spec.UnhealthyPodEvictionPolicy; p != nil && *p != policyv1.AlwaysAllow && *p != policyv1.IfHealthyBudget {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("unhealthyPodEvictionPolicy"), *p, unhealthyPodEvictionPolicies))
	}
	return allErrs
}
