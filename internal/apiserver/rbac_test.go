package apiserver

import (
	"context"
	"net/http"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/apiserver/admission"
	"github.com/nodeplane/nodeplane/internal/apiserver/authz"
)

const (
	clusterRolesPath        = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
	clusterRoleBindingsPath = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
	roleBindingsPath        = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings"
	ssarPath                = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
	sarPath                 = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
)

func clusterRole(name string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}, ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
}

func clusterBinding(name, role string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   subjects,
	}
}

func ssar(verb, group, resource, ns string) *authorizationv1.SelfSubjectAccessReview {
	return &authorizationv1.SelfSubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SelfSubjectAccessReview"},
		Spec:     authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Namespace: ns}},
	}
}

// TestRBAC runs RBAC through the real handler and authorizer: bindings
// grant, reviews agree with what the server then does, escalation is
// refused with upstream's message, others cannot be reviewed without a
// grant, and RBAC never widens a node. Steps build on each other.
func TestRBAC(t *testing.T) {
	s, h := newTestServer(t, Config{Authorizer: authz.New(authz.Config{}), Admission: []admission.Plugin{admission.NodeRestriction{}}})
	if err := s.EnsureBootstrapPolicy(context.Background()); err != nil {
		t.Fatal(err)
	}
	alice := requester{"alice", []string{"ops"}}
	nodeA := asNode("a")
	waitFor(t, "the default policy is in the cache", func() bool {
		return do(t, h, alice, http.MethodPost, ssarPath, ssar("get", "", "nodes", "")).code == http.StatusCreated
	})
	mustDo(t, h, admin, http.MethodPost, "/api/v1/nodes", testNode("n1", nil), http.StatusCreated)
	canI := func(u requester, verb, resource string) bool {
		t.Helper()
		st := decode[authorizationv1.SelfSubjectAccessReview](t, mustDo(t, h, u, http.MethodPost, ssarPath, ssar(verb, "", resource, ""), http.StatusCreated))
		return st.Status.Allowed
	}

	t.Run("the default cluster roles exist", func(t *testing.T) {
		for _, name := range []string{"cluster-admin", "admin", "edit", "view", "system:basic-user"} {
			mustDo(t, h, admin, http.MethodGet, clusterRolesPath+"/"+name, nil, http.StatusOK)
		}
	})

	t.Run("an unbound user is refused and can-i says no", func(t *testing.T) {
		resp := mustDo(t, h, alice, http.MethodPatch, "/api/v1/nodes/n1", `{"spec":{"unschedulable":true}}`, http.StatusForbidden)
		if msg := resp.status(t).Message; !strings.Contains(msg, `User "alice" cannot patch resource "nodes" in API group "" at the cluster scope`) {
			t.Errorf("message %q", msg)
		}
		if canI(alice, "patch", "nodes") {
			t.Error("can-i patch nodes: yes, want no")
		}
	})

	mustDo(t, h, admin, http.MethodPost, clusterRolesPath, clusterRole("node-operator",
		rbacv1.PolicyRule{Verbs: []string{"get", "list", "patch"}, APIGroups: []string{""}, Resources: []string{"nodes"}},
		rbacv1.PolicyRule{Verbs: []string{"create"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles", "clusterrolebindings"}},
	), http.StatusCreated)
	mustDo(t, h, admin, http.MethodPost, clusterRoleBindingsPath, clusterBinding("ops", "node-operator", rbacv1.Subject{Kind: "Group", Name: "ops"}), http.StatusCreated)

	t.Run("a group binding grants its role and can-i agrees", func(t *testing.T) {
		waitFor(t, "alice may patch nodes", func() bool {
			return do(t, h, alice, http.MethodPatch, "/api/v1/nodes/n1", `{"spec":{"unschedulable":true}}`).code == http.StatusOK
		})
		if !canI(alice, "patch", "nodes") {
			t.Error("can-i patch nodes: no, want yes")
		}
		if canI(alice, "delete", "nodes") {
			t.Error("can-i delete nodes: yes, want no")
		}
		mustDo(t, h, alice, http.MethodDelete, "/api/v1/nodes/n1", nil, http.StatusForbidden)
	})

	t.Run("a role within what the user holds may be created", func(t *testing.T) {
		mustDo(t, h, alice, http.MethodPost, clusterRolesPath, clusterRole("node-reader", rbacv1.PolicyRule{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"nodes"}}), http.StatusCreated)
	})

	t.Run("a role granting more than the user holds is refused", func(t *testing.T) {
		resp := mustDo(t, h, alice, http.MethodPost, clusterRolesPath, clusterRole("node-deleter", rbacv1.PolicyRule{Verbs: []string{"get", "delete"}, APIGroups: []string{""}, Resources: []string{"nodes"}}), http.StatusForbidden)
		want := `clusterroles.rbac.authorization.k8s.io "node-deleter" is forbidden: user "alice" (groups=["system:authenticated" "ops"]) is attempting to grant RBAC permissions not currently held:` + "\n" + `{APIGroups:[""], Resources:["nodes"], Verbs:["delete"]}`
		if msg := resp.status(t).Message; msg != want {
			t.Errorf("message:\n%s\nwant:\n%s", msg, want)
		}
		mustDo(t, h, admin, http.MethodGet, clusterRolesPath+"/node-deleter", nil, http.StatusNotFound)
	})

	t.Run("binding a role the user does not hold is refused", func(t *testing.T) {
		resp := mustDo(t, h, alice, http.MethodPost, clusterRoleBindingsPath, clusterBinding("alice-admin", "cluster-admin", rbacv1.Subject{Kind: "User", Name: "alice"}), http.StatusForbidden)
		if msg := resp.status(t).Message; !strings.Contains(msg, "is attempting to grant RBAC permissions not currently held") {
			t.Errorf("message %q", msg)
		}
		mustDo(t, h, admin, http.MethodGet, clusterRoleBindingsPath+"/alice-admin", nil, http.StatusNotFound)
	})

	t.Run("binding a role the user holds, or one that does not exist, is allowed", func(t *testing.T) {
		mustDo(t, h, alice, http.MethodPost, clusterRoleBindingsPath, clusterBinding("bob-reads", "node-reader", rbacv1.Subject{Kind: "User", Name: "bob"}), http.StatusCreated)
		mustDo(t, h, alice, http.MethodPost, clusterRoleBindingsPath, clusterBinding("dangling", "no-such-role", rbacv1.Subject{Kind: "User", Name: "carol"}), http.StatusCreated)
		mustDo(t, h, requester{"carol", nil}, http.MethodGet, "/api/v1/nodes", nil, http.StatusForbidden)
	})

	t.Run("a user may not review others without a grant", func(t *testing.T) {
		sar := &authorizationv1.SubjectAccessReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
			Spec:     authorizationv1.SubjectAccessReviewSpec{User: "bob", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Resource: "nodes"}},
		}
		mustDo(t, h, alice, http.MethodPost, sarPath, sar, http.StatusForbidden)
		got := decode[authorizationv1.SubjectAccessReview](t, mustDo(t, h, admin, http.MethodPost, sarPath, sar, http.StatusCreated))
		if !got.Status.Allowed {
			t.Errorf("admin's review of bob listing nodes: %+v, want allowed", got.Status)
		}
	})

	t.Run("a review without attributes is 422", func(t *testing.T) {
		empty := &authorizationv1.SelfSubjectAccessReview{TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SelfSubjectAccessReview"}}
		resp := mustDo(t, h, alice, http.MethodPost, ssarPath, empty, http.StatusUnprocessableEntity)
		if msg := resp.status(t).Message; !strings.Contains(msg, "exactly one of nonResourceAttributes or resourceAttributes must be specified") {
			t.Errorf("message %q", msg)
		}
	})

	t.Run("a rule with a custom verb is accepted, as upstream", func(t *testing.T) {
		mustDo(t, h, admin, http.MethodPost, clusterRolesPath, clusterRole("custom", rbacv1.PolicyRule{Verbs: []string{"frobnicate"}, APIGroups: []string{""}, Resources: []string{"nodes"}}), http.StatusCreated)
		resp := mustDo(t, h, admin, http.MethodPost, clusterRolesPath, clusterRole("no-verbs", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}}), http.StatusUnprocessableEntity)
		if msg := resp.status(t).Message; !strings.Contains(msg, "rules[0].verbs: Required value") {
			t.Errorf("message %q", msg)
		}
	})

	t.Run("whoami names the user and groups", func(t *testing.T) {
		body := &authenticationv1.SelfSubjectReview{TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "SelfSubjectReview"}}
		got := decode[authenticationv1.SelfSubjectReview](t, mustDo(t, h, alice, http.MethodPost, "/apis/authentication.k8s.io/v1/selfsubjectreviews", body, http.StatusCreated))
		if got.Status.UserInfo.Username != "alice" || !strings.Contains(strings.Join(got.Status.UserInfo.Groups, ","), "ops") {
			t.Errorf("got %+v", got.Status.UserInfo)
		}
	})

	t.Run("RBAC never widens a node identity", func(t *testing.T) {
		mustDo(t, h, admin, http.MethodPost, clusterRoleBindingsPath, clusterBinding("nodes-admin", "cluster-admin", rbacv1.Subject{Kind: "Group", Name: "system:nodes"}, rbacv1.Subject{Kind: "User", Name: nodeA.name}), http.StatusCreated)
		waitFor(t, "the binding is in the cache", func() bool {
			return do(t, h, admin, http.MethodGet, clusterRoleBindingsPath+"/nodes-admin", nil).code == http.StatusOK
		})
		mustDo(t, h, nodeA, http.MethodGet, "/api/v1/nodes", nil, http.StatusForbidden)
		mustDo(t, h, nodeA, http.MethodDelete, "/api/v1/nodes/n1", nil, http.StatusForbidden)
		mustDo(t, h, nodeA, http.MethodGet, "/api/v1/namespaces/kube-system/pods", nil, http.StatusForbidden)
		mustDo(t, h, nodeA, http.MethodPost, clusterRolesPath, clusterRole("x", rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}), http.StatusForbidden)
	})

	t.Run("a role binding grants only in its namespace", func(t *testing.T) {
		rb := &rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: "dave-edit", Namespace: "default"},
			RoleRef:    rbacv1.RoleRef{Kind: "ClusterRole", Name: "edit"},
			Subjects:   []rbacv1.Subject{{Kind: "User", Name: "dave"}},
		}
		got := decode[rbacv1.RoleBinding](t, mustDo(t, h, admin, http.MethodPost, roleBindingsPath, rb, http.StatusCreated))
		if got.RoleRef.APIGroup != rbacv1.GroupName || got.Subjects[0].APIGroup != rbacv1.GroupName {
			t.Errorf("defaults not applied: %+v", got)
		}
		dave := requester{"dave", nil}
		pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
		waitFor(t, "dave may list pods in default", func() bool {
			return do(t, h, dave, http.MethodGet, "/api/v1/namespaces/default/pods", nil).code == http.StatusOK
		})
		mustDo(t, h, dave, http.MethodPost, "/api/v1/namespaces/default/pods", pod, http.StatusCreated)
		mustDo(t, h, dave, http.MethodGet, "/api/v1/namespaces/kube-system/pods", nil, http.StatusForbidden)
		mustDo(t, h, dave, http.MethodGet, "/api/v1/pods", nil, http.StatusForbidden)
		rb.Name, rb.RoleRef.Name = "dave-admin", "cluster-admin"
		mustDo(t, h, dave, http.MethodPost, roleBindingsPath, rb, http.StatusForbidden)
	})
}
