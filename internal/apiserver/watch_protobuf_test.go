package apiserver

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// asAdmin adds the test headers of the admin to every request, so a real
// client-go client can talk to the test handler.
type asAdmin struct{ next http.RoundTripper }

func (a asAdmin) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(headerUser, admin.name)
	r.Header.Set(headerGroups, strings.Join(admin.groups, ","))
	return a.next.RoundTrip(r)
}

func TestProtobufWatchStreams(t *testing.T) {
	// A short watch history, so a watch can be made to start too far back.
	_, h := newTestServer(t, Config{HistorySize: 2})
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	cfg := &rest.Config{
		Host:            srv.URL,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		WrapTransport:   func(rt http.RoundTripper) http.RoundTripper { return asAdmin{rt} },
		ContentConfig: rest.ContentConfig{
			ContentType:        "application/vnd.kubernetes.protobuf",
			AcceptContentTypes: "application/vnd.kubernetes.protobuf,application/json",
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	leases := cs.CoordinationV1().Leases("default")
	lease, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "pb", Labels: map[string]string{"a": "b"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("first")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("a typed protobuf client decodes every event of its watch", func(t *testing.T) {
		w, err := leases.Watch(ctx, metav1.ListOptions{ResourceVersion: "0", AllowWatchBookmarks: true})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if ev := nextWatchEvent(t, w); ev.Type != watch.Added || ev.Object.(*coordinationv1.Lease).Name != "pb" {
			t.Fatalf("first event %v %#v, want ADDED of the lease", ev.Type, ev.Object)
		}
		lease.Spec.HolderIdentity = ptr.To("second")
		if lease, err = leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		ev := nextWatchEvent(t, w)
		got, ok := ev.Object.(*coordinationv1.Lease)
		if ev.Type != watch.Modified || !ok || *got.Spec.HolderIdentity != "second" || got.ResourceVersion != lease.ResourceVersion || got.Labels["a"] != "b" {
			t.Fatalf("event %v %#v, want MODIFIED with holder second at %s", ev.Type, ev.Object, lease.ResourceVersion)
		}
	})

	t.Run("a watch from a revision the cache no longer holds gets a 410 Status event", func(t *testing.T) {
		from := lease.ResourceVersion
		for range 3 {
			if lease, err = leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		w, err := leases.Watch(ctx, metav1.ListOptions{ResourceVersion: from})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		ev := nextWatchEvent(t, w)
		st, ok := ev.Object.(*metav1.Status)
		if ev.Type != watch.Error || !ok || st.Code != http.StatusGone || st.Reason != metav1.StatusReasonExpired {
			t.Fatalf("event %v %#v, want ERROR with a 410 Expired Status", ev.Type, ev.Object)
		}
	})

	t.Run("a metadata client's watch gets partial metadata over protobuf", func(t *testing.T) {
		md, err := metadata.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		w, err := md.Resource(schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}).
			Namespace("default").Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		ev := nextWatchEvent(t, w)
		got, ok := ev.Object.(*metav1.PartialObjectMetadata)
		if ev.Type != watch.Added || !ok || got.Name != "pb" || got.Labels["a"] != "b" {
			t.Fatalf("event %v %#v, want ADDED PartialObjectMetadata of the lease", ev.Type, ev.Object)
		}
	})

	// rawWatch opens a watch of leases with accept and returns the response.
	rawWatch := func(t *testing.T, accept string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/apis/coordination.k8s.io/v1/namespaces/default/leases?watch=true&resourceVersion=0", nil)
		req.Header.Set("Accept", accept)
		resp, err := asAdmin{srv.Client().Transport}.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}

	t.Run("the protobuf stream is length-prefixed frames with the stream content type", func(t *testing.T) {
		resp := rawWatch(t, "application/vnd.kubernetes.protobuf")
		if ct := resp.Header.Get("Content-Type"); ct != "application/vnd.kubernetes.protobuf;stream=watch" {
			t.Fatalf("Content-Type %q", ct)
		}
		var size [4]byte
		if _, err := io.ReadFull(resp.Body, size[:]); err != nil {
			t.Fatal(err)
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(resp.Body, frame); err != nil {
			t.Fatal(err)
		}
		var ev metav1.WatchEvent
		if err := ev.Unmarshal(frame); err != nil {
			t.Fatal(err)
		}
		if ev.Type != "ADDED" || !strings.HasPrefix(string(ev.Object.Raw), "k8s\x00") {
			t.Errorf("frame %q: want an ADDED event holding a protobuf object (magic k8s\\0)", frame)
		}
	})

	for _, accept := range []string{"application/json", "application/yaml", "*/*", ""} {
		t.Run("a watch asking for "+accept+" gets JSON lines", func(t *testing.T) {
			resp := rawWatch(t, accept)
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q", ct)
			}
			line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
			if err != nil {
				t.Fatal(err)
			}
			var ev struct {
				Type   string               `json:"type"`
				Object coordinationv1.Lease `json:"object"`
			}
			if err := json.Unmarshal(line, &ev); err != nil || ev.Type != "ADDED" || ev.Object.Name != "pb" {
				t.Errorf("line %s (%v): want the lease ADDED", line, err)
			}
		})
	}

	t.Run("a watch asking only for something else is 406", func(t *testing.T) {
		resp := rawWatch(t, "text/html")
		if resp.StatusCode != http.StatusNotAcceptable {
			t.Errorf("got %d, want 406", resp.StatusCode)
		}
	})
}
