package store

import (
	"testing"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestFieldSetSelectsAsTheMapItReplaces(t *testing.T) {
	set := fields.Set{"metadata.name": "n1", "metadata.namespace": "", "spec.nodeName": "node-7", "status.phase": "Running"}
	pairs := func(dst []string, _ runtime.Object) []string {
		for k, v := range set {
			dst = append(dst, k, v)
		}
		return dst
	}
	compact := (&Store{cfg: Config{Fields: pairs}}).fieldsOf(nil)
	for _, tt := range []struct{ name, selector string }{
		{"an exact match on a field it has", "spec.nodeName=node-7"},
		{"an exact match on another value", "spec.nodeName=node-8"},
		{"a negative match", "status.phase!=Running"},
		{"an empty value", "metadata.namespace="},
		{"a field it does not have", "spec.unschedulable=true"},
		{"a negative match on a field it does not have", "spec.unschedulable!=true"},
		{"two terms", "metadata.name=n1,spec.nodeName=node-7"},
		{"two terms, one false", "metadata.name=n1,spec.nodeName=node-1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sel, err := fields.ParseSelector(tt.selector)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := sel.Matches(compact), sel.Matches(set); got != want {
				t.Errorf("%q matches the compact set: %v, the map: %v", tt.selector, got, want)
			}
		})
	}
	for k, v := range set {
		if !compact.Has(k) || compact.Get(k) != v {
			t.Errorf("field %s: Has %v, Get %q; want %q", k, compact.Has(k), compact.Get(k), v)
		}
	}
	if compact.Has("spec.unschedulable") || compact.Get("spec.unschedulable") != "" {
		t.Error("a field the object does not have is found")
	}
}

func TestACachedObjectsFieldSetKeepsNoSpareRoom(t *testing.T) {
	s := &Store{cfg: Config{Fields: func(dst []string, _ runtime.Object) []string {
		return append(dst, "metadata.name", "n1", "metadata.namespace", "kube-node-lease")
	}}}
	for i := range 3 {
		f := s.fieldsOf(nil)
		if len(f) != 4 || f.Get("metadata.namespace") != "kube-node-lease" {
			t.Fatalf("object %d: field set %q", i, f)
		}
		// The first set is grown by appending; every later one is made at
		// the size the resource's sets have.
		if i > 0 && cap(f) != len(f) {
			t.Errorf("object %d: a field set of %d strings keeps room for %d", i, len(f), cap(f))
		}
	}
}
