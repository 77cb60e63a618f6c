package apiserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodeplane/nodeplane/internal/apiserver/admission"
	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
	"github.com/nodeplane/nodeplane/internal/apiserver/authz"
	"github.com/nodeplane/nodeplane/internal/apiserver/rbac"
)

// confirmNoEscalation refuses a create or update of a role or binding that
// would grant more than the requester holds, as upstream's RBAC storage
// does: a Role or ClusterRole is allowed when the requester may "escalate"
// it or already holds every rule it lists (in its namespace, or cluster-wide
// for a ClusterRole); a binding when the requester may "bind" the role it
// refers to or holds every rule of that role (a missing role has none).
// Administrators may do both. It runs only when the server authorizes.
func (h *resourceHandler) confirmNoEscalation(ctx context.Context, op admission.Operation, info requestInfo, obj runtime.Object) error {
	if h.s.cfg.Authorizer == nil || info.Subresource != "" || (op != admission.Create && op != admission.Update) {
		return nil
	}
	if h.r.GroupVersion.Group != rbacv1.GroupName {
		return nil
	}
	u, ok := authn.UserFrom(ctx)
	if !ok {
		return apierrors.NewForbidden(h.r.GroupResource(), info.Name, errors.New("no user on the request"))
	}
	objs := objectReader{h.s}
	var (
		name, namespace string
		requested       []rbacv1.PolicyRule
		shortcut        authz.Attributes
	)
	switch o := obj.(type) {
	case *rbacv1.Role:
		name, namespace, requested = o.Name, o.Namespace, o.Rules
		shortcut = authz.Attributes{Verb: "escalate", ResourceRequest: true, APIGroup: rbacv1.GroupName, Resource: "roles", Namespace: namespace, Name: name}
	case *rbacv1.ClusterRole:
		name, requested = o.Name, o.Rules
		shortcut = authz.Attributes{Verb: "escalate", ResourceRequest: true, APIGroup: rbacv1.GroupName, Resource: "clusterroles", Name: name}
	case *rbacv1.RoleBinding:
		name, namespace = o.Name, o.Namespace
		shortcut = bindAttributes(o.RoleRef, namespace)
		rules, err := rbac.RoleRefRules(ctx, objs, o.RoleRef, namespace)
		if err != nil {
			return err
		}
		requested = rules
	case *rbacv1.ClusterRoleBinding:
		name = o.Name
		shortcut = bindAttributes(o.RoleRef, "")
		rules, err := rbac.RoleRefRules(ctx, objs, o.RoleRef, "")
		if err != nil {
			return err
		}
		requested = rules
	default:
		return nil
	}
	err := h.s.cfg.Authorizer.Authorize(ctx, objs, shortcut)
	if err == nil {
		return nil
	}
	if !apierrors.IsForbidden(err) {
		return err
	}
	held, err := rbac.Rules(ctx, objs, u, namespace)
	if err != nil {
		return err
	}
	ok, missing := rbac.Covers(held, requested)
	if ok {
		return nil
	}
	lines := make([]string, len(missing))
	for i, r := range missing {
		lines[i] = rbac.CompactString(r)
	}
	return apierrors.NewForbidden(h.r.GroupResource(), name, fmt.Errorf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s", u.Name, u.Groups, strings.Join(lines, "\n")))
}

// bindAttributes asks for the "bind" verb on the role a binding refers to,
// in the binding's namespace (so "bind" may be delegated per namespace).
func bindAttributes(ref rbacv1.RoleRef, namespace string) authz.Attributes {
	a := authz.Attributes{Verb: "bind", ResourceRequest: true, APIGroup: rbacv1.GroupName, Resource: "clusterroles", Namespace: namespace, Name: ref.Name}
	if ref.Kind == "Role" {
		a.Resource = "roles"
	}
	return a
}
