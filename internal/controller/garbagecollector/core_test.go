package garbagecollector

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

var (
	podKind = schema.GroupKind{Kind: "Pod"}
	rsKind  = schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}
)

type option func(*Object)

func object(kind schema.GroupKind, name string, opts ...option) Object {
	o := Object{Ref: Ref{Kind: kind, Namespace: "default", Name: name, UID: types.UID(name + "-uid")}}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// ownedBy adds a reference to the owner with UID uid; blocking sets
// blockOwnerDeletion.
func ownedBy(uid types.UID, blocking bool) option {
	return func(o *Object) {
		ref := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: string(uid), UID: uid}
		if blocking {
			ref.BlockOwnerDeletion = &blocking
		}
		o.Owners = append(o.Owners, ref)
	}
}

func deleting(finalizers ...string) option {
	return func(o *Object) {
		o.Deleting = true
		o.Finalizers = finalizers
	}
}

func finalizers(f ...string) option { return func(o *Object) { o.Finalizers = f } }

const (
	orphan     = metav1.FinalizerOrphanDependents
	foreground = metav1.FinalizerDeleteDependents
)

func TestPlan(t *testing.T) {
	rsA, rsB := types.UID("a"), types.UID("b")
	child := object(podKind, "grandchild", ownedBy("pod-uid", true))
	foregroundChild := object(podKind, "grandchild", ownedBy("pod-uid", true), deleting(foreground))
	for _, tc := range []struct {
		name       string
		obj        Object
		owners     []OwnerState
		dependents []Object
		want       Action
	}{
		{
			name: "an object without owners is left alone",
			obj:  object(podKind, "pod"),
			want: Action{},
		},
		{
			name:   "an object whose owner exists is left alone",
			obj:    object(podKind, "pod", ownedBy(rsA, true)),
			owners: []OwnerState{OwnerPresent},
			want:   Action{},
		},
		{
			name:   "an object whose only owner is gone is deleted in the background",
			obj:    object(podKind, "pod", ownedBy(rsA, true)),
			owners: []OwnerState{OwnerAbsent},
			want:   Action{Delete: true, Policy: metav1.DeletePropagationBackground},
		},
		{
			name:   "an object whose owners are all gone is deleted",
			obj:    object(podKind, "pod", ownedBy(rsA, true), ownedBy(rsB, false)),
			owners: []OwnerState{OwnerAbsent, OwnerAbsent},
			want:   Action{Delete: true, Policy: metav1.DeletePropagationBackground},
		},
		{
			name:   "an object keeping one owner loses only the reference to the gone one",
			obj:    object(podKind, "pod", ownedBy(rsA, true), ownedBy(rsB, false)),
			owners: []OwnerState{OwnerAbsent, OwnerPresent},
			want:   Action{RemoveOwners: []types.UID{rsA}},
		},
		{
			name:   "an object keeping one owner loses its reference to an owner deleting its dependents",
			obj:    object(podKind, "pod", ownedBy(rsA, true), ownedBy(rsB, false)),
			owners: []OwnerState{OwnerPresent, OwnerDeletingDependents},
			want:   Action{RemoveOwners: []types.UID{rsB}},
		},
		{
			name:   "an object without dependents whose owner deletes its dependents is deleted in the background",
			obj:    object(podKind, "pod", ownedBy(rsA, true)),
			owners: []OwnerState{OwnerDeletingDependents},
			want:   Action{Delete: true, Policy: metav1.DeletePropagationBackground},
		},
		{
			name:       "an object with dependents whose owner deletes its dependents is deleted in the foreground",
			obj:        object(podKind, "pod", ownedBy(rsA, true)),
			owners:     []OwnerState{OwnerDeletingDependents},
			dependents: []Object{child},
			want:       Action{Delete: true, Policy: metav1.DeletePropagationForeground},
		},
		{
			name:       "a dependent itself deleting its dependents makes the object unblock its owners first",
			obj:        object(podKind, "pod", ownedBy(rsA, true), ownedBy(rsB, false)),
			owners:     []OwnerState{OwnerDeletingDependents, OwnerAbsent},
			dependents: []Object{child, foregroundChild},
			want:       Action{Unblock: []types.UID{rsA}, Delete: true, Policy: metav1.DeletePropagationForeground},
		},
		{
			name:       "an object with dependents whose owner is gone is deleted in the background",
			obj:        object(podKind, "pod", ownedBy(rsA, true)),
			owners:     []OwnerState{OwnerAbsent},
			dependents: []Object{child},
			want:       Action{Delete: true, Policy: metav1.DeletePropagationBackground},
		},
		{
			name:   "an orphaned object holding the orphan finalizer is deleted with Orphan",
			obj:    object(podKind, "pod", ownedBy(rsA, true), finalizers(orphan)),
			owners: []OwnerState{OwnerAbsent},
			want:   Action{Delete: true, Policy: metav1.DeletePropagationOrphan},
		},
		{
			name:   "an orphaned object holding foregroundDeletion is deleted with Foreground",
			obj:    object(podKind, "pod", ownedBy(rsA, true), finalizers("example.com/x", foreground)),
			owners: []OwnerState{OwnerAbsent},
			want:   Action{Delete: true, Policy: metav1.DeletePropagationForeground},
		},
		{
			name:   "an object already being deleted is left to its deletion",
			obj:    object(podKind, "pod", ownedBy(rsA, true), deleting()),
			owners: []OwnerState{OwnerAbsent},
			want:   Action{},
		},
		{
			name:   "owner states that do not match the references decide nothing",
			obj:    object(podKind, "pod", ownedBy(rsA, true)),
			owners: nil,
			want:   Action{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Plan(tc.obj, tc.owners, tc.dependents); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestPlanDeleting(t *testing.T) {
	owner := types.UID("rs-uid")
	blocking := object(podKind, "blocking", ownedBy(owner, true))
	terminating := object(podKind, "terminating", ownedBy(owner, true), deleting())
	free := object(podKind, "free", ownedBy(owner, false))
	otherOwner := object(podKind, "other", ownedBy("x", true), ownedBy(owner, false))
	for _, tc := range []struct {
		name       string
		obj        Object
		dependents []Object
		want       Action
	}{
		{
			name: "an object not being deleted is not finished here",
			obj:  object(rsKind, "rs", finalizers(foreground)),
			want: Action{},
		},
		{
			name:       "a foreground delete waits for a blocking dependent",
			obj:        object(rsKind, "rs", deleting(foreground)),
			dependents: []Object{free, blocking},
			want:       Action{},
		},
		{
			name:       "a foreground delete waits for a blocking dependent that is still terminating",
			obj:        object(rsKind, "rs", deleting(foreground)),
			dependents: []Object{terminating},
			want:       Action{},
		},
		{
			name:       "a foreground delete completes when only non-blocking dependents remain",
			obj:        object(rsKind, "rs", deleting(foreground)),
			dependents: []Object{free, otherOwner},
			want:       Action{RemoveFinalizer: foreground},
		},
		{
			name: "a foreground delete without dependents completes",
			obj:  object(rsKind, "rs", deleting("example.com/x", foreground)),
			want: Action{RemoveFinalizer: foreground},
		},
		{
			name:       "an orphan delete releases every dependent, then its finalizer",
			obj:        object(rsKind, "rs", deleting(orphan)),
			dependents: []Object{blocking, free},
			want:       Action{Orphan: []Object{blocking, free}, RemoveFinalizer: orphan},
		},
		{
			name: "an orphan delete without dependents removes its finalizer",
			obj:  object(rsKind, "rs", deleting(orphan)),
			want: Action{RemoveFinalizer: orphan},
		},
		{
			name:       "a delete held by another finalizer is not the collector's",
			obj:        object(rsKind, "rs", deleting("example.com/x")),
			dependents: []Object{blocking},
			want:       Action{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PlanDeleting(tc.obj, tc.dependents); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestStateOf(t *testing.T) {
	present := object(rsKind, "rs")
	terminating := object(rsKind, "rs", deleting())
	orphaning := object(rsKind, "rs", deleting(orphan))
	foregroundDeleting := object(rsKind, "rs", deleting(foreground))
	notYetDeleting := object(rsKind, "rs", finalizers(foreground))
	for _, tc := range []struct {
		name  string
		owner *Object
		want  OwnerState
	}{
		{"a missing owner is absent", nil, OwnerAbsent},
		{"an existing owner is present", &present, OwnerPresent},
		{"an owner being deleted in the background is still present", &terminating, OwnerPresent},
		{"an owner orphaning its dependents is present", &orphaning, OwnerPresent},
		{"an owner being deleted in the foreground deletes its dependents", &foregroundDeleting, OwnerDeletingDependents},
		{"an owner holding foregroundDeletion before any delete is present", &notYetDeleting, OwnerPresent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := StateOf(tc.owner); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
