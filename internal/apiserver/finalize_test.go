package apiserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/apiserver/authz"
)

// TestNamespaceFinalize: PUT namespaces/{name}/finalize changes
// spec.finalizers only, is refused to those who may not update namespaces
// and to other verbs, validates the names, and, once no finalizer holds a
// terminating namespace, deletes it.
func TestNamespaceFinalize(t *testing.T) {
	_, h := newTestServer(t, Config{Authorizer: authz.New(authz.Config{})})
	const path = "/api/v1/namespaces/fin"
	get := func() corev1.Namespace {
		t.Helper()
		var ns corev1.Namespace
		if err := json.Unmarshal(mustDo(t, h, admin, http.MethodGet, path, nil, http.StatusOK).body, &ns); err != nil {
			t.Fatal(err)
		}
		return ns
	}
	mustDo(t, h, admin, http.MethodPost, "/api/v1/namespaces", corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fin"}}, http.StatusCreated)
	mustDo(t, h, admin, http.MethodDelete, path, nil, http.StatusOK)
	ns := get()
	if ns.Status.Phase != corev1.NamespaceTerminating || len(ns.Spec.Finalizers) != 1 {
		t.Fatalf("deleted namespace: phase %q finalizers %v, want Terminating held by %q", ns.Status.Phase, ns.Spec.Finalizers, corev1.FinalizerKubernetes)
	}

	t.Run("a user who may not update namespaces is refused", func(t *testing.T) {
		out := ns.DeepCopy()
		out.Spec.Finalizers = nil
		for _, u := range []requester{plainUser, asNode("n1"), {}} {
			if resp := do(t, h, u, http.MethodPut, path+"/finalize", out); resp.code != http.StatusForbidden && resp.code != http.StatusUnauthorized {
				t.Errorf("finalize as %q: got %d %s, want 403 or 401", u.name, resp.code, resp.body)
			}
		}
		if got := get(); len(got.Spec.Finalizers) != 1 {
			t.Errorf("finalizers after refused requests: %v", got.Spec.Finalizers)
		}
	})
	t.Run("only PUT is served", func(t *testing.T) {
		mustDo(t, h, admin, http.MethodPatch, path+"/finalize", `{"spec":{"finalizers":[]}}`, http.StatusMethodNotAllowed)
		mustDo(t, h, admin, http.MethodGet, path+"/finalize", nil, http.StatusMethodNotAllowed)
	})
	t.Run("an invalid finalizer name is refused", func(t *testing.T) {
		out := get()
		out.Spec.Finalizers = []corev1.FinalizerName{"not a name!"}
		if st := mustDo(t, h, admin, http.MethodPut, path+"/finalize", out, http.StatusUnprocessableEntity).status(t); st.Reason != metav1.StatusReasonInvalid {
			t.Errorf("reason %q, want Invalid", st.Reason)
		}
	})
	t.Run("status and labels do not change through finalize", func(t *testing.T) {
		out := get()
		out.Status.Phase = corev1.NamespaceActive
		out.Spec.Finalizers = append(out.Spec.Finalizers, "example.com/hold")
		mustDo(t, h, admin, http.MethodPut, path+"/finalize", out, http.StatusOK)
		got := get()
		if got.Status.Phase != corev1.NamespaceTerminating {
			t.Errorf("phase %q after finalize, want Terminating", got.Status.Phase)
		}
		if len(got.Spec.Finalizers) != 2 {
			t.Errorf("finalizers %v, want the added one kept", got.Spec.Finalizers)
		}
	})
	t.Run("removing the last finalizer deletes the namespace", func(t *testing.T) {
		out := get()
		out.Spec.Finalizers = nil
		mustDo(t, h, admin, http.MethodPut, path+"/finalize", out, http.StatusOK)
		mustDo(t, h, admin, http.MethodGet, path, nil, http.StatusNotFound)
	})
	t.Run("a namespace without finalizers is deleted at once", func(t *testing.T) {
		mustDo(t, h, admin, http.MethodPost, "/api/v1/namespaces", corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bare"}}, http.StatusCreated)
		var ns corev1.Namespace
		if err := json.Unmarshal(mustDo(t, h, admin, http.MethodGet, "/api/v1/namespaces/bare", nil, http.StatusOK).body, &ns); err != nil {
			t.Fatal(err)
		}
		ns.Spec.Finalizers = nil
		mustDo(t, h, admin, http.MethodPut, "/api/v1/namespaces/bare/finalize", ns, http.StatusOK)
		mustDo(t, h, admin, http.MethodGet, "/api/v1/namespaces/bare", nil, http.StatusOK) // not being deleted: stays
		mustDo(t, h, admin, http.MethodDelete, "/api/v1/namespaces/bare", nil, http.StatusOK)
		mustDo(t, h, admin, http.MethodGet, "/api/v1/namespaces/bare", nil, http.StatusNotFound)
	})
}

// TestPartialObjectMetadata: a list or get asking for metadata only (the
// metadata client's Accept, which the namespace controller uses) answers
// with the objects' metadata.
func TestPartialObjectMetadata(t *testing.T) {
	_, h := newTestServer(t, Config{})
	lease := map[string]any{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": map[string]any{"name": "l1", "labels": map[string]string{"a": "b"}}}
	mustDo(t, h, admin, http.MethodPost, "/apis/coordination.k8s.io/v1/namespaces/default/leases", lease, http.StatusCreated)
	for _, tt := range []struct{ name, path, as string }{
		{"a list", "/apis/coordination.k8s.io/v1/namespaces/default/leases", "PartialObjectMetadataList"},
		{"a get", "/apis/coordination.k8s.io/v1/namespaces/default/leases/l1", "PartialObjectMetadata"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, tt.path, nil)
			req.Header.Set("Accept", "application/json;as="+tt.as+";g=meta.k8s.io;v=v1")
			req.Header.Set(headerUser, admin.name)
			req.Header.Set(headerGroups, strings.Join(admin.groups, ","))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				t.Fatalf("got %d %s", rec.Code, rec.Body)
			}
			var out struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name   string            `json:"name"`
					Labels map[string]string `json:"labels"`
				} `json:"metadata"`
				Items []struct {
					Metadata struct {
						Name string `json:"name"`
					} `json:"metadata"`
					Spec any `json:"spec"`
				} `json:"items"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatal(err)
			}
			if out.Kind != tt.as {
				t.Errorf("kind %q, want %q", out.Kind, tt.as)
			}
			if tt.as == "PartialObjectMetadataList" && (len(out.Items) != 1 || out.Items[0].Metadata.Name != "l1" || out.Items[0].Spec != nil) {
				t.Errorf("items %+v, want l1's metadata alone", out.Items)
			}
			if tt.as == "PartialObjectMetadata" && (out.Metadata.Name != "l1" || out.Metadata.Labels["a"] != "b") {
				t.Errorf("metadata %+v, want l1's", out.Metadata)
			}
		})
	}
}
