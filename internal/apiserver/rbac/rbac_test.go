package rbac

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
	"github.com/nodeplane/nodeplane/internal/apiserver/rbac/rbactest"
)

func res(verb, group, resource, sub, ns, name string) Request {
	return Request{Verb: verb, ResourceRequest: true, APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name}
}

func TestRuleAllows(t *testing.T) {
	tests := []struct {
		name string
		rule rbacv1.PolicyRule
		req  Request
		want bool
	}{
		{"a rule allows its verb on its resource", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"nodes"}}, res("get", "", "nodes", "", "", "n1"), true},
		{"a rule does not allow another verb", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"nodes"}}, res("patch", "", "nodes", "", "", "n1"), false},
		{"a rule does not allow another group", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"apps"}, Resources: []string{"nodes"}}, res("get", "", "nodes", "", "", "n1"), false},
		{"the verb wildcard allows any verb", rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{""}, Resources: []string{"nodes"}}, res("delete", "", "nodes", "", "", "n1"), true},
		{"the group and resource wildcards allow anything", rbacv1.PolicyRule{Verbs: []string{"list"}, APIGroups: []string{"*"}, Resources: []string{"*"}}, res("list", "apps", "deployments", "", "ns", ""), true},
		{"a resource does not allow its subresources", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}, res("get", "", "pods", "log", "ns", "p"), false},
		{"a subresource rule allows that subresource", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods/log"}}, res("get", "", "pods", "log", "ns", "p"), true},
		{"a subresource rule does not allow the resource", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods/log"}}, res("get", "", "pods", "", "ns", "p"), false},
		{"*/status allows any status subresource", rbacv1.PolicyRule{Verbs: []string{"update"}, APIGroups: []string{"*"}, Resources: []string{"*/status"}}, res("update", "", "nodes", "status", "", "n1"), true},
		{"the resource wildcard allows subresources", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"*"}}, res("get", "", "pods", "log", "ns", "p"), true},
		{"resourceNames allow the named object", rbacv1.PolicyRule{Verbs: []string{"patch"}, APIGroups: []string{""}, Resources: []string{"nodes"}, ResourceNames: []string{"n1"}}, res("patch", "", "nodes", "", "", "n1"), true},
		{"resourceNames refuse other objects", rbacv1.PolicyRule{Verbs: []string{"patch"}, APIGroups: []string{""}, Resources: []string{"nodes"}, ResourceNames: []string{"n1"}}, res("patch", "", "nodes", "", "", "n2"), false},
		{"resourceNames refuse a list of everything", rbacv1.PolicyRule{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"nodes"}, ResourceNames: []string{"n1"}}, res("list", "", "nodes", "", "", ""), false},
		{"a non-resource URL allows that path", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/metrics"}}, Request{Verb: "get", Path: "/metrics"}, true},
		{"a non-resource URL prefix allows paths below it", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/debug/*"}}, Request{Verb: "get", Path: "/debug/pprof/heap"}, true},
		{"a non-resource URL does not allow another path", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/metrics"}}, Request{Verb: "get", Path: "/metrics/x"}, false},
		{"a resource rule does not allow a path", rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}, Request{Verb: "get", Path: "/metrics"}, false},
		{"a non-resource rule does not allow a resource", rbacv1.PolicyRule{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}, res("get", "", "nodes", "", "", ""), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RuleAllows(tt.rule, tt.req); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAllowsFollowsBindings(t *testing.T) {
	read := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "read-nodes"}, Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"nodes", "pods"}}}}
	podsRole := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-deleter", Namespace: "team"}, Rules: []rbacv1.PolicyRule{{Verbs: []string{"delete"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}
	p := &rbactest.Policy{
		ClusterRoleList: []*rbacv1.ClusterRole{read},
		RoleList:        []*rbacv1.Role{podsRole},
		ClusterRoleBindingList: []*rbacv1.ClusterRoleBinding{
			{ObjectMeta: metav1.ObjectMeta{Name: "ops"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "read-nodes"}, Subjects: []rbacv1.Subject{{Kind: "Group", Name: "ops"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "dangling"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "missing"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "dave"}}},
		},
		RoleBindingList: []*rbacv1.RoleBinding{
			{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "team"}, RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "pod-deleter"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "bob"}, {Kind: "ServiceAccount", Name: "ci"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "team"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "read-nodes"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "carol"}}},
		},
	}
	alice := &authn.User{Name: "alice", Groups: []string{"ops", authn.GroupAuthenticated}}
	bob := &authn.User{Name: "bob", Groups: []string{authn.GroupAuthenticated}}
	carol := &authn.User{Name: "carol", Groups: []string{authn.GroupAuthenticated}}
	dave := &authn.User{Name: "dave", Groups: []string{authn.GroupAuthenticated}}
	ci := &authn.User{Name: "system:serviceaccount:team:ci", Groups: []string{authn.GroupAuthenticated}}
	otherCI := &authn.User{Name: "system:serviceaccount:other:ci", Groups: []string{authn.GroupAuthenticated}}
	tests := []struct {
		name string
		user *authn.User
		req  Request
		want bool
	}{
		{"a group binding grants its members the role everywhere", alice, res("list", "", "nodes", "", "", ""), true},
		{"a group binding grants nothing beyond the role", alice, res("patch", "", "nodes", "", "", "n1"), false},
		{"a role binding grants in its namespace", bob, res("delete", "", "pods", "", "team", "p"), true},
		{"a role binding grants nothing in another namespace", bob, res("delete", "", "pods", "", "other", "p"), false},
		{"a role binding grants nothing cluster-wide", bob, res("delete", "", "pods", "", "", ""), false},
		{"a role binding to a cluster role grants it in the namespace only", carol, res("list", "", "pods", "", "team", ""), true},
		{"a role binding to a cluster role grants nothing cluster-wide", carol, res("list", "", "nodes", "", "", ""), false},
		{"a binding to a missing role grants nothing", dave, res("list", "", "nodes", "", "", ""), false},
		{"a service account subject takes the binding's namespace", ci, res("delete", "", "pods", "", "team", "p"), true},
		{"a service account of another namespace is not the subject", otherCI, res("delete", "", "pods", "", "team", "p"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Allows(context.Background(), p, tt.user, tt.req)
			if err != nil || got != tt.want {
				t.Errorf("got %v (%v), want %v", got, err, tt.want)
			}
		})
	}
}

func TestCovers(t *testing.T) {
	rule := func(verbs, groups, resources, names []string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources, ResourceNames: names}
	}
	s := func(v ...string) []string { return v }
	tests := []struct {
		name      string
		owner     []rbacv1.PolicyRule
		requested []rbacv1.PolicyRule
		want      bool
	}{
		{"a holder grants what they hold", []rbacv1.PolicyRule{rule(s("get", "list"), s(""), s("nodes"), nil)}, []rbacv1.PolicyRule{rule(s("get"), s(""), s("nodes"), nil)}, true},
		{"nobody grants a verb they lack", []rbacv1.PolicyRule{rule(s("get"), s(""), s("nodes"), nil)}, []rbacv1.PolicyRule{rule(s("get", "patch"), s(""), s("nodes"), nil)}, false},
		{"a specific verb does not cover the wildcard", []rbacv1.PolicyRule{rule(s("get", "list", "watch"), s(""), s("nodes"), nil)}, []rbacv1.PolicyRule{rule(s("*"), s(""), s("nodes"), nil)}, false},
		{"the wildcard covers everything", []rbacv1.PolicyRule{rule(s("*"), s("*"), s("*"), nil), {Verbs: s("*"), NonResourceURLs: s("*")}}, []rbacv1.PolicyRule{rule(s("delete"), s("apps"), s("deployments/scale"), nil), {Verbs: s("get"), NonResourceURLs: s("/metrics")}}, true},
		{"pieces may come from different rules", []rbacv1.PolicyRule{rule(s("get"), s(""), s("nodes"), nil), rule(s("patch"), s(""), s("nodes"), nil)}, []rbacv1.PolicyRule{rule(s("get", "patch"), s(""), s("nodes"), nil)}, true},
		{"*/log covers pods/log", []rbacv1.PolicyRule{rule(s("get"), s(""), s("*/log"), nil)}, []rbacv1.PolicyRule{rule(s("get"), s(""), s("pods/log"), nil)}, true},
		{"a resource does not cover its subresource", []rbacv1.PolicyRule{rule(s("get"), s(""), s("pods"), nil)}, []rbacv1.PolicyRule{rule(s("get"), s(""), s("pods/log"), nil)}, false},
		{"resourceNames cover a rule naming some of them", []rbacv1.PolicyRule{rule(s("patch"), s(""), s("nodes"), s("n1", "n2"))}, []rbacv1.PolicyRule{rule(s("patch"), s(""), s("nodes"), s("n2"))}, true},
		{"resourceNames do not cover every object", []rbacv1.PolicyRule{rule(s("patch"), s(""), s("nodes"), s("n1"))}, []rbacv1.PolicyRule{rule(s("patch"), s(""), s("nodes"), nil)}, false},
		{"a URL prefix covers paths below it", []rbacv1.PolicyRule{{Verbs: s("get"), NonResourceURLs: s("/logs/*")}}, []rbacv1.PolicyRule{{Verbs: s("get"), NonResourceURLs: s("/logs/a")}}, true},
		{"a URL does not cover the prefix wildcard", []rbacv1.PolicyRule{{Verbs: s("get"), NonResourceURLs: s("/logs/a")}}, []rbacv1.PolicyRule{{Verbs: s("get"), NonResourceURLs: s("/logs/*")}}, false},
		{"an empty role is always covered", nil, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, missing := Covers(tt.owner, tt.requested)
			if got != tt.want || (got == (len(missing) > 0)) {
				t.Errorf("got %v, missing %v, want %v", got, missing, tt.want)
			}
		})
	}
}

func TestCompactString(t *testing.T) {
	got := CompactString(rbacv1.PolicyRule{Verbs: []string{"patch"}, APIGroups: []string{""}, Resources: []string{"nodes"}})
	if want := `{APIGroups:[""], Resources:["nodes"], Verbs:["patch"]}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestBootstrapRoles(t *testing.T) {
	roles := map[string][]rbacv1.PolicyRule{}
	for _, r := range BootstrapClusterRoles() {
		roles[r.Name] = r.Rules
	}
	tests := []struct {
		name string
		role string
		req  Request
		want bool
	}{
		{"view reads nodes", "view", res("list", "", "nodes", "", "", ""), true},
		{"view reads pod logs", "view", res("get", "", "pods", "log", "ns", "p"), true},
		{"view does not patch nodes", "view", res("patch", "", "nodes", "", "", "n1"), false},
		{"view does not read secrets", "view", res("get", "", "secrets", "", "ns", "s"), false},
		{"edit writes deployments", "edit", res("update", "apps", "deployments", "", "ns", "d"), true},
		{"edit does not write role bindings", "edit", res("create", rbacv1.GroupName, "rolebindings", "", "ns", ""), false},
		{"admin writes role bindings", "admin", res("create", rbacv1.GroupName, "rolebindings", "", "ns", ""), true},
		{"cluster-admin reads metrics", "cluster-admin", Request{Verb: "get", Path: "/metrics"}, true},
		{"basic-user may review itself", "system:basic-user", res("create", "authorization.k8s.io", "selfsubjectaccessreviews", "", "", ""), true},
		{"basic-user may not review others", "system:basic-user", res("create", "authorization.k8s.io", "subjectaccessreviews", "", "", ""), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := false
			for _, r := range roles[tt.role] {
				got = got || RuleAllows(r, tt.req)
			}
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
