// Package clusterroleaggregation is upstream's clusterrole-aggregation
// controller: a ClusterRole with an aggregationRule holds the union of the
// rules of the ClusterRoles its selectors match, kept current as those
// roles are created, changed or deleted. That is how a role labelled
// rbac.authorization.k8s.io/aggregate-to-view: "true" extends view (and,
// through the chain view → edit → admin, the others).
//
// Aggregate is the pure decision; the controller shell watches ClusterRoles
// through an informer and writes through the API.
package clusterroleaggregation

import (
	"fmt"
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// ControllerName is the upstream kube-controller-manager name.
const ControllerName = "clusterrole-aggregation-controller"

// Aggregate returns the rules role should hold: every rule of every other
// ClusterRole matched by one of its aggregationRule's selectors, roles taken
// in name order per selector, each rule once (as upstream, a rule equal to
// one already taken is skipped). ok is false when role has no
// aggregationRule. A selector that does not parse is an error naming it.
func Aggregate(role *rbacv1.ClusterRole, all []*rbacv1.ClusterRole) (rules []rbacv1.PolicyRule, ok bool, err error) {
	if role.AggregationRule == nil {
		return nil, false, nil
	}
	sorted := append([]*rbacv1.ClusterRole{}, all...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	rules = []rbacv1.PolicyRule{}
	for i, sel := range role.AggregationRule.ClusterRoleSelectors {
		s, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil {
			return nil, true, fmt.Errorf("aggregationRule.clusterRoleSelectors[%d]: %w", i, err)
		}
		for _, other := range sorted {
			if other.Name == role.Name || !s.Matches(labels.Set(other.Labels)) {
				continue
			}
			for _, r := range other.Rules {
				if !contains(rules, r) {
					rules = append(rules, *r.DeepCopy())
				}
			}
		}
	}
	return rules, true, nil
}

// NeedsUpdate reports whether role's rules differ from rules (nil and empty
// are the same).
func NeedsUpdate(role *rbacv1.ClusterRole, rules []rbacv1.PolicyRule) bool {
	if len(role.Rules) == 0 && len(rules) == 0 {
		return false
	}
	return !equality.Semantic.DeepEqual(role.Rules, rules)
}

func contains(rules []rbacv1.PolicyRule, r rbacv1.PolicyRule) bool {
	for _, have := range rules {
		if equality.Semantic.DeepEqual(have, r) {
			return true
		}
	}
	return false
}
