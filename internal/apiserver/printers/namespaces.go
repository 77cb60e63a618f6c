package printers

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Namespaces prints namespaces: NAME STATUS AGE.
func Namespaces() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Status", "string", "The status of the namespace"),
			ageColumn(),
		},
		Cells: cellsOf(func(ns *corev1.Namespace, now time.Time) []interface{} {
			return []interface{}{ns.Name, string(ns.Status.Phase), age(ns.CreationTimestamp, now)}
		}),
	}
}

// Leases prints coordination.k8s.io/v1 leases: NAME HOLDER AGE. HOLDER is
// empty for a lease nobody holds.
func Leases() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Holder", "string", coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]),
			ageColumn(),
		},
		Cells: cellsOf(func(l *coordinationv1.Lease, now time.Time) []interface{} {
			holder := ""
			if l.Spec.HolderIdentity != nil {
				holder = *l.Spec.HolderIdentity
			}
			return []interface{}{l.Name, holder, age(l.CreationTimestamp, now)}
		}),
	}
}
