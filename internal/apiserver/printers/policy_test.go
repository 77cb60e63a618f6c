package printers

import (
	"slices"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestPodDisruptionBudgetCells(t *testing.T) {
	created := metav1.ObjectMeta{Name: "web", CreationTimestamp: ago(3 * time.Minute)}
	two, half := intstr.FromInt32(2), intstr.FromString("50%")
	tests := []struct {
		name string
		pdb  *policyv1.PodDisruptionBudget
		want []interface{}
	}{
		{"a minAvailable budget shows N/A for maxUnavailable", &policyv1.PodDisruptionBudget{
			ObjectMeta: created, Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &two},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1},
		}, []interface{}{"web", "2", "N/A", int64(1), "3m"}},
		{"a percent maxUnavailable budget shows the percentage", &policyv1.PodDisruptionBudget{
			ObjectMeta: created, Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &half},
		}, []interface{}{"web", "N/A", "50%", int64(0), "3m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PodDisruptionBudgets().Cells(tt.pdb, now)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("cells: got %#v, want %#v", got, tt.want)
			}
		})
	}
}
