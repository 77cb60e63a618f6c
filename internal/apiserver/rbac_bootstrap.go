package apiserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeplane/nodeplane/internal/apiserver/rbac"
	"github.com/nodeplane/nodeplane/internal/storage"
)

// EnsureBootstrapPolicy creates the default cluster roles and bindings
// (rbac.BootstrapClusterRoles, rbac.BootstrapClusterRoleBindings) that are
// missing. It never changes one that exists: an administrator's edits
// stay. It does nothing when the server does not serve RBAC.
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
		if _, err := h.st.Get(ctx, "", a.GetName()); err == nil {
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
