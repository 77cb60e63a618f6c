package leasegc

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestOrphaned(t *testing.T) {
	nodes := map[string]types.UID{"n1": "uid-1"}
	lookup := func(name string) (types.UID, bool) { uid, ok := nodes[name]; return uid, ok }
	owned := func(name string, uid types.UID) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "Node", Name: name, UID: uid}}}}
	}
	tests := []struct {
		name  string
		lease *coordinationv1.Lease
		want  bool
	}{
		{"the lease of an existing node is kept", owned("n1", "uid-1"), false},
		{"the lease of a deleted node is orphaned", owned("n2", "uid-2"), true},
		{"the lease of a node deleted and re-created is orphaned", owned("n1", "old-uid"), true},
		{"a lease without an owner is not ours", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, false},
		{"a lease owned by something else is not ours", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "y",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "d", UID: "u"}}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Orphaned(tt.lease, lookup); got != tt.want {
				t.Errorf("Orphaned = %v, want %v", got, tt.want)
			}
		})
	}
}
