package garbagecollector

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// ControllerName is the --controllers name.
const ControllerName = "garbage-collector-controller"

// Ref names one object.
type Ref struct {
	Kind      schema.GroupKind
	Namespace string
	Name      string
	UID       types.UID
}

// String is "Kind namespace/name" for logs.
func (r Ref) String() string {
	if r.Namespace == "" {
		return r.Kind.String() + " " + r.Name
	}
	return r.Kind.String() + " " + r.Namespace + "/" + r.Name
}

// Object is what the collector looks at in one object.
type Object struct {
	Ref
	Owners     []metav1.OwnerReference
	Deleting   bool // metadata.deletionTimestamp is set
	Finalizers []string
}

// ObjectOf reads o (any API object) as an Object of kind gk.
func ObjectOf(gk schema.GroupKind, o metav1.Object) Object {
	return Object{
		Ref:        Ref{Kind: gk, Namespace: o.GetNamespace(), Name: o.GetName(), UID: o.GetUID()},
		Owners:     o.GetOwnerReferences(),
		Deleting:   o.GetDeletionTimestamp() != nil,
		Finalizers: o.GetFinalizers(),
	}
}

// DeletingDependents reports an object being deleted in the foreground.
func (o Object) DeletingDependents() bool {
	return o.Deleting && slices.Contains(o.Finalizers, metav1.FinalizerDeleteDependents)
}

// ownerRef returns o's reference to the owner with uid.
func (o Object) ownerRef(uid types.UID) (metav1.OwnerReference, bool) {
	for _, ref := range o.Owners {
		if ref.UID == uid {
			return ref, true
		}
	}
	return metav1.OwnerReference{}, false
}

// OwnerState is what became of the object an owner reference names.
type OwnerState int

const (
	// OwnerPresent: the owner exists and is not deleting its dependents,
	// or the reference cannot be resolved (a kind the collector does not
	// watch): either way nothing is collected through it.
	OwnerPresent OwnerState = iota
	// OwnerAbsent: no object of that kind, namespace, name and UID exists
	// (the shell has confirmed it with a live read).
	OwnerAbsent
	// OwnerDeletingDependents: the owner is being deleted in the foreground.
	OwnerDeletingDependents
)

// StateOf is the state of an owner the shell found (nil: none with the
// referenced UID).
func StateOf(owner *Object) OwnerState {
	switch {
	case owner == nil:
		return OwnerAbsent
	case owner.DeletingDependents():
		return OwnerDeletingDependents
	default:
		return OwnerPresent
	}
}

// Action is what to do with one object. The zero Action does nothing.
// The shell carries out its parts in field order.
type Action struct {
	// Unblock: set blockOwnerDeletion=false on the object's references to
	// these owners before deleting it (see Plan).
	Unblock []types.UID
	// Delete the object with Policy.
	Delete bool
	Policy metav1.DeletionPropagation
	// RemoveOwners: drop the object's references to these owners.
	RemoveOwners []types.UID
	// Orphan: drop the reference to the object from each of these
	// dependents; only when every one succeeded, remove the finalizer.
	Orphan []Object
	// RemoveFinalizer names a finalizer to remove from the object.
	RemoveFinalizer string
}

// None reports an Action that does nothing.
func (a Action) None() bool {
	return len(a.Unblock) == 0 && !a.Delete && len(a.RemoveOwners) == 0 && len(a.Orphan) == 0 && a.RemoveFinalizer == ""
}

// Plan decides for an object that is not being deleted, from the state of
// each of its owners (owners[i] is the state of obj.Owners[i]) and its own
// dependents (the objects whose owner references name obj's UID):
//
//   - with no owner, or every owner present: nothing;
//   - some owner present and others gone or deleting their dependents:
//     remove the references to the latter, keep the object;
//   - no owner present, one deleting its dependents, and dependents of its
//     own: delete it in the foreground, so its owner waits for the whole
//     subtree; if one of those dependents is itself deleting its
//     dependents, first unblock the object's references (two foreground
//     deletes waiting on each other would never finish);
//   - otherwise no owner remains: delete it with the policy its own
//     finalizers ask for (orphan → Orphan, foregroundDeletion →
//     Foreground, neither → Background).
func Plan(obj Object, owners []OwnerState, dependents []Object) Action {
	if obj.Deleting || len(obj.Owners) == 0 || len(owners) != len(obj.Owners) {
		return Action{}
	}
	var present int
	var gone, waiting []types.UID
	for i, s := range owners {
		switch s {
		case OwnerPresent:
			present++
		case OwnerAbsent:
			gone = append(gone, obj.Owners[i].UID)
		case OwnerDeletingDependents:
			waiting = append(waiting, obj.Owners[i].UID)
		}
	}
	if present > 0 {
		return Action{RemoveOwners: append(gone, waiting...)}
	}
	if len(waiting) > 0 && len(dependents) > 0 {
		a := Action{Delete: true, Policy: metav1.DeletePropagationForeground}
		if slices.ContainsFunc(dependents, Object.DeletingDependents) {
			for _, ref := range obj.Owners {
				if ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion {
					a.Unblock = append(a.Unblock, ref.UID)
				}
			}
		}
		return a
	}
	policy := metav1.DeletePropagationBackground
	switch {
	case slices.Contains(obj.Finalizers, metav1.FinalizerOrphanDependents):
		policy = metav1.DeletePropagationOrphan
	case slices.Contains(obj.Finalizers, metav1.FinalizerDeleteDependents):
		policy = metav1.DeletePropagationForeground
	}
	return Action{Delete: true, Policy: policy}
}

// PlanDeleting decides for an object being deleted, from its dependents:
//
//   - with the orphan finalizer: remove the reference to it from every
//     dependent, then the finalizer;
//   - with the foregroundDeletion finalizer: once no dependent blocks it
//     (a reference with blockOwnerDeletion=true; a dependent that is itself
//     terminating still blocks until it is gone), remove the finalizer. The
//     dependents themselves are deleted by Plan, each on its own;
//   - otherwise: nothing (its dependents are collected once it is gone).
func PlanDeleting(obj Object, dependents []Object) Action {
	if !obj.Deleting {
		return Action{}
	}
	switch {
	case slices.Contains(obj.Finalizers, metav1.FinalizerOrphanDependents):
		return Action{Orphan: dependents, RemoveFinalizer: metav1.FinalizerOrphanDependents}
	case slices.Contains(obj.Finalizers, metav1.FinalizerDeleteDependents):
		for _, d := range dependents {
			if ref, ok := d.ownerRef(obj.UID); ok && ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion {
				return Action{}
			}
		}
		return Action{RemoveFinalizer: metav1.FinalizerDeleteDependents}
	}
	return Action{}
}
