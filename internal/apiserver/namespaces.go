package apiserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/google/uuid"

	"github.com/nodeplane/nodeplane/internal/apiserver/store"
	"github.com/nodeplane/nodeplane/internal/storage"
)

// SystemNamespaces exist from the start and are re-created if deleted.
var SystemNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// immortalNamespaces may never be deleted.
var immortalNamespaces = map[string]bool{metav1.NamespaceDefault: true, metav1.NamespaceSystem: true, metav1.NamespacePublic: true}

// checkNamespaceOpen refuses content for a missing or terminating namespace.
func (s *Server) checkNamespaceOpen(ctx context.Context, name string) error {
	if s.namespaces == nil {
		return nil
	}
	obj, err := s.namespaces.st.GetCached("", name)
	if err != nil {
		obj, err = s.namespaces.st.Get(ctx, "", name)
	}
	if errors.Is(err, storage.ErrNotFound) {
		return apierrors.NewNotFound(s.namespaces.r.GroupResource(), name)
	}
	if err != nil {
		return err
	}
	ns := obj.(*corev1.Namespace)
	if ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating {
		e := apierrors.NewForbidden(s.namespaces.r.GroupResource(), name, fmt.Errorf("unable to create new content in namespace %s because it is being terminated", name))
		e.ErrStatus.Details.Causes = append(e.ErrStatus.Details.Causes, metav1.StatusCause{Type: corev1.NamespaceTerminatingCause, Message: fmt.Sprintf("namespace %s is being terminated", name), Field: "metadata.namespace"})
		return e
	}
	return nil
}

// pendingNamespaceFinalize reports a namespace whose spec finalizers still
// hold it (its content is being removed).
func (h *resourceHandler) pendingNamespaceFinalize(obj runtime.Object) bool {
	ns, ok := obj.(*corev1.Namespace)
	return ok && h == h.s.namespaces && len(ns.Spec.Finalizers) > 0
}

// beginNamespaceDelete marks a namespace Terminating; the namespace
// controller removes its content and then its finalizer, through the
// finalize subresource, and the update that leaves no finalizer deletes it.
// A namespace with no finalizer at all goes at once, as upstream (its
// content, if any, is not removed: nothing asked for that).
func (s *Server) beginNamespaceDelete(ctx context.Context, cur runtime.Object, dryRun bool) (runtime.Object, error) {
	ns := cur.(*corev1.Namespace)
	gr := s.namespaces.r.GroupResource()
	if immortalNamespaces[ns.Name] {
		return nil, apierrors.NewForbidden(gr, ns.Name, errors.New("this namespace may not be deleted"))
	}
	if ns.DeletionTimestamp != nil {
		return ns, nil
	}
	now := metav1.NewTime(s.cfg.Clock.Now())
	ns.DeletionTimestamp = &now
	zero := int64(0)
	ns.DeletionGracePeriodSeconds = &zero
	ns.Status.Phase = corev1.NamespaceTerminating
	if dryRun {
		return ns, nil
	}
	rv, _ := store.ObjectRV(ns)
	if len(ns.Spec.Finalizers) == 0 && len(ns.Finalizers) == 0 {
		return s.namespaces.st.Delete(ctx, "", ns.Name, rv)
	}
	return s.namespaces.st.Update(ctx, ns, rv)
}

// runNamespaces keeps the system namespaces in existence until ctx ends
// (kube-apiserver's own system-namespaces loop: creating a missing one is
// idempotent, so every server may run it). Emptying a terminating
// namespace is the namespace controller's (internal/controller/namespace),
// which runs only on the leader and works through the API.
func (s *Server) runNamespaces(ctx context.Context) {
	if s.namespaces == nil {
		return
	}
	log := s.cfg.Logger.With("controller", "namespaces")
	ticker := s.cfg.Clock.NewTicker(time.Second)
	defer ticker.Stop()
	lastEnsure := time.Time{}
	for {
		if s.namespaces.st.Ready() {
			if now := s.cfg.Clock.Now(); now.Sub(lastEnsure) > time.Minute {
				if err := s.EnsureSystemNamespaces(ctx); err != nil && ctx.Err() == nil {
					log.Warn("ensure system namespaces", "err", err)
				} else {
					lastEnsure = now
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// EnsureSystemNamespaces creates the system namespaces that are missing.
func (s *Server) EnsureSystemNamespaces(ctx context.Context) error {
	for _, name := range SystemNamespaces {
		if _, err := s.namespaces.st.GetCached("", name); err == nil {
			continue
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: types.UID(uuid.NewString()), CreationTimestamp: metav1.NewTime(s.cfg.Clock.Now().Truncate(time.Second)),
			Labels: map[string]string{corev1.LabelMetadataName: name},
		}}
		if s.namespaces.r.Strategy.PrepareForCreate != nil {
			s.namespaces.r.Strategy.PrepareForCreate(ns)
		}
		if s.namespaces.r.Strategy.Default != nil {
			s.namespaces.r.Strategy.Default(ns)
		}
		if _, err := s.namespaces.st.Create(ctx, ns); err != nil && !errors.Is(err, storage.ErrAlreadyExists) {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	}
	return nil
}
