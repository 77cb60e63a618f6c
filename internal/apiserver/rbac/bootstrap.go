package rbac

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Bootstrap labels and annotations, as upstream marks its defaults.
const (
	bootstrapLabel       = "kubernetes.io/bootstrapping"
	bootstrapLabelValue  = "rbac-defaults"
	autoupdateAnnotation = "rbac.authorization.kubernetes.io/autoupdate"
)

var (
	readVerbs  = []string{"get", "list", "watch"}
	writeVerbs = []string{"create", "delete", "deletecollection", "patch", "update"}
	allVerbs   = append(append([]string{}, readVerbs...), writeVerbs...)
)

func bootstrapMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:        name,
		Labels:      map[string]string{bootstrapLabel: bootstrapLabelValue},
		Annotations: map[string]string{autoupdateAnnotation: "true"},
	}
}

// namespacedRules are the rules on the namespaced resources nodeplane
// serves, with verbs; used by admin, edit and view.
func namespacedRules(verbs []string, withSubresourceWrites bool) []rbacv1.PolicyRule {
	rules := []rbacv1.PolicyRule{
		{Verbs: verbs, APIGroups: []string{""}, Resources: []string{"pods", "persistentvolumeclaims", "events", "configmaps"}},
		{Verbs: readVerbs, APIGroups: []string{""}, Resources: []string{"pods/log", "pods/status", "persistentvolumeclaims/status", "namespaces"}},
		{Verbs: verbs, APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets", "daemonsets", "deployments/scale", "replicasets/scale"}},
		{Verbs: readVerbs, APIGroups: []string{"apps"}, Resources: []string{"deployments/status", "replicasets/status", "daemonsets/status"}},
		{Verbs: verbs, APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}},
		{Verbs: readVerbs, APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets/status"}},
		{Verbs: readVerbs, APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}},
		{Verbs: readVerbs, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}},
	}
	if withSubresourceWrites {
		// As upstream, secrets are for edit and admin only, not view.
		rules = append(rules,
			rbacv1.PolicyRule{Verbs: []string{"create"}, APIGroups: []string{""}, Resources: []string{"pods/eviction"}},
			rbacv1.PolicyRule{Verbs: verbs, APIGroups: []string{""}, Resources: []string{"secrets"}},
		)
	}
	return rules
}

// clusterReadRules: reading the cluster-scoped objects of a
// node-management plane (nodes, volumes, attachments). Upstream's view
// does not grant these; nodeplane's does, since the nodes are what its
// operators look at (see docs/differences.md).
var clusterReadRules = []rbacv1.PolicyRule{
	{Verbs: readVerbs, APIGroups: []string{""}, Resources: []string{"nodes", "nodes/status", "persistentvolumes"}},
	{Verbs: readVerbs, APIGroups: []string{"storage.k8s.io"}, Resources: []string{"volumeattachments", "storageclasses"}},
	// What metrics-server's system:aggregated-metrics-reader adds to view,
	// edit and admin upstream (kubectl top).
	{Verbs: readVerbs, APIGroups: []string{"metrics.k8s.io"}, Resources: []string{"pods", "nodes"}},
}

// Aggregation labels: a ClusterRole carrying one adds its rules to the
// role whose aggregationRule selects it (the clusterrole-aggregation
// controller keeps them current).
const (
	AggregateToAdmin = "rbac.authorization.k8s.io/aggregate-to-admin"
	AggregateToEdit  = "rbac.authorization.k8s.io/aggregate-to-edit"
	AggregateToView  = "rbac.authorization.k8s.io/aggregate-to-view"
)

// BootstrapClusterRoles are the default cluster roles the server creates
// at start when missing: cluster-admin (everything), admin and edit
// (read-write on namespaced resources; admin also on roles and bindings),
// view (read-only) and system:basic-user (the self reviews every
// authenticated user may make, so `kubectl auth can-i` and `whoami` work).
//
// As upstream, admin, edit and view are aggregated: each has an
// aggregationRule selecting its aggregate-to-* label, their own rules live
// in system:aggregate-to-{admin,edit,view}, and view is labelled
// aggregate-to-edit and edit aggregate-to-admin, so admin ⊇ edit ⊇ view.
// Their rules start as the union the aggregation controller computes
// (roles in name order, each rule once), so it has nothing to change.
func BootstrapClusterRoles() []*rbacv1.ClusterRole {
	viewOwn := namespacedRules(readVerbs, false)
	viewOwn = append(viewOwn, clusterReadRules...)
	editOwn := namespacedRules(allVerbs, true)
	editOwn = append(editOwn, clusterReadRules...)
	adminOwn := []rbacv1.PolicyRule{
		{Verbs: allVerbs, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles", "rolebindings"}},
		{Verbs: []string{"create"}, APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"localsubjectaccessreviews"}},
	}
	view := union(viewOwn)         // system:aggregate-to-view
	edit := union(editOwn, view)   // system:aggregate-to-edit, view
	admin := union(edit, adminOwn) // edit, system:aggregate-to-admin
	aggregated := func(name, selects string, labels map[string]string, rules []rbacv1.PolicyRule) *rbacv1.ClusterRole {
		r := &rbacv1.ClusterRole{ObjectMeta: bootstrapMeta(name), Rules: rules, AggregationRule: &rbacv1.AggregationRule{
			ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{selects: "true"}}},
		}}
		for k, v := range labels {
			r.Labels[k] = v
		}
		return r
	}
	part := func(name, label string, rules []rbacv1.PolicyRule) *rbacv1.ClusterRole {
		r := &rbacv1.ClusterRole{ObjectMeta: bootstrapMeta(name), Rules: rules}
		r.Labels[label] = "true"
		return r
	}
	roles := []*rbacv1.ClusterRole{
		{ObjectMeta: bootstrapMeta("cluster-admin"), Rules: []rbacv1.PolicyRule{
			{Verbs: []string{rbacv1.VerbAll}, APIGroups: []string{rbacv1.APIGroupAll}, Resources: []string{rbacv1.ResourceAll}},
			{Verbs: []string{rbacv1.VerbAll}, NonResourceURLs: []string{rbacv1.NonResourceAll}},
		}},
		aggregated("admin", AggregateToAdmin, nil, admin),
		aggregated("edit", AggregateToEdit, map[string]string{AggregateToAdmin: "true"}, edit),
		aggregated("view", AggregateToView, map[string]string{AggregateToEdit: "true"}, view),
		part("system:aggregate-to-admin", AggregateToAdmin, adminOwn),
		part("system:aggregate-to-edit", AggregateToEdit, editOwn),
		part("system:aggregate-to-view", AggregateToView, viewOwn),
		{ObjectMeta: bootstrapMeta("system:basic-user"), Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"create"}, APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}},
			{Verbs: []string{"create"}, APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"selfsubjectreviews"}},
		}},
	}
	for _, r := range roles {
		r.TypeMeta = metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"}
	}
	return roles
}

// union is the rules of each list in order, each rule once.
func union(lists ...[]rbacv1.PolicyRule) []rbacv1.PolicyRule {
	out := []rbacv1.PolicyRule{}
	for _, l := range lists {
		for _, r := range l {
			if !HasRule(out, r) {
				out = append(out, *r.DeepCopy())
			}
		}
	}
	return out
}

// HasRule reports whether rules holds a rule equal to r.
func HasRule(rules []rbacv1.PolicyRule, r rbacv1.PolicyRule) bool {
	for _, have := range rules {
		if equality.Semantic.DeepEqual(have, r) {
			return true
		}
	}
	return false
}

// BootstrapClusterRoleBindings bind cluster-admin to system:masters and
// system:basic-user to every authenticated user, as upstream.
func BootstrapClusterRoleBindings() []*rbacv1.ClusterRoleBinding {
	bind := func(role, group string) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
			ObjectMeta: bootstrapMeta(role),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group}},
		}
	}
	return []*rbacv1.ClusterRoleBinding{
		bind("cluster-admin", "system:masters"),
		bind("system:basic-user", "system:authenticated"),
	}
}
