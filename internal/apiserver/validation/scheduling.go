package validation

import (
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var validTaintEffects = []corev1.TaintEffect{
	corev1.TaintEffectNoSchedule,
	corev1.TaintEffectPreferNoSchedule,
	corev1.TaintEffectNoExecute,
}

func taintEffect(effect corev1.TaintEffect, allowEmpty bool, fldPath *field.Path) field.ErrorList {
	if !allowEmpty && effect == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	switch effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		return nil
	}
	return field.ErrorList{field.NotSupported(fldPath, effect, validTaintEffects)}
}

// taints validates node taints: key, value and effect of each, and that no
// two taints share a key and effect.
func taints(ts []corev1.Taint, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	type keyEffect struct {
		key    string
		effect corev1.TaintEffect
	}
	seen := map[keyEffect]bool{}
	for i, t := range ts {
		idxPath := fldPath.Index(i)
		allErrs = append(allErrs, metav1validation.ValidateLabelName(t.Key, idxPath.Child("key"))...)
		if errs := utilvalidation.IsValidLabelValue(t.Value); len(errs) != 0 {
			allErrs = append(allErrs, field.Invalid(idxPath.Child("value"), t.Value, strings.Join(errs, ";")))
		}
		allErrs = append(allErrs, taintEffect(t.Effect, false, idxPath.Child("effect"))...)
		k := keyEffect{t.Key, t.Effect}
		if seen[k] {
			dup := field.Duplicate(idxPath, t)
			dup.Detail = "taints must be unique by key and effect pair"
			allErrs = append(allErrs, dup)
			continue
		}
		seen[k] = true
	}
	return allErrs
}

// tolerations validates pod tolerations.
func tolerations(ts []corev1.Toleration, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, t := range ts {
		idxPath := fldPath.Index(i)
		if t.Key != "" {
			allErrs = append(allErrs, metav1validation.ValidateLabelName(t.Key, idxPath.Child("key"))...)
		}
		// An empty key with operator Exists matches every taint.
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			allErrs = append(allErrs, field.Invalid(idxPath.Child("operator"), t.Operator,
				"operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			allErrs = append(allErrs, field.Invalid(idxPath.Child("effect"), t.Effect,
				"effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			if errs := utilvalidation.IsValidLabelValue(t.Value); len(errs) != 0 {
				allErrs = append(allErrs, field.Invalid(idxPath.Child("operator"), t.Value, strings.Join(errs, ";")))
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				allErrs = append(allErrs, field.Invalid(idxPath.Child("operator"), t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			allErrs = append(allErrs, field.NotSupported(idxPath.Child("operator"), t.Operator,
				[]corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
		}
		if t.Effect != "" {
			allErrs = append(allErrs, taintEffect(t.Effect, true, idxPath.Child("effect"))...)
		}
	}
	return allErrs
}

// onlyAddedTolerations allows a pod update to add tolerations and to change
// the tolerationSeconds of existing ones, nothing else.
func onlyAddedTolerations(newTs, oldTs []corev1.Toleration, fldPath *field.Path) field.ErrorList {
	for _, old := range oldTs {
		found := false
		for _, nt := range newTs {
			o := old
			o.TolerationSeconds = nt.TolerationSeconds
			if reflect.DeepEqual(o, nt) {
				found = true
				break
			}
		}
		if !found {
			return field.ErrorList{field.Forbidden(fldPath, "existing toleration can not be modified except its tolerationSeconds")}
		}
	}
	return tolerations(newTs, fldPath)
}

func nodeSelectorRequirement(rq corev1.NodeSelectorRequirement, allowInvalidValue bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	switch rq.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(rq.Values) == 0 {
			allErrs = append(allErrs, field.Required(fldPath.Child("values"), "must be specified when `operator` is 'In' or 'NotIn'"))
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(rq.Values) > 0 {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(rq.Values) != 1 {
			allErrs = append(allErrs, field.Required(fldPath.Child("values"), "must be specified single value when `operator` is 'Lt' or 'Gt'"))
		}
	default:
		allErrs = append(allErrs, field.Invalid(fldPath.Child("operator"), rq.Operator, "not a valid selector operator"))
	}
	allErrs = append(allErrs, metav1validation.ValidateLabelName(rq.Key, fldPath.Child("key"))...)
	if !allowInvalidValue {
		for i, v := range rq.Values {
			allErrs = append(allErrs, invalidEach(fldPath.Child("values").Index(i), v, utilvalidation.IsValidLabelValue(v))...)
		}
	}
	return allErrs
}

func nodeFieldSelectorRequirement(rq corev1.NodeSelectorRequirement, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	switch rq.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(rq.Values) != 1 {
			allErrs = append(allErrs, field.Required(fldPath.Child("values"),
				"must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
		}
	default:
		allErrs = append(allErrs, field.Invalid(fldPath.Child("operator"), rq.Operator, "not a valid selector operator"))
	}
	if rq.Key != metav1.ObjectNameField {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("key"), rq.Key, "not a valid field selector key"))
	} else {
		for i, v := range rq.Values {
			allErrs = append(allErrs, dnsSubdomain(v, fldPath.Child("values").Index(i))...)
		}
	}
	return allErrs
}

func nodeSelectorTerm(term corev1.NodeSelectorTerm, allowInvalidValue bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for j, rq := range term.MatchExpressions {
		allErrs = append(allErrs, nodeSelectorRequirement(rq, allowInvalidValue, fldPath.Child("matchExpressions").Index(j))...)
	}
	for j, rq := range term.MatchFields {
		allErrs = append(allErrs, nodeFieldSelectorRequirement(rq, fldPath.Child("matchFields").Index(j))...)
	}
	return allErrs
}

// nodeSelector validates a required node selector (pod node affinity, PV
// node affinity): at least one term, each requirement well formed.
func nodeSelector(ns *corev1.NodeSelector, fldPath *field.Path) field.ErrorList {
	termsPath := fldPath.Child("nodeSelectorTerms")
	if len(ns.NodeSelectorTerms) == 0 {
		return field.ErrorList{field.Required(termsPath, "must have at least one node selector term")}
	}
	var allErrs field.ErrorList
	for i, term := range ns.NodeSelectorTerms {
		allErrs = append(allErrs, nodeSelectorTerm(term, false, termsPath.Index(i))...)
	}
	return allErrs
}

func affinity(a *corev1.Affinity, fldPath *field.Path) field.ErrorList {
	if a == nil {
		return nil
	}
	var allErrs field.ErrorList
	if na := a.NodeAffinity; na != nil {
		naPath := fldPath.Child("nodeAffinity")
		if na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			allErrs = append(allErrs, nodeSelector(na.RequiredDuringSchedulingIgnoredDuringExecution, naPath.Child("requiredDuringSchedulingIgnoredDuringExecution"))...)
		}
		prefPath := naPath.Child("preferredDuringSchedulingIgnoredDuringExecution")
		for i, term := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			if term.Weight <= 0 || term.Weight > 100 {
				allErrs = append(allErrs, field.Invalid(prefPath.Index(i).Child("weight"), term.Weight, "must be in the range 1-100"))
			}
			// Preferred terms may carry invalid label values: they can
			// still be satisfied on a single-node cluster.
			allErrs = append(allErrs, nodeSelectorTerm(term.Preference, true, prefPath.Index(i).Child("preference"))...)
		}
	}
	if pa := a.PodAffinity; pa != nil {
		allErrs = append(allErrs, podAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, fldPath.Child("podAffinity"))...)
	}
	if pa := a.PodAntiAffinity; pa != nil {
		allErrs = append(allErrs, podAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, fldPath.Child("podAntiAffinity"))...)
	}
	return allErrs
}

func podAffinityTerms(required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, term := range required {
		allErrs = append(allErrs, podAffinityTerm(term, fldPath.Child("requiredDuringSchedulingIgnoredDuringExecution").Index(i))...)
	}
	prefPath := fldPath.Child("preferredDuringSchedulingIgnoredDuringExecution")
	for i, wt := range preferred {
		if wt.Weight <= 0 || wt.Weight > 100 {
			allErrs = append(allErrs, field.Invalid(prefPath.Index(i).Child("weight"), wt.Weight, "must be in the range 1-100"))
		}
		allErrs = append(allErrs, podAffinityTerm(wt.PodAffinityTerm, prefPath.Index(i).Child("podAffinityTerm"))...)
	}
	return allErrs
}

func podAffinityTerm(term corev1.PodAffinityTerm, fldPath *field.Path) field.ErrorList {
	opts := metav1validation.LabelSelectorValidationOptions{}
	allErrs := metav1validation.ValidateLabelSelector(term.LabelSelector, opts, fldPath.Child("labelSelector"))
	allErrs = append(allErrs, metav1validation.ValidateLabelSelector(term.NamespaceSelector, opts, fldPath.Child("namespaceSelector"))...)
	for _, ns := range term.Namespaces {
		allErrs = append(allErrs, dnsLabel(ns, fldPath.Child("namespace"))...)
	}
	allErrs = append(allErrs, matchLabelKeys(fldPath, term.MatchLabelKeys, term.MismatchLabelKeys, term.LabelSelector)...)
	if term.TopologyKey == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("topologyKey"), "can not be empty"))
	}
	return append(allErrs, metav1validation.ValidateLabelName(term.TopologyKey, fldPath.Child("topologyKey"))...)
}

func matchLabelKeys(fldPath *field.Path, match, mismatch []string, selector *metav1.LabelSelector) field.ErrorList {
	var allErrs field.ErrorList
	for _, kk := range []struct {
		name string
		keys []string
	}{{"matchLabelKeys", match}, {"mismatchLabelKeys", mismatch}} {
		name, keys := kk.name, kk.keys
		if len(keys) == 0 {
			continue
		}
		if selector == nil {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child(name), "must not be specified when labelSelector is not set"))
			continue
		}
		for i, k := range keys {
			allErrs = append(allErrs, metav1validation.ValidateLabelName(k, fldPath.Child(name).Index(i))...)
		}
	}
	mismatchSet := map[string]bool{}
	for _, k := range mismatch {
		mismatchSet[k] = true
	}
	for i, k := range match {
		if mismatchSet[k] {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("matchLabelKeys").Index(i), k, "exists in both matchLabelKeys and mismatchLabelKeys"))
		}
	}
	return allErrs
}

var (
	validUnsatisfiableActions  = []corev1.UnsatisfiableConstraintAction{corev1.DoNotSchedule, corev1.ScheduleAnyway}
	validNodeInclusionPolicies = []corev1.NodeInclusionPolicy{corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore}
)

func topologySpreadConstraints(cs []corev1.TopologySpreadConstraint, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, c := range cs {
		p := fldPath.Index(i)
		if c.MaxSkew <= 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("maxSkew"), c.MaxSkew, isNotPositiveErrorMsg))
		}
		if c.TopologyKey == "" {
			allErrs = append(allErrs, field.Required(p.Child("topologyKey"), "can not be empty"))
		}
		if c.WhenUnsatisfiable != corev1.DoNotSchedule && c.WhenUnsatisfiable != corev1.ScheduleAnyway {
			allErrs = append(allErrs, field.NotSupported(p.Child("whenUnsatisfiable"), c.WhenUnsatisfiable, validUnsatisfiableActions))
		}
		for _, rest := range cs[i+1:] {
			if c.TopologyKey == rest.TopologyKey && c.WhenUnsatisfiable == rest.WhenUnsatisfiable {
				allErrs = append(allErrs, field.Duplicate(p.Child("{topologyKey, whenUnsatisfiable}"), fmt.Sprintf("{%v, %v}", c.TopologyKey, c.WhenUnsatisfiable)))
				break
			}
		}
		if c.MinDomains != nil {
			if *c.MinDomains <= 0 {
				allErrs = append(allErrs, field.Invalid(p.Child("minDomains"), c.MinDomains, isNotPositiveErrorMsg))
			}
			if c.WhenUnsatisfiable != corev1.DoNotSchedule {
				allErrs = append(allErrs, field.Invalid(p.Child("minDomains"), c.MinDomains,
					fmt.Sprintf("can only use minDomains if whenUnsatisfiable=%s, not %s", corev1.DoNotSchedule, c.WhenUnsatisfiable)))
			}
		}
		for _, np := range []struct {
			name   string
			policy *corev1.NodeInclusionPolicy
		}{{"nodeAffinityPolicy", c.NodeAffinityPolicy}, {"nodeTaintsPolicy", c.NodeTaintsPolicy}} {
			name, policy := np.name, np.policy
			if policy != nil && *policy != corev1.NodeInclusionPolicyHonor && *policy != corev1.NodeInclusionPolicyIgnore {
				allErrs = append(allErrs, field.NotSupported(p.Child(name), policy, validNodeInclusionPolicies))
			}
		}
		if len(c.MatchLabelKeys) > 0 {
			mlkPath := p.Child("matchLabelKeys")
			if c.LabelSelector == nil {
				allErrs = append(allErrs, field.Forbidden(mlkPath, "must not be specified when labelSelector is not set"))
			}
			for j, k := range c.MatchLabelKeys {
				allErrs = append(allErrs, metav1validation.ValidateLabelName(k, mlkPath.Index(j))...)
			}
		}
		allErrs = append(allErrs, metav1validation.ValidateLabelSelector(c.LabelSelector, metav1validation.LabelSelectorValidationOptions{}, p.Child("labelSelector"))...)
	}
	return allErrs
}
