package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodeplane/nodeplane/internal/apiserver/scheme"
	"github.com/nodeplane/nodeplane/internal/apiserver/store"
)

// Over the in-memory store the watch cache takes the object an update
// wrote instead of decoding its stored value again (store.Store.hands).
// What it holds must be what a decode of the stored value gives, field for
// field, whatever the request looked like: JSON or protobuf, times with
// nanoseconds, empty maps and lists, a merge patch, a refused update.
func TestTheCacheHoldsWhatADecodeOfAnUpdatesStoredValueGives(t *testing.T) {
	s, h := newTestServer(t, Config{Storage: newMemStorage(t)})
	st := s.resources[coordinationv1.SchemeGroupVersion.WithResource("leases")].st
	const ns, name = "kube-node-lease", "n1"
	const path = "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases/" + name

	// check compares the cache's object at the answer's resourceVersion
	// with a decode of what storage holds.
	check := func(t *testing.T, body []byte) {
		t.Helper()
		var got coordinationv1.Lease
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("answer %s: %v", body, err)
		}
		rv, err := store.ParseRV(got.ResourceVersion)
		if err != nil {
			t.Fatal(err)
		}
		// The cached list waits (bounded) until the cache reflects rv.
		page, err := st.ListFromCache(context.Background(), store.Predicate{Namespace: ns}, rv)
		if err != nil {
			t.Fatalf("the cache at resourceVersion %d: %v", rv, err)
		}
		var cached *coordinationv1.Lease
		for _, o := range page.Items {
			if l := o.(*coordinationv1.Lease); l.Name == name {
				cached = l
			}
		}
		if cached == nil {
			t.Fatalf("the cache at resourceVersion %d has no Lease %s/%s", rv, ns, name)
		}
		if crv, _ := store.ObjectRV(cached); crv != rv {
			t.Fatalf("the cache holds resourceVersion %d, want %d", crv, rv)
		}
		decoded, err := st.Get(context.Background(), ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(cached, decoded) {
			t.Errorf("the cache holds\n%#v\nwhere a decode of the stored value gives\n%#v", cached, decoded)
		}
	}

	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40)},
	}
	created := mustDo(t, h, admin, http.MethodPost, "/apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases", lease, http.StatusCreated)
	var cur coordinationv1.Lease
	if err := json.Unmarshal(created.body, &cur); err != nil {
		t.Fatal(err)
	}

	t.Run("a JSON update with empty labels and owner references", func(t *testing.T) {
		body := `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"n1","namespace":"kube-node-lease","resourceVersion":"` +
			cur.ResourceVersion + `","labels":{},"annotations":{},"ownerReferences":[]},"spec":{"holderIdentity":"n1","leaseDurationSeconds":40,"renewTime":"2026-11-28T05:00:00.123456Z"}}`
		check(t, mustDo(t, h, admin, http.MethodPut, path, body, http.StatusOK).body)
	})

	t.Run("a protobuf update as the agent sends, its renew time in nanoseconds", func(t *testing.T) {
		var l coordinationv1.Lease
		if err := json.Unmarshal(mustDo(t, h, admin, http.MethodGet, path, nil, http.StatusOK).body, &l); err != nil {
			t.Fatal(err)
		}
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Date(2026, 11, 28, 5, 0, 10, 987654321, time.UTC)}
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: name, UID: "u-1", Controller: ptr.To(false)}}
		l.Labels = map[string]string{"zone": "a"}
		info := serializerFor(mediaProtobuf)
		var buf bytes.Buffer
		if err := scheme.Codecs.EncoderForVersion(info.Serializer, coordinationv1.SchemeGroupVersion).Encode(&l, &buf); err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPut, path, &buf)
		req.Header.Set("Content-Type", mediaProtobuf)
		req.Header.Set(headerUser, admin.name)
		req.Header.Set(headerGroups, admin.groups[0])
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("got %d %s", rec.Code, rec.Body)
		}
		check(t, mustDo(t, h, admin, http.MethodGet, path, nil, http.StatusOK).body)
	})

	t.Run("a merge patch", func(t *testing.T) {
		patch := `{"metadata":{"annotations":{"a":"b"}},"spec":{"leaseTransitions":3,"acquireTime":"2026-11-28T05:01:00.000001Z"}}`
		check(t, mustDo(t, h, admin, http.MethodPatch, path, patch, http.StatusOK).body)
	})

	t.Run("an update at a stale resourceVersion, refused", func(t *testing.T) {
		body := `{"metadata":{"name":"n1","namespace":"kube-node-lease","resourceVersion":"` + cur.ResourceVersion +
			`"},"spec":{"holderIdentity":"other","leaseDurationSeconds":10}}`
		mustDo(t, h, admin, http.MethodPut, path, body, http.StatusConflict)
		check(t, mustDo(t, h, admin, http.MethodGet, path, nil, http.StatusOK).body)
	})
}
