package registry

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeplane/nodeplane/internal/apiserver/printers"
	"github.com/nodeplane/nodeplane/internal/apiserver/validation"
)

// Leases declares coordination.k8s.io/v1 leases: node heartbeats in
// kube-node-lease and leader election in kube-system. Renewals are the
// hottest write of the system; the strategy does nothing beyond validation.
func Leases() *Resource {
	return &Resource{
		GroupVersion: coordinationv1.SchemeGroupVersion, Resource: "leases", Singular: "lease", Kind: "Lease", ListKind: "LeaseList",
		Namespaced:    true,
		New:           func() runtime.Object { return &coordinationv1.Lease{} },
		NewList:       func() runtime.Object { return &coordinationv1.LeaseList{} },
		IndexedFields: []string{"metadata.name"},
		Printer:       printers.Leases(),
		RoundTrips:    true,
		Strategy: Strategy{
			Validate: func(obj runtime.Object) field.ErrorList { return validation.Lease(obj.(*coordinationv1.Lease)) },
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.LeaseUpdate(obj.(*coordinationv1.Lease), old.(*coordinationv1.Lease))
			},
		},
	}
}
