package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodeplane/nodeplane/internal/apiserver/store"
)

func TestCachedNodesShareTheStringsAndListsTheyRepeat(t *testing.T) {
	s, h := newTestServer(t, Config{})
	var lastRV int64
	for _, name := range []string{"n1", "n2"} {
		node := map[string]any{
			"metadata": map[string]any{"name": name, "labels": map[string]any{"topology.kubernetes.io/zone": "z1"}},
			"status": map[string]any{
				"images":      []any{map[string]any{"names": []any{"registry.k8s.io/pause:3.10"}, "sizeBytes": 1}},
				"capacity":    map[string]any{"cpu": "8", "memory": "32Gi", "pods": "110"},
				"allocatable": map[string]any{"cpu": "7910m", "memory": "31Gi", "pods": "110"},
			},
		}
		r := do(t, h, admin, "POST", "/api/v1/nodes", node)
		if r.code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, r.code, r.body)
		}
		var created corev1.Node
		if err := json.Unmarshal(r.body, &created); err != nil {
			t.Fatal(err)
		}
		lastRV, _ = store.ParseRV(created.ResourceVersion)
	}
	st := s.resources[schema.GroupVersionResource{Version: "v1", Resource: "nodes"}].st
	// A list from the cache at the last create's revision waits for the
	// cache to have both Nodes.
	if _, err := st.ListFromCache(context.Background(), store.Predicate{}, lastRV); err != nil {
		t.Fatal(err)
	}
	cached := func(name string) *corev1.Node {
		t.Helper()
		obj, err := st.GetCached("", name)
		if err != nil {
			t.Fatalf("%s is not in the watch cache: %v", name, err)
		}
		return obj.(*corev1.Node)
	}
	a, b := cached("n1"), cached("n2")
	if len(a.Status.Images) == 0 || len(b.Status.Images) == 0 {
		t.Fatal("a created Node kept no image (status is set on create)")
	}
	ia, ib := a.Status.Images[0].Names[0], b.Status.Images[0].Names[0]
	if ia != ib || unsafe.StringData(ia) != unsafe.StringData(ib) {
		t.Errorf("the two cached Nodes hold separate copies of the image name %q", ia)
	}
	za, zb := a.Labels["topology.kubernetes.io/zone"], b.Labels["topology.kubernetes.io/zone"]
	if unsafe.StringData(za) != unsafe.StringData(zb) {
		t.Error("the two cached Nodes hold separate copies of the zone label's value")
	}
	if unsafe.StringData(a.Name) == unsafe.StringData(b.Name) {
		t.Error("different names share bytes")
	}
	// The cache's objects are never modified, so Nodes of one machine type
	// share their lists; an object read from storage for a caller that may
	// modify it shares none.
	if reflect.ValueOf(a.Status.Capacity).UnsafePointer() != reflect.ValueOf(b.Status.Capacity).UnsafePointer() ||
		reflect.ValueOf(a.Status.Allocatable).UnsafePointer() != reflect.ValueOf(b.Status.Allocatable).UnsafePointer() {
		t.Error("the two cached Nodes hold separate capacity or allocatable lists")
	}
	if unsafe.SliceData(a.Status.Images) != unsafe.SliceData(b.Status.Images) {
		t.Error("the two cached Nodes hold separate image lists")
	}
	stored, err := st.Get(context.Background(), "", "n2")
	if err != nil {
		t.Fatal(err)
	}
	sn := stored.(*corev1.Node)
	if reflect.ValueOf(sn.Status.Capacity).UnsafePointer() == reflect.ValueOf(a.Status.Capacity).UnsafePointer() ||
		unsafe.SliceData(sn.Status.Images) == unsafe.SliceData(a.Status.Images) {
		t.Error("a Node read from storage shares a list with the cache")
	}
}
