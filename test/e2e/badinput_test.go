package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// storageSnapshot is the storage revision plus the raw GET answers of some
// objects; a refused request must leave both as they were.
type storageSnapshot struct {
	s        *serverProc
	hc       *http.Client
	revision int64
	objects  map[string][]byte
}

// snapshot records the storage revision and the objects at paths.
func (s *serverProc) snapshot(t *testing.T, hc *http.Client, paths ...string) storageSnapshot {
	t.Helper()
	snap := storageSnapshot{s: s, hc: hc, objects: map[string][]byte{}}
	for _, p := range paths {
		resp := s.do(t, hc, http.MethodGet, p, nil)
		if resp.code != http.StatusOK && resp.code != http.StatusNotFound {
			t.Fatalf("GET %s: %v", p, resp)
		}
		snap.objects[p] = resp.body
	}
	snap.revision = s.storageRevision(t, hc)
	return snap
}

// unchanged fails the test if anything was written since the snapshot.
func (snap storageSnapshot) unchanged(t *testing.T) {
	t.Helper()
	if rev := snap.s.storageRevision(t, snap.hc); rev != snap.revision {
		t.Errorf("storage revision moved from %d to %d: the refused request wrote something", snap.revision, rev)
	}
	for p, before := range snap.objects {
		after := snap.s.do(t, snap.hc, http.MethodGet, p, nil).body
		if !bytes.Equal(before, after) {
			t.Errorf("%s changed:\nbefore %s\nafter  %s", p, truncate(string(before), 1000), truncate(string(after), 1000))
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// getJSON GETs path and decodes the answer into out.
func (s *serverProc) getJSON(t *testing.T, hc *http.Client, path string, out any) {
	t.Helper()
	resp := s.do(t, hc, http.MethodGet, path, nil)
	if resp.code != http.StatusOK {
		t.Fatalf("GET %s: %v", path, resp)
	}
	if err := json.Unmarshal(resp.body, out); err != nil {
		t.Fatal(err)
	}
}

func causeFields(st metav1.Status) []string {
	if st.Details == nil {
		return nil
	}
	var out []string
	for _, c := range st.Details.Causes {
		out = append(out, c.Field)
	}
	return out
}

const jsonCT = "application/json"

// TestBadInput sends one request per error class and checks the HTTP code,
// the metav1.Status reason, and that storage did not change.
func TestBadInput(t *testing.T) {
	s := startServer(t, serverOptions{apiOnly: true})
	hc := s.httpClient()
	cs := s.client()
	ctx := context.Background()

	const nodePath = "/api/v1/nodes/bi-node"
	const podPath = "/api/v1/namespaces/default/pods/bi-pod"
	node := testNode("bi-node", map[string]string{"role": "original"})
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, testPod("", "bi-pod", "", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodeJSON := func(name string, labels map[string]string) []byte {
		n := testNode(name, labels)
		n.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
		return mustJSON(t, n)
	}

	t.Run("400 malformed JSON", func(t *testing.T) {
		snap := s.snapshot(t, hc, nodePath, "/api/v1/nodes/truncated")
		resp := s.do(t, hc, http.MethodPost, "/api/v1/nodes", []byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"truncated"`), "Content-Type", jsonCT)
		wantStatus(t, resp, http.StatusBadRequest, metav1.StatusReasonBadRequest)
		resp = s.do(t, hc, http.MethodPut, nodePath, []byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"bi-node"},"spec":[}`), "Content-Type", jsonCT)
		wantStatus(t, resp, http.StatusBadRequest, metav1.StatusReasonBadRequest)
		snap.unchanged(t)
	})

	t.Run("400 body kind mismatch", func(t *testing.T) {
		snap := s.snapshot(t, hc, "/api/v1/nodes/a-pod")
		body := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a-pod"},"spec":{"containers":[{"name":"c","image":"i"}]}}`
		resp := s.do(t, hc, http.MethodPost, "/api/v1/nodes", []byte(body), "Content-Type", jsonCT)
		wantStatus(t, resp, http.StatusBadRequest, metav1.StatusReasonBadRequest)
		// Right kind, wrong group version.
		body = `{"apiVersion":"coordination.k8s.io/v1","kind":"Node","metadata":{"name":"a-pod"}}`
		resp = s.do(t, hc, http.MethodPost, "/api/v1/nodes", []byte(body), "Content-Type", jsonCT)
		wantStatus(t, resp, http.StatusBadRequest, metav1.StatusReasonBadRequest)
		snap.unchanged(t)
	})

	t.Run("400 fieldValidation=Strict with an unknown field", func(t *testing.T) {
		body := func(name string) []byte {
			return []byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"` + name + `"},"spec":{"bogusField":true}}`)
		}
		snap := s.snapshot(t, hc, "/api/v1/nodes/strict-node")
		resp := s.do(t, hc, http.MethodPost, "/api/v1/nodes?fieldValidation=Strict", body("strict-node"), "Content-Type", jsonCT)
		st := wantStatus(t, resp, http.StatusBadRequest, metav1.StatusReasonBadRequest)
		if !strings.Contains(st.Message, `unknown field "spec.bogusField"`) {
			t.Errorf("Strict message %q does not name the unknown field", st.Message)
		}
		// Patches are checked the same way.
		snap = s.snapshot(t, hc, nodePath)
		resp = s.do(t, hc, http.MethodPatch, nodePath+"?fieldValidation=Strict", []byte(`{"spec":{"bogusField":true}}`), "Content-Type", "application/merge-patch+json")
		wantStatus(t, resp, http.StatusBadRequest, metav1.StatusReasonBadRequest)
		snap.unchanged(t)

		resp = s.do(t, hc, http.MethodPost, "/api/v1/nodes?fieldValidation=Warn", body("warn-node"), "Content-Type", jsonCT)
		if resp.code != http.StatusCreated {
			t.Fatalf("Warn: got %v, want 201", resp)
		}
		if w := strings.Join(resp.header.Values("Warning"), "\n"); !strings.Contains(w, `unknown field \"spec.bogusField\"`) && !strings.Contains(w, `unknown field "spec.bogusField"`) {
			t.Errorf("Warn: Warning header %q does not name the unknown field", w)
		}
		resp = s.do(t, hc, http.MethodPost, "/api/v1/nodes?fieldValidation=Ignore", body("ignore-node"), "Content-Type", jsonCT)
		if resp.code != http.StatusCreated {
			t.Fatalf("Ignore: got %v, want 201", resp)
		}
		if w := resp.header.Values("Warning"); len(w) > 0 {
			t.Errorf("Ignore: unexpected Warning %q", w)
		}
	})

	t.Run("401 no credentials", func(t *testing.T) {
		anon := rest.AnonymousClientConfig(s.restConfig())
		if anon.Insecure || len(anon.CAData) == 0 && anon.CAFile == "" {
			t.Fatal("anonymous client config does not verify the server")
		}
		ahc, err := rest.HTTPClientFor(anon)
		if err != nil {
			t.Fatal(err)
		}
		snap := s.snapshot(t, hc, "/api/v1/nodes/anon-node")
		wantStatus(t, s.do(t, ahc, http.MethodGet, "/api/v1/nodes", nil), http.StatusUnauthorized, metav1.StatusReasonUnauthorized)
		wantStatus(t, s.do(t, ahc, http.MethodPost, "/api/v1/nodes", nodeJSON("anon-node", nil), "Content-Type", jsonCT), http.StatusUnauthorized, metav1.StatusReasonUnauthorized)
		wantStatus(t, s.do(t, ahc, http.MethodGet, "/api/v1/nodes", nil, "Authorization", "Bearer not-a-token"), http.StatusUnauthorized, metav1.StatusReasonUnauthorized)
		snap.unchanged(t)
	})

	t.Run("404 missing object and unknown resource", func(t *testing.T) {
		snap := s.snapshot(t, hc, "/api/v1/nodes/missing")
		st := wantStatus(t, s.do(t, hc, http.MethodGet, "/api/v1/nodes/missing", nil), http.StatusNotFound, metav1.StatusReasonNotFound)
		if st.Details == nil || st.Details.Name != "missing" || st.Details.Kind != "nodes" {
			t.Errorf("NotFound details %+v, want name missing kind nodes", st.Details)
		}
		if st.Message != `nodes "missing" not found` {
			t.Errorf("NotFound message %q", st.Message)
		}
		wantStatus(t, s.do(t, hc, http.MethodGet, "/api/v1/namespaces/default/pods/missing", nil), http.StatusNotFound, metav1.StatusReasonNotFound)
		wantStatus(t, s.do(t, hc, http.MethodDelete, "/api/v1/nodes/missing", nil), http.StatusNotFound, metav1.StatusReasonNotFound)
		wantStatus(t, s.do(t, hc, http.MethodPut, "/api/v1/nodes/missing", nodeJSON("missing", nil), "Content-Type", jsonCT), http.StatusNotFound, metav1.StatusReasonNotFound)
		wantStatus(t, s.do(t, hc, http.MethodPatch, "/api/v1/nodes/missing", []byte(`{}`), "Content-Type", "application/merge-patch+json"), http.StatusNotFound, metav1.StatusReasonNotFound)
		for _, p := range []string{"/api/v1/widgets", "/api/v1/namespaces/default/widgets/w", "/apis/nope.example.com/v1/things", "/apis/coordination.k8s.io/v1/namespaces/default/leases/x/bogus"} {
			wantStatus(t, s.do(t, hc, http.MethodGet, p, nil), http.StatusNotFound, metav1.StatusReasonNotFound)
		}
		wantStatus(t, s.do(t, hc, http.MethodPost, "/api/v1/widgets", []byte(`{}`), "Content-Type", jsonCT), http.StatusNotFound, metav1.StatusReasonNotFound)
		snap.unchanged(t)
	})

	t.Run("405 method not allowed", func(t *testing.T) {
		snap := s.snapshot(t, hc, nodePath)
		wantStatus(t, s.do(t, hc, http.MethodPost, nodePath, nodeJSON("bi-node", map[string]string{"role": "posted"}), "Content-Type", jsonCT), http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed)
		wantStatus(t, s.do(t, hc, http.MethodPut, "/api/v1/nodes", nodeJSON("bi-node", map[string]string{"role": "put"}), "Content-Type", jsonCT), http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed)
		wantStatus(t, s.do(t, hc, http.MethodPatch, "/api/v1/nodes", []byte(`{"metadata":{"labels":{"role":"patched"}}}`), "Content-Type", "application/merge-patch+json"), http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed)
		snap.unchanged(t)
	})

	t.Run("409 AlreadyExists", func(t *testing.T) {
		snap := s.snapshot(t, hc, nodePath)
		st := wantStatus(t, s.do(t, hc, http.MethodPost, "/api/v1/nodes", nodeJSON("bi-node", map[string]string{"role": "duplicate"}), "Content-Type", jsonCT), http.StatusConflict, metav1.StatusReasonAlreadyExists)
		if st.Details == nil || st.Details.Name != "bi-node" {
			t.Errorf("AlreadyExists details %+v", st.Details)
		}
		snap.unchanged(t)
	})

	t.Run("409 Conflict on a stale resourceVersion", func(t *testing.T) {
		var stale corev1.Node
		s.getJSON(t, hc, nodePath, &stale)
		if _, err := cs.CoreV1().Nodes().Patch(ctx, "bi-node", "application/merge-patch+json", []byte(`{"metadata":{"annotations":{"bump":"1"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		snap := s.snapshot(t, hc, nodePath)
		stale.Labels = map[string]string{"role": "stale-writer"}
		wantStatus(t, s.do(t, hc, http.MethodPut, nodePath, mustJSON(t, stale), "Content-Type", jsonCT), http.StatusConflict, metav1.StatusReasonConflict)
		// Patches may carry the precondition too.
		patch := `{"metadata":{"resourceVersion":"` + stale.ResourceVersion + `","labels":{"role":"stale-patch"}}}`
		wantStatus(t, s.do(t, hc, http.MethodPatch, nodePath, []byte(patch), "Content-Type", "application/merge-patch+json"), http.StatusConflict, metav1.StatusReasonConflict)
		snap.unchanged(t)
	})

	t.Run("413 body over 3 MiB", func(t *testing.T) {
		big := testNode("big-node", nil)
		big.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
		big.Annotations = map[string]string{"example.com/blob": strings.Repeat("x", 3584<<10)}
		snap := s.snapshot(t, hc, "/api/v1/nodes/big-node")
		wantStatus(t, s.do(t, hc, http.MethodPost, "/api/v1/nodes", mustJSON(t, big), "Content-Type", jsonCT), http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge)
		// The same through client-go (protobuf body).
		big.TypeMeta = metav1.TypeMeta{}
		if _, err := cs.CoreV1().Nodes().Create(ctx, big, metav1.CreateOptions{}); !apierrors.IsRequestEntityTooLargeError(err) {
			t.Errorf("typed create of a 3.5 MiB node: got %v, want RequestEntityTooLarge", err)
		}
		snap.unchanged(t)
	})

	t.Run("415 unsupported media type", func(t *testing.T) {
		snap := s.snapshot(t, hc, nodePath, "/api/v1/nodes/text-node")
		wantStatus(t, s.do(t, hc, http.MethodPost, "/api/v1/nodes", nodeJSON("text-node", nil), "Content-Type", "text/plain"), http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType)
		wantStatus(t, s.do(t, hc, http.MethodPatch, nodePath, []byte(`{"metadata":{"labels":{"role":"xml"}}}`), "Content-Type", "application/xml"), http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType)
		apply := "apiVersion: v1\nkind: Node\nmetadata:\n  name: bi-node\n  labels:\n    role: applied\n"
		st := wantStatus(t, s.do(t, hc, http.MethodPatch, nodePath+"?fieldManager=test", []byte(apply), "Content-Type", "application/apply-patch+yaml"), http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType)
		if !strings.Contains(st.Message, "server-side apply") {
			t.Errorf("apply-patch 415 message %q does not say server-side apply is unsupported", st.Message)
		}
		snap.unchanged(t)
	})

	t.Run("422 Invalid lists every field error", func(t *testing.T) {
		body := `{"apiVersion":"v1","kind":"Node","metadata":{"name":"Bad_Name","labels":{"bad key!":"v"}},` +
			`"spec":{"taints":[{"key":"example.com/t","effect":"Bogus"}]}}`
		snap := s.snapshot(t, hc, "/api/v1/nodes/Bad_Name")
		st := wantStatus(t, s.do(t, hc, http.MethodPost, "/api/v1/nodes", []byte(body), "Content-Type", jsonCT), http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
		if st.Details == nil || st.Details.Kind != "Node" || st.Details.Name != "Bad_Name" {
			t.Errorf("Invalid details %+v, want kind Node name Bad_Name", st.Details)
		}
		got := causeFields(st)
		// kube reports taint errors under metadata.taints (ValidateNode
		// builds the path from "metadata"); clients see exactly that.
		for _, want := range []string{"metadata.name", "metadata.labels", "metadata.taints[0].effect"} {
			if !slices.Contains(got, want) {
				t.Errorf("no cause for %s in %v (message %q)", want, got, st.Message)
			}
		}
		snap.unchanged(t)
	})

	t.Run("422 pod update of an immutable field", func(t *testing.T) {
		var pod corev1.Pod
		s.getJSON(t, hc, podPath, &pod)
		snap := s.snapshot(t, hc, podPath)
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		pod.Spec.Containers[0].Name = "renamed"
		st := wantStatus(t, s.do(t, hc, http.MethodPut, podPath, mustJSON(t, pod), "Content-Type", jsonCT), http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
		if fields := causeFields(st); !slices.Contains(fields, "spec") {
			t.Errorf("causes %v, want one for spec", fields)
		}
		snap.unchanged(t)
	})

	t.Run("422 spec.podCIDRs is immutable once set", func(t *testing.T) {
		n, err := cs.CoreV1().Nodes().Get(ctx, "bi-node", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Spec.PodCIDR = "10.244.1.0/24"
		n.Spec.PodCIDRs = []string{"10.244.1.0/24"}
		if _, err := cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("setting podCIDRs the first time: %v", err)
		}
		var cur corev1.Node
		s.getJSON(t, hc, nodePath, &cur)
		snap := s.snapshot(t, hc, nodePath)
		cur.Spec.PodCIDR = "10.244.2.0/24"
		cur.Spec.PodCIDRs = []string{"10.244.2.0/24"}
		st := wantStatus(t, s.do(t, hc, http.MethodPut, nodePath, mustJSON(t, cur), "Content-Type", jsonCT), http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
		if fields := causeFields(st); !slices.Contains(fields, "spec.podCIDRs") {
			t.Errorf("causes %v, want one for spec.podCIDRs", fields)
		}
		patch := `{"spec":{"podCIDR":"10.244.3.0/24","podCIDRs":["10.244.3.0/24"]}}`
		wantStatus(t, s.do(t, hc, http.MethodPatch, nodePath, []byte(patch), "Content-Type", "application/merge-patch+json"), http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
		snap.unchanged(t)
		if _, err := cs.CoreV1().Nodes().Patch(ctx, "bi-node", "application/merge-patch+json", []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
			t.Errorf("other spec changes stay allowed: %v", err)
		}
	})

}
