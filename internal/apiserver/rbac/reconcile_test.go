package rbac

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestReconcileClusterRole(t *testing.T) {
	get := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	list := rbacv1.PolicyRule{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	mine := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"secrets"}}
	want := &rbacv1.ClusterRole{ObjectMeta: bootstrapMeta("r"), Rules: []rbacv1.PolicyRule{get, list}}

	t.Run("a missing rule, label and annotation come back and the administrator's rule stays", func(t *testing.T) {
		cur := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Rules: []rbacv1.PolicyRule{get, mine}}
		out, changed := ReconcileClusterRole(cur, want)
		if !changed || len(out.Rules) != 3 || !HasRule(out.Rules, list) || !HasRule(out.Rules, mine) {
			t.Errorf("changed %v rules %v", changed, out.Rules)
		}
		if out.Labels[bootstrapLabel] != bootstrapLabelValue || out.Annotations[autoupdateAnnotation] != "true" {
			t.Errorf("meta %v %v", out.Labels, out.Annotations)
		}
		if len(cur.Rules) != 2 {
			t.Error("the existing role was modified in place")
		}
	})
	t.Run("a complete role is unchanged", func(t *testing.T) {
		if _, changed := ReconcileClusterRole(want.DeepCopy(), want); changed {
			t.Error("changed")
		}
	})
	t.Run("an aggregated role gets its selectors back, never rules", func(t *testing.T) {
		agg := want.DeepCopy()
		agg.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{AggregateToView: "true"}}}}
		cur := &rbacv1.ClusterRole{ObjectMeta: bootstrapMeta("r")}
		out, changed := ReconcileClusterRole(cur, agg)
		if !changed || out.AggregationRule == nil || len(out.AggregationRule.ClusterRoleSelectors) != 1 || len(out.Rules) != 0 {
			t.Errorf("changed %v role %+v", changed, out)
		}
	})
	t.Run("autoupdate false protects a role", func(t *testing.T) {
		m := bootstrapMeta("r")
		m.Annotations[autoupdateAnnotation] = "false"
		if AutoUpdate(m) || !AutoUpdate(metav1.ObjectMeta{}) {
			t.Error("AutoUpdate")
		}
	})
}

func TestReconcileClusterRoleBinding(t *testing.T) {
	want := BootstrapClusterRoleBindings()[0]
	t.Run("a removed subject comes back and an added one stays", func(t *testing.T) {
		cur := want.DeepCopy()
		cur.Subjects = []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "carol"}}
		out, changed, ok := ReconcileClusterRoleBinding(cur, want)
		if !ok || !changed || len(out.Subjects) != 2 {
			t.Errorf("ok %v changed %v subjects %v", ok, changed, out.Subjects)
		}
	})
	t.Run("a binding to another role is left alone", func(t *testing.T) {
		cur := want.DeepCopy()
		cur.RoleRef.Name = "view"
		if _, _, ok := ReconcileClusterRoleBinding(cur, want); ok {
			t.Error("ok")
		}
	})
}
