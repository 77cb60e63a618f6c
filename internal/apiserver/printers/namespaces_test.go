package printers

import (
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestNamespaceAndLeaseCells(t *testing.T) {
	tests := []struct {
		name    string
		printer Printer
		obj     runtime.Object
		want    []interface{}
	}{
		{
			name:    "an active namespace shows its phase and age",
			printer: Namespaces(),
			obj:     &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", CreationTimestamp: ago(400 * 24 * time.Hour)}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
			want:    []interface{}{"default", "Active", "400d"},
		},
		{
			name:    "a terminating namespace shows Terminating",
			printer: Namespaces(),
			obj:     &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "old", CreationTimestamp: ago(time.Hour)}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
			want:    []interface{}{"old", "Terminating", "60m"},
		},
		{
			name:    "a node lease shows its holder",
			printer: Leases(),
			obj:     &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "kube-node-lease", CreationTimestamp: ago(45 * time.Second)}, Spec: coordinationv1.LeaseSpec{HolderIdentity: new("n1")}},
			want:    []interface{}{"n1", "n1", "45s"},
		},
		{
			name:    "a lease nobody holds has an empty holder",
			printer: Leases(),
			obj:     &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "free", CreationTimestamp: ago(25 * time.Hour)}},
			want:    []interface{}{"free", "", "25h"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.printer.Cells(tt.obj, now)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}
