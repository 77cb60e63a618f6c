package apiserver

import (
	"context"
	"errors"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodeplane/nodeplane/internal/apiserver/authz"
	"github.com/nodeplane/nodeplane/internal/apiserver/store"
	"github.com/nodeplane/nodeplane/internal/storage"
)

var (
	clusterRolesGVR        = rbacv1.SchemeGroupVersion.WithResource("clusterroles")
	rolesGVR               = rbacv1.SchemeGroupVersion.WithResource("roles")
	clusterRoleBindingsGVR = rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings")
	roleBindingsGVR        = rbacv1.SchemeGroupVersion.WithResource("rolebindings")
)

// The RBAC policy (rbac.Policy) is read from the watch caches, as
// upstream's authorizer reads its informers: a binding written a moment
// ago applies once the cache has it (milliseconds). While a cache loads,
// reads go to storage.

// ClusterRole returns the cluster role, or nil.
func (o objectReader) ClusterRole(ctx context.Context, name string) (*rbacv1.ClusterRole, error) {
	obj, err := readPolicy(ctx, o.s.resources[clusterRolesGVR], "", name)
	r, _ := obj.(*rbacv1.ClusterRole)
	return r, err
}

// Role returns the role, or nil.
func (o objectReader) Role(ctx context.Context, namespace, name string) (*rbacv1.Role, error) {
	obj, err := readPolicy(ctx, o.s.resources[rolesGVR], namespace, name)
	r, _ := obj.(*rbacv1.Role)
	return r, err
}

// ClusterRoleBindings lists every cluster role binding.
func (o objectReader) ClusterRoleBindings(ctx context.Context) ([]*rbacv1.ClusterRoleBinding, error) {
	items, err := listPolicy(ctx, o.s.resources[clusterRoleBindingsGVR], "")
	out := make([]*rbacv1.ClusterRoleBinding, 0, len(items))
	for _, it := range items {
		if b, ok := it.(*rbacv1.ClusterRoleBinding); ok {
			out = append(out, b)
		}
	}
	return out, err
}

// RoleBindings lists the role bindings of namespace.
func (o objectReader) RoleBindings(ctx context.Context, namespace string) ([]*rbacv1.RoleBinding, error) {
	items, err := listPolicy(ctx, o.s.resources[roleBindingsGVR], namespace)
	out := make([]*rbacv1.RoleBinding, 0, len(items))
	for _, it := range items {
		if b, ok := it.(*rbacv1.RoleBinding); ok {
			out = append(out, b)
		}
	}
	return out, err
}

func readPolicy(ctx context.Context, h *resourceHandler, namespace, name string) (runtime.Object, error) {
	if h == nil {
		return nil, nil
	}
	obj, err := h.st.GetCached(namespace, name)
	if errors.Is(err, store.ErrNotReady) {
		return readStored(ctx, h, namespace, name)
	}
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	return obj, err
}

func listPolicy(ctx context.Context, h *resourceHandler, namespace string) ([]runtime.Object, error) {
	if h == nil {
		return nil, nil
	}
	pred := store.Predicate{Namespace: namespace}
	var page store.ListPage
	var err error
	if h.st.Ready() {
		page, err = h.st.ListFromCache(ctx, pred, 0)
	} else {
		page, err = h.st.ListFromStorage(ctx, pred, 0, "", 0)
	}
	return page.Items, err
}

// Objects gives authorization outside the API handler (the non-resource
// paths, see authz.Authorizer.NonResourceWith) the same read access to
// stored objects and RBAC policy the handler uses.
func (s *Server) Objects() authz.Objects { return objectReader{s} }
