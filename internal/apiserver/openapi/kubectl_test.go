package openapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubectlDir holds the versioned kubectl binaries (kubectl.1.27 … kubectl.1.33).
const kubectlDir = "/usr/lib/google-cloud-sdk/bin"

// kubectlBinary returns the kubectl of the given minor version ("1.33"),
// looked up in kubectlDir and then in PATH, or skips the test.
func kubectlBinary(t *testing.T, version string) string {
	t.Helper()
	name := "kubectl." + version
	if path := filepath.Join(kubectlDir, name); isExecutable(path) {
		return path
	}
	if path, err := exec.LookPath(name); err == nil {
		return path
	}
	t.Skipf("%s not found in %s or PATH: the real-kubectl check needs it", name, kubectlDir)
	return ""
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// fakeAPIServer serves the OpenAPI documents plus just enough of the API
// (legacy discovery, /version, POST of nodes, pods and leases) for kubectl
// explain and create. It records every request.
type fakeAPIServer struct {
	docs    *Documents
	openapi http.Handler // serves /openapi/ instead of docs when set

	mu       sync.Mutex
	requests []string          // "METHOD /path?query accept=..."
	patches  []string          // PATCH bodies
	objects  map[string][]byte // created objects by item path
}

func (f *fakeAPIServer) logged() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.requests, "\n")
}

func (f *fakeAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, fmt.Sprintf("%s %s accept=%s", r.Method, r.URL.RequestURI(), r.Header.Get("Accept")))
	stored, found := f.objects[r.URL.Path]
	f.mu.Unlock()

	path := r.URL.Path
	switch {
	case path == "/version":
		writeJSON(w, http.StatusOK, map[string]string{"major": "1", "minor": "33", "gitVersion": "v1.33.0"})
	case path == "/api":
		writeJSON(w, http.StatusOK, metav1.APIVersions{
			TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
			Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{
				{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host},
			},
		})
	case path == "/apis":
		gv := metav1.GroupVersionForDiscovery{GroupVersion: "coordination.k8s.io/v1", Version: "v1"}
		writeJSON(w, http.StatusOK, metav1.APIGroupList{
			TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
			Groups:   []metav1.APIGroup{{Name: "coordination.k8s.io", Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv}},
		})
	case path == "/api/v1":
		verbs := metav1.Verbs{"create", "delete", "get", "list", "patch", "update", "watch"}
		writeJSON(w, http.StatusOK, metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: "v1",
			APIResources: []metav1.APIResource{
				{Name: "nodes", SingularName: "node", Kind: "Node", Verbs: verbs, ShortNames: []string{"no"}},
				{Name: "nodes/status", Kind: "Node", Verbs: metav1.Verbs{"get", "patch", "update"}},
				{Name: "pods", SingularName: "pod", Namespaced: true, Kind: "Pod", Verbs: verbs, ShortNames: []string{"po"}},
				{Name: "pods/status", Namespaced: true, Kind: "Pod", Verbs: metav1.Verbs{"get", "patch", "update"}},
				{Name: "pods/eviction", Namespaced: true, Group: "policy", Version: "v1", Kind: "Eviction", Verbs: metav1.Verbs{"create"}},
			},
		})
	case path == "/apis/coordination.k8s.io/v1":
		writeJSON(w, http.StatusOK, metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: "coordination.k8s.io/v1",
			APIResources: []metav1.APIResource{{Name: "leases", SingularName: "lease", Namespaced: true, Kind: "Lease",
				Verbs: metav1.Verbs{"create", "delete", "get", "list", "patch", "update", "watch"}}},
		})
	case strings.HasPrefix(path, "/openapi/") && f.openapi != nil:
		f.openapi.ServeHTTP(w, r)
	case strings.HasPrefix(path, "/openapi/") || path == "/swagger-2.0.0.pb-v1":
		f.docs.Handler().ServeHTTP(w, r)
	case r.Method == http.MethodPost && path == "/api/v1/nodes":
		f.create(w, r, &corev1.Node{})
	case r.Method == http.MethodPost && path == "/api/v1/namespaces/default/pods":
		f.create(w, r, &corev1.Pod{})
	case r.Method == http.MethodPost && path == "/apis/coordination.k8s.io/v1/namespaces/default/leases":
		f.create(w, r, &coordinationv1.Lease{})
	case r.Method == http.MethodGet && found:
		w.Header().Set("Content-Type", "application/json")
		w.Write(stored)
	case r.Method == http.MethodPatch && found:
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.patches = append(f.patches, string(body))
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write(stored)
	default:
		writeJSON(w, http.StatusNotFound, metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound,
			Message: "the server could not find the requested resource",
		})
	}
}

// create stores the body and echoes it back. Like a real server it rejects
// unknown fields when fieldValidation=Strict.
func (f *fakeAPIServer) create(w http.ResponseWriter, r *http.Request, into any) {
	body, _ := io.ReadAll(r.Body)
	if r.URL.Query().Get("fieldValidation") == "Strict" {
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(into); err != nil {
			writeJSON(w, http.StatusBadRequest, metav1.Status{
				TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status:   metav1.StatusFailure, Reason: metav1.StatusReasonBadRequest, Code: http.StatusBadRequest,
				Message: "strict decoding error: " + strings.TrimPrefix(err.Error(), "json: "),
			})
			return
		}
	}
	var meta struct {
		Metadata struct{ Name string } `json:"metadata"`
	}
	if err := json.Unmarshal(body, &meta); err != nil || meta.Metadata.Name == "" {
		http.Error(w, "no metadata.name", http.StatusBadRequest)
		return
	}
	if r.URL.Query().Get("dryRun") == "" {
		f.mu.Lock()
		if f.objects == nil {
			f.objects = map[string][]byte{}
		}
		f.objects[r.URL.Path+"/"+meta.Metadata.Name] = body
		f.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	w.Write(body)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// runKubectl runs kubectl against server with a fresh cache and home and
// returns its combined output.
func runKubectl(t *testing.T, kubectl, server string, files map[string]string, args ...string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: %s
users:
- name: fake
  user: {}
contexts:
- name: fake
  context:
    cluster: fake
    user: fake
    namespace: default
current-context: fake
`, server)
	if err := os.WriteFile(kubeconfig, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(dir, "cache")}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

const nodeYAML = `apiVersion: v1
kind: Node
metadata:
  name: n3
  labels:
    kubernetes.io/hostname: n3
spec:
  podCIDR: 10.244.3.0/24
  taints:
  - key: example.com/dedicated
    value: infra
    effect: NoSchedule
`

const bogusNodeYAML = `apiVersion: v1
kind: Node
metadata:
  name: n4
spec:
  bogus: 1
`

// podYAML exercises the special types: numeric and string quantities,
// integer and named int-or-string ports, a null timestamp.
const podYAML = `apiVersion: v1
kind: Pod
metadata:
  name: p
  creationTimestamp: null
spec:
  containers:
  - name: c
    image: nginx:1.27
    ports:
    - name: http
      containerPort: 80
    resources:
      limits:
        cpu: 1
        memory: 128Mi
      requests:
        cpu: "500m"
        memory: 64Mi
    livenessProbe:
      httpGet:
        path: /healthz
        port: 80
    readinessProbe:
      httpGet:
        path: /ready
        port: http
`

const leaseYAML = `apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: n3
spec:
  holderIdentity: n3
  leaseDurationSeconds: 40
  renewTime: "2024-01-02T15:04:05.000000Z"
`

// kubectlCase is one kubectl invocation against a fakeAPIServer.
type kubectlCase struct {
	name       string
	version    string // kubectl minor version, e.g. "1.33"
	docs       *Documents
	files      map[string]string // written to kubectl's working directory
	args       []string
	wantFail   bool
	wantOutput []string // substrings of kubectl's output
	wantLog    []string // substrings of the server's request log
	notLog     []string
}

func TestKubectlUsesTheDocuments(t *testing.T) {
	docs, err := New(servedResources(), Info{Version: "v1.33.0"})
	if err != nil {
		t.Fatal(err)
	}
	// clientSide serves documents whose operations lack the fieldValidation
	// parameter. kubectl then concludes the server cannot validate fields and
	// validates against the schemas itself (--validate=strict); with the real
	// documents it leaves unknown fields to the server.
	clientSide := withoutFieldValidation(t, docs)

	tests := []kubectlCase{
		{
			name: "kubectl 1.33 explains node.spec from the v3 document", version: "1.33", docs: docs,
			args:       []string{"explain", "node.spec"},
			wantOutput: []string{"KIND:       Node", "NodeSpec describes the attributes", "podCIDR\t<string>", "taints\t<[]Taint>"},
			wantLog:    []string{"GET /openapi/v3/api/v1?hash="},
		},
		{
			name: "kubectl 1.33 explains pods.spec.containers with types and descriptions", version: "1.33", docs: docs,
			args:       []string{"explain", "pods.spec.containers"},
			wantOutput: []string{"FIELD: containers <[]Container>", "A single application container", "image\t<string>", "resources\t<ResourceRequirements>"},
		},
		{
			name: "kubectl 1.33 explains an int-or-string field", version: "1.33", docs: docs,
			args:       []string{"explain", "pods.spec.containers.livenessProbe.httpGet.port"},
			wantOutput: []string{"FIELD: port <IntOrString>", "IntOrString is a type that can hold an int32 or a string"},
		},
		{
			name: "kubectl 1.33 explains node.spec recursively from the v2 document", version: "1.33", docs: docs,
			args:       []string{"explain", "node.spec", "--recursive", "--output=plaintext-openapiv2"},
			wantOutput: []string{"RESOURCE: spec <Object>", "podCIDR\t<string>", "effect\t<string>"},
			wantLog:    []string{"GET /openapi/v2"},
		},
		{
			name: "kubectl 1.27 explains node.spec", version: "1.27", docs: docs,
			args:       []string{"explain", "node.spec"},
			wantOutput: []string{"NodeSpec describes the attributes", "podCIDR"},
		},
		{
			name: "kubectl 1.27 explains pods.spec.containers", version: "1.27", docs: docs,
			args:       []string{"explain", "pods.spec.containers"},
			wantOutput: []string{"A single application container", "image"},
		},
		{
			name: "kubectl 1.33 creates a node after checking the v3 document for fieldValidation", version: "1.33", docs: docs,
			files: map[string]string{"node.yaml": nodeYAML}, args: []string{"create", "-f", "node.yaml"},
			wantOutput: []string{"node/n3 created"},
			wantLog:    []string{"GET /openapi/v3?", "GET /openapi/v3/api/v1?hash=", "POST /api/v1/nodes?fieldManager=kubectl-create&fieldValidation=Strict"},
		},
		{
			name: "kubectl 1.27 creates a node after reading the v2 protobuf document", version: "1.27", docs: docs,
			files: map[string]string{"node.yaml": nodeYAML}, args: []string{"create", "-f", "node.yaml"},
			wantOutput: []string{"node/n3 created"},
			wantLog: []string{"GET /openapi/v2?timeout=32s accept=application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
				"POST /api/v1/nodes?fieldManager=kubectl-create&fieldValidation=Strict"},
		},
		{
			name: "kubectl 1.33 creates a lease using the coordination.k8s.io document", version: "1.33", docs: docs,
			files: map[string]string{"lease.yaml": leaseYAML}, args: []string{"create", "-f", "lease.yaml"},
			wantOutput: []string{"lease.coordination.k8s.io/n3 created"},
			wantLog:    []string{"GET /openapi/v3/apis/coordination.k8s.io/v1?hash=", "fieldValidation=Strict"},
		},
		{
			name: "kubectl 1.33 server dry-run of a pod with quantities and int-or-string ports", version: "1.33", docs: docs,
			files: map[string]string{"pod.yaml": podYAML}, args: []string{"create", "-f", "pod.yaml", "--dry-run=server"},
			wantOutput: []string{"pod/p created (server dry run)"},
			wantLog:    []string{"dryRun=All"},
		},
		{
			name: "kubectl 1.33 sends an unknown field to the server, which supports strict field validation", version: "1.33", docs: docs,
			files: map[string]string{"node.yaml": bogusNodeYAML}, args: []string{"create", "-f", "node.yaml", "--validate=strict"},
			wantFail: true, wantOutput: []string{`unknown field "bogus"`},
			wantLog: []string{"POST /api/v1/nodes?fieldManager=kubectl-create&fieldValidation=Strict"},
		},
		{
			name: "kubectl 1.33 client-side validation rejects an unknown field", version: "1.33", docs: clientSide,
			files: map[string]string{"node.yaml": bogusNodeYAML}, args: []string{"create", "-f", "node.yaml", "--validate=strict"},
			wantFail: true, wantOutput: []string{`ValidationError(Node.spec): unknown field "bogus" in io.k8s.api.core.v1.NodeSpec`},
			wantLog: []string{"GET /openapi/v2"}, notLog: []string{"POST "},
		},
		{
			name: "kubectl 1.27 client-side validation rejects an unknown field", version: "1.27", docs: clientSide,
			files: map[string]string{"node.yaml": bogusNodeYAML}, args: []string{"create", "-f", "node.yaml", "--validate=strict"},
			wantFail: true, wantOutput: []string{`ValidationError(Node.spec): unknown field "bogus" in io.k8s.api.core.v1.NodeSpec`},
			notLog: []string{"POST "},
		},
		{
			name: "kubectl 1.33 client-side validation accepts quantities, int-or-string ports and a null timestamp", version: "1.33", docs: clientSide,
			files: map[string]string{"pod.yaml": podYAML}, args: []string{"create", "-f", "pod.yaml", "--validate=strict"},
			wantOutput: []string{"pod/p created"},
			wantLog:    []string{"GET /openapi/v2", "POST /api/v1/namespaces/default/pods"},
		},
		{
			name: "kubectl 1.27 client-side validation accepts quantities, int-or-string ports and a null timestamp", version: "1.27", docs: clientSide,
			files: map[string]string{"pod.yaml": podYAML}, args: []string{"create", "-f", "pod.yaml", "--validate=strict"},
			wantOutput: []string{"pod/p created"},
			wantLog:    []string{"POST /api/v1/namespaces/default/pods"},
		},
		{
			name: "kubectl 1.27 client-side validation accepts a lease with a micro-time", version: "1.27", docs: clientSide,
			files: map[string]string{"lease.yaml": leaseYAML}, args: []string{"create", "-f", "lease.yaml", "--validate=strict"},
			wantOutput: []string{"lease.coordination.k8s.io/n3 created"},
		},
	}
	// Every version in between explains and creates too; 1.28 reads v2, 1.29+ v3.
	for _, version := range []string{"1.28", "1.29", "1.30", "1.31", "1.32"} {
		tests = append(tests, kubectlCase{
			name: "kubectl " + version + " creates a node", version: version, docs: docs,
			files: map[string]string{"node.yaml": nodeYAML}, args: []string{"create", "-f", "node.yaml"},
			wantOutput: []string{"node/n3 created"},
			wantLog:    []string{"POST /api/v1/nodes?fieldManager=kubectl-create&fieldValidation=Strict"},
		})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kubectl := kubectlBinary(t, tt.version)
			fake := &fakeAPIServer{docs: tt.docs}
			srv := httptest.NewServer(fake)
			defer srv.Close()

			out, err := runKubectl(t, kubectl, srv.URL, tt.files, tt.args...)
			if tt.wantFail && err == nil {
				t.Errorf("kubectl %s succeeded, want failure; output:\n%s", strings.Join(tt.args, " "), out)
			}
			if !tt.wantFail && err != nil {
				t.Errorf("kubectl %s: %v; output:\n%s", strings.Join(tt.args, " "), err, out)
			}
			for _, want := range tt.wantOutput {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q; got:\n%s", want, out)
				}
			}
			log := fake.logged()
			for _, want := range tt.wantLog {
				if !strings.Contains(log, want) {
					t.Errorf("request log lacks %q; got:\n%s", want, log)
				}
			}
			for _, not := range tt.notLog {
				if strings.Contains(log, not) {
					t.Errorf("request log has %q; got:\n%s", not, log)
				}
			}
		})
	}
}

// withoutFieldValidation returns a copy of d whose operations no longer
// declare the fieldValidation query parameter.
func withoutFieldValidation(t *testing.T, d *Documents) *Documents {
	t.Helper()
	strip := func(doc []byte) []byte {
		var v any
		if err := json.Unmarshal(doc, &v); err != nil {
			t.Fatal(err)
		}
		out, err := json.Marshal(dropParameter(v, "fieldValidation"))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	out := &Documents{v3: map[string]*groupVersionDoc{}}
	out.v2JSON = newRepresentation(strip(d.v2JSON.body), mediaJSON)
	pb, err := swaggerProtobuf(out.v2JSON.body)
	if err != nil {
		t.Fatal(err)
	}
	out.v2Proto = newRepresentation(pb, mediaV2Proto)
	root := v3Discovery{Paths: map[string]v3DiscoveryEntry{}}
	for key, g := range d.v3 {
		ng := &groupVersionDoc{json: newRepresentation(strip(g.json.body), mediaJSON)}
		out.v3[key] = ng
		root.Paths[key] = v3DiscoveryEntry{ServerRelativeURL: serverRelativeURL(key, ng.json.etag)}
	}
	b, err := json.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	out.v3Root = newRepresentation(b, mediaJSON)
	return out
}

// dropParameter removes every parameter object called name from v.
func dropParameter(v any, name string) any {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if params, ok := child.([]any); ok && k == "parameters" {
				kept := params[:0]
				for _, p := range params {
					if m, ok := p.(map[string]any); ok && m["name"] == name {
						continue
					}
					kept = append(kept, p)
				}
				v[k] = kept
				continue
			}
			v[k] = dropParameter(child, name)
		}
	case []any:
		for i := range v {
			v[i] = dropParameter(v[i], name)
		}
	}
	return v
}

// TestKubectlApplyPatchesWithTheV3Schema applies a pod twice: the second
// apply computes its strategic merge patch from the OpenAPI v3 schema (merge
// key "name" on spec.containers) instead of falling back to compiled-in types.
func TestKubectlApplyPatchesWithTheV3Schema(t *testing.T) {
	kubectl := kubectlBinary(t, "1.33")
	docs, err := New(servedResources(), Info{Version: "v1.33.0"})
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeAPIServer{docs: docs}
	srv := httptest.NewServer(fake)
	defer srv.Close()

	updated := strings.Replace(podYAML, "nginx:1.27", "nginx:1.28", 1)
	files := map[string]string{"pod.yaml": podYAML, "pod2.yaml": updated}
	if out, err := runKubectl(t, kubectl, srv.URL, files, "apply", "-f", "pod.yaml"); err != nil || !strings.Contains(out, "pod/p created") {
		t.Fatalf("first apply: %v; output:\n%s", err, out)
	}
	out, err := runKubectl(t, kubectl, srv.URL, files, "apply", "-f", "pod2.yaml", "-v=5")
	if err != nil || !strings.Contains(out, "pod/p configured") {
		t.Fatalf("second apply: %v; output:\n%s", err, out)
	}
	if strings.Contains(out, "OpenAPI V3") || strings.Contains(out, "error calculating patch") {
		t.Errorf("apply did not use the OpenAPI v3 schema for the patch; output:\n%s", out)
	}
	fake.mu.Lock()
	patches := strings.Join(fake.patches, "\n")
	fake.mu.Unlock()
	if !strings.Contains(patches, `"$setElementOrder/containers":[{"name":"c"}]`) {
		t.Errorf("patch lacks the container merge key; got:\n%s", patches)
	}
}
