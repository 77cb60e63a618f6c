package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestClusterRoleAggregation: a ClusterRole labelled
// rbac.authorization.k8s.io/aggregate-to-view adds its rule to view, and
// through the chain to edit and admin; removing the label takes it away
// again. After a restart the server gives the defaults back what they lost
// (a rule of system:aggregate-to-view, the aggregationRule of edit, a
// subject of cluster-admin's binding), except a role annotated
// rbac.authorization.kubernetes.io/autoupdate: "false".
func TestClusterRoleAggregation(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{apiOnly: true, args: []string{"--controllers=namespace-controller,clusterrole-aggregation-controller"}})
	cs := s.client()
	crs := cs.RbacV1().ClusterRoles()
	widgets := rbacv1.PolicyRule{Verbs: []string{"get", "list"}, APIGroups: []string{"example.com"}, Resources: []string{"widgets"}}

	if _, err := crs.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "widget-reader", Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
		Rules:      []rbacv1.PolicyRule{widgets},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"view", "edit", "admin"} {
		eventually(t, 15*time.Second, name+" holds the widgets rule", func() error { return holdsRule(ctx, cs, name, widgets, true) })
	}
	if allowed(ctx, t, cs, "dave", "viewers") {
		t.Error("dave (group viewers) may list widgets before any binding")
	}
	s.mustKubectl(t, kubectlPath(t), "create", "clusterrolebinding", "viewers", "--clusterrole=view", "--group=viewers")
	eventually(t, 10*time.Second, "a view holder may list widgets", func() error {
		if !allowed(ctx, t, cs, "dave", "viewers") {
			return fmt.Errorf("dave (group viewers, bound to view) may not list widgets")
		}
		return nil
	})

	wr, err := crs.Get(ctx, "widget-reader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wr.Labels = nil
	if _, err := crs.Update(ctx, wr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"view", "edit", "admin"} {
		eventually(t, 15*time.Second, name+" lost the widgets rule", func() error { return holdsRule(ctx, cs, name, widgets, false) })
	}

	// Damage the defaults, protect one, restart.
	podsRead := rbacv1.PolicyRule{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods", "persistentvolumeclaims", "events", "configmaps"}}
	atv, err := crs.Get(ctx, "system:aggregate-to-view", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	atv.Rules = atv.Rules[1:]
	if _, err := crs.Update(ctx, atv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	edit, err := crs.Get(ctx, "edit", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	edit.AggregationRule = nil
	if _, err := crs.Update(ctx, edit, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ate, err := crs.Get(ctx, "system:aggregate-to-edit", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ate.Annotations["rbac.authorization.kubernetes.io/autoupdate"] = "false"
	ate.Rules = ate.Rules[:1]
	if _, err := crs.Update(ctx, ate, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.RbacV1().ClusterRoleBindings().Delete(ctx, "system:basic-user", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	s.start()
	cs = s.client()
	crs = cs.RbacV1().ClusterRoles()

	if err := holdsRule(ctx, cs, "system:aggregate-to-view", podsRead, true); err != nil {
		t.Errorf("after restart: %v", err)
	}
	if edit, err := crs.Get(ctx, "edit", metav1.GetOptions{}); err != nil || edit.AggregationRule == nil || len(edit.AggregationRule.ClusterRoleSelectors) != 1 {
		t.Errorf("edit after restart: %v %+v", err, edit)
	}
	if ate, err := crs.Get(ctx, "system:aggregate-to-edit", metav1.GetOptions{}); err != nil || len(ate.Rules) != 1 {
		t.Errorf("system:aggregate-to-edit (autoupdate false) after restart: %v, rules %v", err, ate.Rules)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, "system:basic-user", metav1.GetOptions{}); err != nil {
		t.Errorf("system:basic-user binding after restart: %v", err)
	}
	eventually(t, 15*time.Second, "view holds the restored pods rule", func() error { return holdsRule(ctx, cs, "view", podsRead, true) })
}

// holdsRule checks whether ClusterRole name has rule (or, with want false,
// has not).
func holdsRule(ctx context.Context, cs kubernetes.Interface, name string, rule rbacv1.PolicyRule, want bool) error {
	r, err := cs.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	has := false
	for _, have := range r.Rules {
		if fmt.Sprint(have) == fmt.Sprint(rule) {
			has = true
		}
	}
	if has != want {
		return fmt.Errorf("clusterrole %s: holds %v = %v, want %v (rules %v)", name, rule, has, want, r.Rules)
	}
	return nil
}

// allowed asks a SubjectAccessReview whether user in group may list
// widgets.example.com.
func allowed(ctx context.Context, t *testing.T, cs kubernetes.Interface, user, group string) bool {
	t.Helper()
	r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: []string{group},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Group: "example.com", Resource: "widgets"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Status.Allowed
}
