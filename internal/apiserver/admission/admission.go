// Package admission holds the built-in admission plugins the API server runs
// on writes after decoding and defaulting and before validation: each may
// mutate the object or refuse the request with an API error. Plugins:
// DefaultTolerationSeconds (SPEC DTS-1/2), NodeRestriction (SPEC
// AUTH-7..AUTH-10), TaintNodesByCondition and StorageObjectInUseProtection.
//
// Plugins see one write at a time through Attributes; they do not decide
// which verbs a user may use (package authz does) and read other stored
// objects only through the Objects the server hands them.
package admission

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
)

// Operation is the kind of write being admitted.
type Operation string

// Operations.
const (
	Create Operation = "CREATE"
	Update Operation = "UPDATE"
	Delete Operation = "DELETE"
)

// Attributes describe one write. The server admits creates and updates of
// main resources and subresources (status, eviction, binding) and deletes.
type Attributes struct {
	Operation   Operation
	Resource    schema.GroupResource
	Subresource string
	Namespace   string
	// Name is the object's name from the path ("" on create: read it from
	// Object).
	Name string
	// Object is the incoming object (mutable): the new state on create and
	// update, the Eviction or Binding on those subresources, nil on delete.
	Object runtime.Object
	// OldObject is the stored object: the old state on update, the object
	// being deleted on delete, and the target pod on a pods/eviction or
	// pods/binding create.
	OldObject runtime.Object
	// User is the requester (nil when the server runs without
	// authentication).
	User *authn.User
	// Objects reads other stored objects a decision depends on (nil when
	// the server offers none).
	Objects Objects
}

// Objects reads stored objects for admission decisions. Each method
// returns nil and no error when the object does not exist.
type Objects interface {
	Node(ctx context.Context, name string) (*corev1.Node, error)
}

// Plugin admits (and may mutate) a write. A returned error refuses it; it
// should be an API status error (errors.NewForbidden, NewInvalid...).
type Plugin interface {
	Name() string
	Admit(ctx context.Context, a Attributes) error
}
