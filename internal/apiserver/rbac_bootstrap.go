package apiserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeplane/nodeplane/internal/apiserver/rbac"
	"github.com/nodeplane/nodeplane/internal/apiserver/store"
	"github.com/nodeplane/nodeplane/internal/storage"
)

// EnsureBootstrapPolicy creates the default cluster roles and bindings
// (rbac.BootstrapClusterRoles, rbac.BootstrapClusterRoleBindings) that are
// missing, and reconciles the ones that exist as kube-apiserver does at
// start: unless annotated rbac.authorization.kubernetes.io/autoupdate:
// "false", a default gets back what it lacks (rules, aggregation
// selectors, subjects, labels, annotations); nothing is removed, so an
// administrator's additions stay. It does nothing when the server does
// not serve RBAC.
func (s *Server) EnsureBootstrapPolicy(ctx context.Context) error {
	roles, bindings := s.resources[clusterRolesGVR], s.resources[clusterRoleBindingsGVR]
	if roles == nil || bindings == nil {
		return nil
	}
	var objs []runtime.Object
	for _, r := range rbac.BootstrapClusterRoles() {
		objs = append(objs, r)
	}
	for _, b := range rbac.BootstrapClusterRoleBindings() {
		objs = append(objs, b)
	}
	for _, obj := range objs {
		h := roles
		if obj.GetObjectKind().GroupVersionKind().Kind == "ClusterRoleBinding" {
			h = bindings
		}
		a, err := meta.Accessor(obj)
		if err != nil {
			return err
		}
		if cur, err := h.st.Get(ctx, "", a.GetName()); err == nil {
			if err := s.reconcileDefault(ctx, h, cur, obj); err != nil {
				return err
			}
			continue
		} else if !errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("read %s %s: %w", h.r.Resource, a.GetName(), err)
		}
		a.SetUID(types.UID(uuid.NewString()))
		now := s.cfg.Clock.Now().Truncate(time.Second)
		a.SetCreationTimestamp(metav1.NewTime(now))
		if _, err := h.st.Create(ctx, obj); err != nil && !errors.Is(err, storage.ErrAlreadyExists) {
			return fmt.Errorf("create %s %s: %w", h.r.Resource, a.GetName(), err)
		}
	}
	return nil
}

// reconcileDefault updates an existing default role or binding with what
// the default holds and it lacks (rbac.ReconcileClusterRole and
// ReconcileClusterRoleBinding), unless autoupdate is "false". A conflict
// (another server reconciling at the same time) is left to that server.
func (s *Server) reconcileDefault(ctx context.Context, h *resourceHandler, cur, want runtime.Object) error {
	var out runtime.Object
	switch c := cur.(type) {
	case *rbacv1.ClusterRole:
		if !rbac.AutoUpdate(c.ObjectMeta) {
			return nil
		}
		r, changed := rbac.ReconcileClusterRole(c, want.(*rbacv1.ClusterRole))
		if !changed {
			return nil
		}
		out = r
	case *rbacv1.ClusterRoleBinding:
		if !rbac.AutoUpdate(c.ObjectMeta) {
			return nil
		}
		b, changed, ok := rbac.ReconcileClusterRoleBinding(c, want.(*rbacv1.ClusterRoleBinding))
		if !ok {
			s.cfg.Logger.Warn("default cluster role binding refers to another role; left as it is", "clusterrolebinding", c.Name, "roleRef", c.RoleRef.Name)
			return nil
		}
		if !changed {
			return nil
		}
		out = b
	default:
		return nil
	}
	rv, err := store.ObjectRV(cur)
	if err != nil {
		return err
	}
	a, _ := meta.Accessor(out)
	if _, err := h.st.Update(ctx, out, rv); err != nil && !errors.Is(err, storage.ErrConflict) {
		return fmt.Errorf("reconcile %s %s: %w", h.r.Resource, a.GetName(), err)
	}
	s.cfg.Logger.Info("reconciled default RBAC object", "resource", h.r.Resource, "name", a.GetName())
	return nil
}
