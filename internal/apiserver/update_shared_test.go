package apiserver

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// TestUpdateReadingTheCachedLeaseLeavesItAlone: a Lease update reads the
// watch cache's object in place (no deep copy); valid and refused renewals
// alike leave that object as it was, and refused ones get the same
// answers as before.
func TestUpdateReadingTheCachedLeaseLeavesItAlone(t *testing.T) {
	s, h := newTestServer(t, Config{})
	const path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"
	created := do(t, h, admin, http.MethodPost, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"a": "b"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("n1"), LeaseDurationSeconds: ptr.To[int32](40)},
	})
	if created.code != http.StatusCreated {
		t.Fatalf("create: %d %s", created.code, created.body)
	}
	cache := s.resources[coordinationv1.SchemeGroupVersion.WithResource("leases")].st
	renewal := func(change func(l *coordinationv1.Lease)) *coordinationv1.Lease {
		var l coordinationv1.Lease
		got := do(t, h, admin, http.MethodGet, path, nil)
		if err := json.Unmarshal(got.body, &l); err != nil {
			t.Fatal(err)
		}
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
		change(&l)
		return &l
	}
	tests := []struct {
		name       string
		change     func(l *coordinationv1.Lease)
		wantCode   int
		wantReason metav1.StatusReason
		wantField  string
	}{
		{"a renewal succeeds", func(*coordinationv1.Lease) {}, http.StatusOK, "", ""},
		{"a renewal that changes labels and annotations succeeds", func(l *coordinationv1.Lease) {
			l.Labels["a"] = "c"
			l.Annotations = map[string]string{"x": "y"}
		}, http.StatusOK, "", ""},
		{"a zero lease duration is refused", func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = ptr.To[int32](0) },
			http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "spec.leaseDurationSeconds"},
		{"an invalid label is refused", func(l *coordinationv1.Lease) { l.Labels["a b"] = "c" },
			http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "metadata.labels"},
		{"a deletion timestamp is refused", func(l *coordinationv1.Lease) { l.DeletionTimestamp = ptr.To(metav1.Now()) },
			http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "metadata.deletionTimestamp"},
		{"a stale resourceVersion is a conflict", func(l *coordinationv1.Lease) { l.ResourceVersion = "1" },
			http.StatusConflict, metav1.StatusReasonConflict, ""},
		{"another uid is a conflict", func(l *coordinationv1.Lease) { l.UID = "other" },
			http.StatusConflict, metav1.StatusReasonConflict, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := renewal(tt.change)
			var cached runtime.Object
			waitFor(t, "the cache to hold the lease's revision", func() bool {
				obj, err := cache.GetCached("kube-node-lease", "n1")
				if err != nil || obj.(*coordinationv1.Lease).ResourceVersion != l.ResourceVersion && tt.wantCode != http.StatusConflict {
					return false
				}
				cached = obj
				return true
			})
			before := cached.DeepCopyObject()
			got := do(t, h, asNode("n1"), http.MethodPut, path, l)
			if !reflect.DeepEqual(cached, before) {
				t.Fatalf("the update changed the cached object:\n%#v\nwas\n%#v", cached, before)
			}
			if got.code != tt.wantCode {
				t.Fatalf("PUT: %d %s, want %d", got.code, got.body, tt.wantCode)
			}
			if tt.wantCode == http.StatusOK {
				return
			}
			st := got.status(t)
			if st.Reason != tt.wantReason {
				t.Fatalf("reason %q, want %q: %s", st.Reason, tt.wantReason, got.body)
			}
			if tt.wantField != "" && (st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != tt.wantField) {
				t.Fatalf("causes %+v, want one for %s", st.Details, tt.wantField)
			}
		})
	}
}
