package rbac

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AutoUpdate reports whether a default role or binding may be reconciled:
// unless its rbac.authorization.kubernetes.io/autoupdate annotation is
// "false", as upstream.
func AutoUpdate(m metav1.ObjectMeta) bool {
	return m.Annotations[autoupdateAnnotation] != "false"
}

// ReconcileClusterRole returns existing with what the default expected
// holds and existing lacks: missing labels and annotations, missing rules
// (or, for an aggregated role, missing aggregationRule selectors: its rules
// are the aggregation controller's). Nothing is removed, so an
// administrator's additions stay. changed is false when nothing is missing.
func ReconcileClusterRole(existing, expected *rbacv1.ClusterRole) (*rbacv1.ClusterRole, bool) {
	out := existing.DeepCopy()
	changed := mergeMeta(&out.ObjectMeta, expected.ObjectMeta)
	if expected.AggregationRule != nil {
		if out.AggregationRule == nil {
			out.AggregationRule = &rbacv1.AggregationRule{}
		}
		for _, sel := range expected.AggregationRule.ClusterRoleSelectors {
			if !hasSelector(out.AggregationRule.ClusterRoleSelectors, sel) {
				out.AggregationRule.ClusterRoleSelectors = append(out.AggregationRule.ClusterRoleSelectors, *sel.DeepCopy())
				changed = true
			}
		}
		return out, changed
	}
	for _, r := range expected.Rules {
		if !HasRule(out.Rules, r) {
			out.Rules = append(out.Rules, *r.DeepCopy())
			changed = true
		}
	}
	return out, changed
}

// ReconcileClusterRoleBinding returns existing with the default's missing
// labels, annotations and subjects added. A binding whose roleRef differs
// is left as it is (roleRef cannot change; ok is false).
func ReconcileClusterRoleBinding(existing, expected *rbacv1.ClusterRoleBinding) (out *rbacv1.ClusterRoleBinding, changed, ok bool) {
	if existing.RoleRef != expected.RoleRef {
		return existing, false, false
	}
	out = existing.DeepCopy()
	changed = mergeMeta(&out.ObjectMeta, expected.ObjectMeta)
	for _, s := range expected.Subjects {
		found := false
		for _, have := range out.Subjects {
			if have == s {
				found = true
				break
			}
		}
		if !found {
			out.Subjects = append(out.Subjects, s)
			changed = true
		}
	}
	return out, changed, true
}

func mergeMeta(out *metav1.ObjectMeta, expected metav1.ObjectMeta) bool {
	changed := false
	for k, v := range expected.Labels {
		if _, ok := out.Labels[k]; !ok {
			if out.Labels == nil {
				out.Labels = map[string]string{}
			}
			out.Labels[k] = v
			changed = true
		}
	}
	for k, v := range expected.Annotations {
		if _, ok := out.Annotations[k]; !ok {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
			changed = true
		}
	}
	return changed
}

func hasSelector(sels []metav1.LabelSelector, s metav1.LabelSelector) bool {
	for _, have := range sels {
		if equality.Semantic.DeepEqual(have, s) {
			return true
		}
	}
	return false
}
