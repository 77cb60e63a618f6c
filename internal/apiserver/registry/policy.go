package registry

import (
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeplane/nodeplane/internal/apiserver/printers"
	"github.com/nodeplane/nodeplane/internal/apiserver/validation"
)

// PodDisruptionBudgets declares policy/v1 poddisruptionbudgets (+status).
// As upstream, the spec is mutable and a spec change bumps
// metadata.generation (the eviction handler refuses evictions until the
// disruption controller has observed it); the status is written by the
// disruption controller and the eviction handler only, through the status
// subresource, which may not change the spec.
func PodDisruptionBudgets() *Resource {
	return &Resource{
		GroupVersion: policyV1, Resource: "poddisruptionbudgets", Singular: "poddisruptionbudget", Kind: "PodDisruptionBudget", ListKind: "PodDisruptionBudgetList",
		Namespaced:   true,
		ShortNames:   []string{"pdb"},
		New:          func() runtime.Object { return &policyv1.PodDisruptionBudget{} },
		NewList:      func() runtime.Object { return &policyv1.PodDisruptionBudgetList{} },
		Subresources: []Subresource{{Name: "status", Verbs: statusVerbs}},
		Printer:      printers.PodDisruptionBudgets(),
		Strategy: Strategy{
			PrepareForCreate: func(obj runtime.Object) {
				obj.(*policyv1.PodDisruptionBudget).Status = policyv1.PodDisruptionBudgetStatus{}
			},
			PrepareForUpdate: func(obj, old runtime.Object) {
				obj.(*policyv1.PodDisruptionBudget).Status = old.(*policyv1.PodDisruptionBudget).Status
			},
			PrepareForStatusUpdate: func(obj, old runtime.Object) {
				obj.(*policyv1.PodDisruptionBudget).Spec = old.(*policyv1.PodDisruptionBudget).Spec
			},
			Validate: func(obj runtime.Object) field.ErrorList {
				return validation.PodDisruptionBudget(obj.(*policyv1.PodDisruptionBudget))
			},
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.PodDisruptionBudgetUpdate(obj.(*policyv1.PodDisruptionBudget), old.(*policyv1.PodDisruptionBudget))
			},
			ValidateStatusUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.PodDisruptionBudgetStatusUpdate(obj.(*policyv1.PodDisruptionBudget), old.(*policyv1.PodDisruptionBudget))
			},
			SpecChanged: func(obj, old runtime.Object) bool {
				return !apiequality.Semantic.DeepEqual(obj.(*policyv1.PodDisruptionBudget).Spec, old.(*policyv1.PodDisruptionBudget).Spec)
			},
		},
	}
}
