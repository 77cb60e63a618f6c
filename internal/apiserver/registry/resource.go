// Package registry declares the resources the API server serves: for each,
// its names and scope, how to default, prepare and validate it (its
// strategy), its field-selector fields, its subresources and its Table
// columns. The generic handlers in package apiserver do the rest, so adding
// a resource is one declaration here.
package registry

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeplane/nodeplane/internal/apiserver/printers"
)

// Strategy holds the per-resource hooks of the write path. Nil hooks are skipped.
type Strategy struct {
	// Default fills defaulted fields (create and update of the main resource).
	Default func(obj runtime.Object)
	// PrepareForCreate clears what a client may not set on create (e.g. pod status).
	PrepareForCreate func(obj runtime.Object)
	// PrepareForUpdate copies from old what the main resource may not change (status).
	PrepareForUpdate func(obj, old runtime.Object)
	// PrepareForStatusUpdate copies from old what the status subresource may
	// not change (spec, and any metadata the resource protects).
	PrepareForStatusUpdate func(obj, old runtime.Object)
	// Validate, ValidateUpdate and ValidateStatusUpdate include the
	// metadata rules: the server runs no separate metadata check.
	Validate             func(obj runtime.Object) field.ErrorList
	ValidateUpdate       func(obj, old runtime.Object) field.ErrorList
	ValidateStatusUpdate func(obj, old runtime.Object) field.ErrorList
	// PrepareForFinalizeUpdate and ValidateFinalizeUpdate serve the
	// namespaces' finalize subresource, which changes spec.finalizers only.
	PrepareForFinalizeUpdate func(obj, old runtime.Object)
	ValidateFinalizeUpdate   func(obj, old runtime.Object) field.ErrorList
	// SpecChanged reports a spec change; when set, metadata.generation starts
	// at 1 and is bumped on every spec change.
	SpecChanged func(obj, old runtime.Object) bool
	// AllowCreateOnUpdate lets PUT create a missing object.
	AllowCreateOnUpdate bool
	// DeleteGracePeriod returns how many seconds a delete of obj waits
	// (graceful deletion) given the requested grace (nil = the object's
	// default); 0 deletes at once. Nil means every delete is immediate.
	DeleteGracePeriod func(obj runtime.Object, requested *int64) int64
}

// Subresource names one subresource and the kind it accepts/returns.
type Subresource struct {
	Name string
	// GVK of the request/response body (e.g. policy/v1 Eviction); empty = the parent kind.
	GVK   schema.GroupVersionKind
	Verbs []string
}

// Scale maps a resource to the autoscaling/v1 Scale of its scale
// subresource.
type Scale struct {
	// Get returns spec.replicas, status.replicas and the pod label
	// selector in its string form ("app=web").
	Get func(obj runtime.Object) (specReplicas, statusReplicas int32, selector string)
	// SetReplicas writes spec.replicas.
	SetReplicas func(obj runtime.Object, replicas int32)
}

// Resource is one served resource.
type Resource struct {
	GroupVersion schema.GroupVersion
	// Resource is the plural name used in URLs ("nodes").
	Resource   string
	Singular   string
	Kind       string
	ListKind   string
	Namespaced bool
	ShortNames []string
	Categories []string
	New        func() runtime.Object
	NewList    func() runtime.Object
	// Fields returns the field-selector fields; metadata.name (and
	// metadata.namespace when namespaced) are always included.
	Fields func(obj runtime.Object) fields.Set
	// IndexedFields are fields whose exact-match watch selectors are indexed.
	IndexedFields []string
	Strategy      Strategy
	Subresources  []Subresource
	// Scale reads and writes the replica count behind the scale
	// subresource (autoscaling/v1 Scale); nil when the resource has none.
	Scale   *Scale
	Printer printers.Printer
	// StoragePrefix overrides the default "/registry/<group>/<resource>" key prefix.
	StoragePrefix string
	// Storage, when set, names a resource whose storage this one shares with
	// a different representation (events.k8s.io/v1 over core/v1 events).
	Storage *Resource
	// ToStorage/FromStorage convert between this representation and the
	// storage resource's (only with Storage).
	ToStorage   func(obj runtime.Object) (runtime.Object, error)
	FromStorage func(obj runtime.Object) (runtime.Object, error)
	// CreateOnly marks a resource that is answered, not stored (the
	// access reviews): it has no storage, no list kind and only "create".
	CreateOnly bool
	// ReadOnly marks a resource that is computed, not stored (the
	// metrics.k8s.io usage): only "get" and "list".
	ReadOnly bool
	// RoundTrips marks a resource whose objects, their metadata's empty
	// maps and lists taken as absent, are what a decode of their stored
	// encoding gives, field for field: outside the metadata only scalars,
	// pointers to scalars and times (Lease). Its watch cache may then take
	// an update's object instead of decoding the write again
	// (store.Config.HandWrites).
	RoundTrips bool
}

// GVK is the resource's kind.
func (r *Resource) GVK() schema.GroupVersionKind { return r.GroupVersion.WithKind(r.Kind) }

// ListGVK is the resource's list kind.
func (r *Resource) ListGVK() schema.GroupVersionKind { return r.GroupVersion.WithKind(r.ListKind) }

// GroupResource names the resource in errors.
func (r *Resource) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: r.GroupVersion.Group, Resource: r.Resource}
}

// Subresource returns the named subresource.
func (r *Resource) Subresource(name string) (Subresource, bool) {
	for _, s := range r.Subresources {
		if s.Name == name {
			return s, true
		}
	}
	return Subresource{}, false
}

// Verbs are the verbs of the main resource.
func (r *Resource) Verbs() []string {
	if r.CreateOnly {
		return []string{"create"}
	}
	if r.ReadOnly {
		return []string{"get", "list"}
	}
	return []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
}

// Prefix returns the storage key prefix.
func (r *Resource) Prefix() string {
	if r.Storage != nil {
		return r.Storage.Prefix()
	}
	if r.StoragePrefix != "" {
		return r.StoragePrefix
	}
	if r.GroupVersion.Group == "" {
		return "/registry/" + r.Resource
	}
	return "/registry/" + r.GroupVersion.Group + "/" + r.Resource
}

// AppendFields appends obj's field-selector fields to dst as name, value
// pairs — the metadata fields every resource supports, then the
// resource's own — and returns the extended slice.
func (r *Resource) AppendFields(dst []string, obj runtime.Object) []string {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return dst
	}
	dst = append(dst, "metadata.name", accessor.GetName())
	if r.Namespaced {
		dst = append(dst, "metadata.namespace", accessor.GetNamespace())
	}
	if r.Fields != nil {
		for k, v := range r.Fields(obj) {
			dst = append(dst, k, v)
		}
	}
	return dst
}

// AllFields returns the resource's field set for obj.
func (r *Resource) AllFields(obj runtime.Object) fields.Set {
	pairs := r.AppendFields(nil, obj)
	set := make(fields.Set, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		set[pairs[i]] = pairs[i+1]
	}
	return set
}
