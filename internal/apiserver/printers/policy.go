package printers

import (
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// PodDisruptionBudgets prints disruption budgets: NAME MIN AVAILABLE MAX
// UNAVAILABLE ALLOWED DISRUPTIONS AGE; the bound that is not set shows N/A.
func PodDisruptionBudgets() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Min Available", "string", "The minimum number of pods that must be available."),
			column("Max Unavailable", "string", "The maximum number of pods that may be unavailable."),
			column("Allowed Disruptions", "integer", "Calculated number of pods that may be disrupted at this time."),
			ageColumn(),
		},
		Cells: cellsOf(func(p *policyv1.PodDisruptionBudget, now time.Time) []interface{} {
			return []interface{}{
				p.Name,
				bound(p.Spec.MinAvailable),
				bound(p.Spec.MaxUnavailable),
				int64(p.Status.DisruptionsAllowed),
				age(p.CreationTimestamp, now),
			}
		}),
	}
}

// bound renders minAvailable or maxUnavailable: "2", "50%" or N/A.
func bound(v *intstr.IntOrString) string {
	if v == nil {
		return "N/A"
	}
	return v.String()
}
