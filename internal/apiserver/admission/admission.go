// Package admission holds the built-in admission plugins the API server runs
// on writes after decoding and defaulting and before validation: each may
// mutate the object or refuse the request with an API error.
package admission

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Operation is the kind of write being admitted.
type Operation string

// Operations.
const (
	Create Operation = "CREATE"
	Update Operation = "UPDATE"
	Delete Operation = "DELETE"
)

// Attributes describe one write.
type Attributes struct {
	Operation   Operation
	Resource    schema.GroupResource
	Subresource string
	Namespace   string
	Name        string
	// Object is the incoming object (mutable); OldObject the stored one on update.
	Object    runtime.Object
	OldObject runtime.Object
}

// Plugin admits (and may mutate) a write. A returned error refuses it; it
// should be an API status error (errors.NewForbidden, NewInvalid...).
type Plugin interface {
	Name() string
	Admit(ctx context.Context, a Attributes) error
}
