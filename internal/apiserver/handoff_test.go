package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/nodeplane/nodeplane/internal/loopback"
	"github.com/nodeplane/nodeplane/internal/pki"
)

// handoffNodes is a Nodes client that reaches h in process and accepts
// handed objects first, as the server's controllers do.
func handoffNodes(t *testing.T, h http.Handler) corev1client.NodeInterface {
	t.Helper()
	c, err := pki.EnsureCluster(pki.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _, err := c.IssueClientCert("system:kube-controller-manager", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := loopback.New(loopback.Config{Handler: h, CertPEM: certPEM, Roots: c.CertPool()})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := tr.Serializers(scheme.Codecs.WithoutConversion())
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rest.RESTClientFor(&rest.Config{
		Host: "http://server", Transport: asAdmin{tr}, APIPath: "/api",
		ContentConfig: rest.ContentConfig{
			GroupVersion: &corev1.SchemeGroupVersion, NegotiatedSerializer: ns,
			ContentType: mediaProtobuf, AcceptContentTypes: loopback.MediaType + "," + mediaProtobuf,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return corev1client.New(rc).Nodes()
}

// nextWatchEvent waits at most 10 s for the next event of w.
func nextWatchEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("the watch ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event within 10 s")
	}
	return watch.Event{}
}

func TestAnInProcessWatchIsHandedTheServersOwnObjects(t *testing.T) {
	s, h := newTestServer(t, Config{})
	mustDo(t, h, admin, http.MethodPost, "/api/v1/nodes", map[string]any{
		"metadata": map[string]any{"name": "n1", "labels": map[string]string{"zone": "a"}},
	}, http.StatusCreated)
	nodes := s.resources[schema.GroupVersionResource{Version: "v1", Resource: "nodes"}].st
	nodesClient := handoffNodes(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	w, err := nodesClient.Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	same := func(ev watch.Event, want watch.EventType) {
		t.Helper()
		cached, err := nodes.GetCached("", "n1")
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != want || ev.Object != cached {
			t.Fatalf("event %s %p, want %s with the cache's object %p", ev.Type, ev.Object, want, cached)
		}
	}
	added := nextWatchEvent(t, w)
	same(added, watch.Added)
	// The cache's objects carry their kind: a response that needed to set
	// it would otherwise write to an object the informers share.
	if gvk := added.Object.GetObjectKind().GroupVersionKind(); gvk.Kind != "Node" || gvk.Version != "v1" {
		t.Errorf("the cached Node's kind is %v", gvk)
	}
	mustDo(t, h, admin, http.MethodPatch, "/api/v1/nodes/n1", `{"metadata":{"labels":{"zone":"b"}}}`, http.StatusOK)
	ev := nextWatchEvent(t, w)
	same(ev, watch.Modified)
	if got := ev.Object.(*corev1.Node).Labels["zone"]; got != "b" {
		t.Errorf("zone %q after the patch, want b", got)
	}

	// Other verbs are encoded: what a client gets or lists is its own.
	got, err := nodesClient.Get(ctx, "n1", metav1.GetOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	list, err := nodesClient.List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	cached, _ := nodes.GetCached("", "n1")
	for what, obj := range map[string]*corev1.Node{"get": got, "list": &list.Items[0]} {
		if obj == cached || obj.Name != "n1" {
			t.Errorf("%s gave %p %q: want a copy of n1, not the cache's %p", what, obj, obj.Name, cached)
		}
		obj.Labels["zone"] = "changed by the client"
	}
	if cached.(*corev1.Node).Labels["zone"] != "b" {
		t.Error("changing what a client got changed the server's object")
	}
}

func TestAClientFromTheNetworkCannotBeHandedObjects(t *testing.T) {
	_, h := newTestServer(t, Config{})
	mustDo(t, h, admin, http.MethodPost, "/api/v1/nodes", map[string]any{"metadata": map[string]any{"name": "n1"}}, http.StatusCreated)
	tests := []struct {
		name, path, accept string
		code               int
		contentType        string
	}{
		{"a watch asking only for handed objects is not acceptable", "/api/v1/nodes?watch=1&resourceVersion=0&timeoutSeconds=1", loopback.MediaType, http.StatusNotAcceptable, ""},
		{"a list asking only for handed objects is not acceptable", "/api/v1/nodes", loopback.MediaType, http.StatusNotAcceptable, ""},
		{"a watch that also accepts JSON gets JSON", "/api/v1/nodes?watch=1&resourceVersion=0&timeoutSeconds=1", loopback.MediaType + ",application/json", http.StatusOK, mediaJSON},
		{"a watch that also accepts protobuf gets protobuf", "/api/v1/nodes?watch=1&resourceVersion=0&timeoutSeconds=1", loopback.MediaType + "," + mediaProtobuf, http.StatusOK, mediaProtobuf + ";stream=watch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, tt.path, nil)
			req.Header.Set("Accept", tt.accept)
			req.Header.Set(headerUser, admin.name)
			req.Header.Set(headerGroups, strings.Join(admin.groups, ","))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.code {
				t.Fatalf("%d %s, want %d", rec.Code, rec.Body, tt.code)
			}
			if ct := rec.Header().Get("Content-Type"); tt.contentType != "" && ct != tt.contentType {
				t.Errorf("Content-Type %q, want %q", ct, tt.contentType)
			}
			if tt.code == http.StatusNotAcceptable {
				var st metav1.Status
				if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || st.Reason != metav1.StatusReasonNotAcceptable {
					t.Errorf("answer %s is not a NotAcceptable Status (%v)", rec.Body, err)
				}
			}
		})
	}
}
