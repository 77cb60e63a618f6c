package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// TestDeletePreconditionsAndPropagation: a delete whose UID or
// resourceVersion precondition does not match is a 409 Conflict and leaves
// the object; matching preconditions delete it; an unknown
// propagationPolicy is a 400 that deletes nothing.
func TestDeletePreconditionsAndPropagation(t *testing.T) {
	s := startServer(t, serverOptions{})
	ctx := context.Background()
	leases := s.client().CoordinationV1().Leases("default")
	l, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "pre"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		pre  metav1.Preconditions
	}{
		{"a wrong UID", metav1.Preconditions{UID: ptr.To(types.UID("not-the-uid"))}},
		{"a stale resourceVersion", metav1.Preconditions{ResourceVersion: ptr.To("1")}},
	} {
		err := leases.Delete(ctx, "pre", metav1.DeleteOptions{Preconditions: &tc.pre})
		if !apierrors.IsConflict(err) {
			t.Errorf("%s: got %v, want 409 Conflict", tc.name, err)
		}
		if _, err := leases.Get(ctx, "pre", metav1.GetOptions{}); err != nil {
			t.Fatalf("%s: the object is gone after a refused delete: %v", tc.name, err)
		}
	}
	bad := metav1.DeletionPropagation("Sideways")
	// kube-apiserver validates DeleteOptions and answers 422 Invalid
	// naming DeleteOptions.meta.k8s.io.
	if err := leases.Delete(ctx, "pre", metav1.DeleteOptions{PropagationPolicy: &bad}); !apierrors.IsInvalid(err) {
		t.Errorf("unknown propagationPolicy: got %v, want 422 Invalid", err)
	}
	if _, err := leases.Get(ctx, "pre", metav1.GetOptions{}); err != nil {
		t.Fatalf("the object is gone after a refused delete: %v", err)
	}
	foreground := metav1.DeletePropagationForeground
	err = leases.Delete(ctx, "pre", metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion},
		PropagationPolicy: &foreground,
	})
	if err != nil {
		t.Fatalf("delete with matching preconditions: %v", err)
	}
	// Foreground: the object waits (finalizer foregroundDeletion) until the
	// garbage collector has removed its dependents (none here), then goes.
	eventually(t, 30*time.Second, "foreground-deleted lease gone", func() error {
		if _, err := leases.Get(ctx, "pre", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("after delete: got %v, want NotFound", err)
		}
		return nil
	})
}
