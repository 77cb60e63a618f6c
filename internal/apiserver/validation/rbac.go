package validation

import (
	rbacv1 "k8s.io/api/rbac/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// rbacName is upstream's rule for role and binding names: any path
// segment name (colons allowed, "." and ".." and "/" and "%" not).
func rbacName(name string, prefix bool) []string { return path.IsValidPathSegmentName(name) }

// Role validates a Role: metadata, and rules that each name verbs and
// apiGroups and resources; a namespaced role may not name non-resource
// URLs. Verbs are free strings as upstream (custom verbs such as "use"
// or "escalate" are legal).
func Role(r *rbacv1.Role) field.ErrorList {
	allErrs := apivalidation.ValidateObjectMeta(&r.ObjectMeta, true, rbacName, metadataPath)
	for i, rule := range r.Rules {
		allErrs = append(allErrs, policyRule(rule, true, field.NewPath("rules").Index(i))...)
	}
	return allErrs
}

// RoleUpdate validates a Role update.
func RoleUpdate(r, old *rbacv1.Role) field.ErrorList {
	allErrs := apivalidation.ValidateObjectMetaUpdate(&r.ObjectMeta, &old.ObjectMeta, metadataPath)
	return append(allErrs, Role(r)...)
}

// ClusterRole validates a ClusterRole; an aggregationRule needs at least
// one valid label selector (nodeplane stores it but aggregates nothing).
func ClusterRole(r *rbacv1.ClusterRole) field.ErrorList {
	allErrs := apivalidation.ValidateObjectMeta(&r.ObjectMeta, false, rbacName, metadataPath)
	for i, rule := range r.Rules {
		allErrs = append(allErrs, policyRule(rule, false, field.NewPath("rules").Index(i))...)
	}
	if r.AggregationRule != nil {
		p := field.NewPath("aggregationRule", "clusterRoleSelectors")
		if len(r.AggregationRule.ClusterRoleSelectors) == 0 {
			allErrs = append(allErrs, field.Required(p, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
		}
		for i := range r.AggregationRule.ClusterRoleSelectors {
			allErrs = append(allErrs, metav1validation.ValidateLabelSelector(&r.AggregationRule.ClusterRoleSelectors[i], metav1validation.LabelSelectorValidationOptions{}, p.Index(i))...)
		}
	}
	return allErrs
}

// ClusterRoleUpdate validates a ClusterRole update.
func ClusterRoleUpdate(r, old *rbacv1.ClusterRole) field.ErrorList {
	allErrs := apivalidation.ValidateObjectMetaUpdate(&r.ObjectMeta, &old.ObjectMeta, metadataPath)
	return append(allErrs, ClusterRole(r)...)
}

func policyRule(rule rbacv1.PolicyRule, namespaced bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(rule.Verbs) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("verbs"), "verbs must contain at least one value"))
	}
	if len(rule.NonResourceURLs) > 0 {
		if namespaced {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("nonResourceURLs"), rule.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
		}
		if len(rule.APIGroups) > 0 || len(rule.Resources) > 0 || len(rule.ResourceNames) > 0 {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("nonResourceURLs"), rule.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
		}
		return allErrs
	}
	if len(rule.APIGroups) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("apiGroups"), "resource rules must supply at least one api group"))
	}
	if len(rule.Resources) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("resources"), "resource rules must supply at least one resource"))
	}
	return allErrs
}

// RoleBinding validates a RoleBinding: roleRef names a Role or ClusterRole
// of rbac.authorization.k8s.io, subjects are valid. The role need not
// exist (a binding to a missing role grants nothing).
func RoleBinding(b *rbacv1.RoleBinding) field.ErrorList {
	allErrs := apivalidation.ValidateObjectMeta(&b.ObjectMeta, true, rbacName, metadataPath)
	allErrs = append(allErrs, roleRef(b.RoleRef, []string{"Role", "ClusterRole"}, field.NewPath("roleRef"))...)
	return append(allErrs, subjects(b.Subjects, true, field.NewPath("subjects"))...)
}

// RoleBindingUpdate validates a RoleBinding update: roleRef is immutable.
func RoleBindingUpdate(b, old *rbacv1.RoleBinding) field.ErrorList {
	allErrs := apivalidation.ValidateObjectMetaUpdate(&b.ObjectMeta, &old.ObjectMeta, metadataPath)
	if b.RoleRef != old.RoleRef {
		allErrs = append(allErrs, field.Invalid(field.NewPath("roleRef"), b.RoleRef, "cannot change roleRef"))
	}
	return append(allErrs, RoleBinding(b)...)
}

// ClusterRoleBinding validates a ClusterRoleBinding: roleRef names a
// ClusterRole; ServiceAccount subjects need a namespace.
func ClusterRoleBinding(b *rbacv1.ClusterRoleBinding) field.ErrorList {
	allErrs := apivalidation.ValidateObjectMeta(&b.ObjectMeta, false, rbacName, metadataPath)
	allErrs = append(allErrs, roleRef(b.RoleRef, []string{"ClusterRole"}, field.NewPath("roleRef"))...)
	return append(allErrs, subjects(b.Subjects, false, field.NewPath("subjects"))...)
}

// ClusterRoleBindingUpdate validates a ClusterRoleBinding update: roleRef
// is immutable.
func ClusterRoleBindingUpdate(b, old *rbacv1.ClusterRoleBinding) field.ErrorList {
	allErrs := apivalidation.ValidateObjectMetaUpdate(&b.ObjectMeta, &old.ObjectMeta, metadataPath)
	if b.RoleRef != old.RoleRef {
		allErrs = append(allErrs, field.Invalid(field.NewPath("roleRef"), b.RoleRef, "cannot change roleRef"))
	}
	return append(allErrs, ClusterRoleBinding(b)...)
}

func roleRef(ref rbacv1.RoleRef, kinds []string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if ref.APIGroup != rbacv1.GroupName {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	known := false
	for _, k := range kinds {
		known = known || ref.Kind == k
	}
	if !known {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("name"), ""))
	} else {
		for _, msg := range rbacName(ref.Name, false) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("name"), ref.Name, msg))
		}
	}
	return allErrs
}

func subjects(list []rbacv1.Subject, namespaced bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, s := range list {
		p := fldPath.Index(i)
		if s.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		}
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			if s.Name != "" {
				allErrs = append(allErrs, invalidEach(p.Child("name"), s.Name, apivalidation.ValidateServiceAccountName(s.Name, false))...)
			}
			if s.APIGroup != "" {
				allErrs = append(allErrs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{""}))
			}
			if !namespaced && s.Namespace == "" {
				allErrs = append(allErrs, field.Required(p.Child("namespace"), ""))
			}
		case rbacv1.UserKind, rbacv1.GroupKind:
			if s.APIGroup != rbacv1.GroupName {
				allErrs = append(allErrs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
			}
		default:
			allErrs = append(allErrs, field.NotSupported(p.Child("kind"), s.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
		}
	}
	return allErrs
}
