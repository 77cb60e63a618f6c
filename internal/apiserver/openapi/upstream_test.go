package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// upstreamSpecDir returns api/openapi-spec of the Kubernetes release whose
// k8s.io/api we build on (k8s.io/api v0.X.Y ↔ k8s.io/kubernetes v1.X.Y),
// fetched through the Go module proxy into the module cache. These are the
// documents kube-apiserver of that release publishes.
func upstreamSpecDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "k8s.io/api").Output()
	if err != nil {
		t.Fatalf("go list -m k8s.io/api: %v", err)
	}
	apiVersion := strings.TrimSpace(string(out))
	if !strings.HasPrefix(apiVersion, "v0.") {
		t.Fatalf("k8s.io/api version %q is not v0.X.Y", apiVersion)
	}
	release := "v1." + strings.TrimPrefix(apiVersion, "v0.")
	cmd := exec.Command("go", "mod", "download", "-json", "k8s.io/kubernetes@"+release)
	cmd.Dir = t.TempDir() // outside this module: nothing is added to go.mod
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("go mod download k8s.io/kubernetes@%s: %v\n%s", release, err, out)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download k8s.io/kubernetes@%s: %v %s", release, err, mod.Error)
	}
	return filepath.Join(mod.Dir, "api", "openapi-spec")
}

// upstreamDocuments serves kube-apiserver's published documents for the
// group-versions the fake API server discovers: the v2 document (JSON, and
// protobuf for clients that ask for it) and the v3 index and documents.
func upstreamDocuments(t *testing.T, dir string) http.Handler {
	t.Helper()
	v2JSON, err := os.ReadFile(filepath.Join(dir, "swagger.json"))
	if err != nil {
		t.Fatal(err)
	}
	v2Proto, err := swaggerProtobuf(v2JSON)
	if err != nil {
		t.Fatal(err)
	}
	v3 := map[string][]byte{}
	index := map[string]map[string]string{}
	for key, file := range map[string]string{
		"api/v1":                      "api__v1_openapi.json",
		"apis/coordination.k8s.io/v1": "apis__coordination.k8s.io__v1_openapi.json",
	} {
		b, err := os.ReadFile(filepath.Join(dir, "v3", file))
		if err != nil {
			t.Fatal(err)
		}
		v3[key] = b
		index[key] = map[string]string{"serverRelativeURL": "/openapi/v3/" + key + "?hash=upstream"}
	}
	indexJSON, err := json.Marshal(map[string]any{"paths": index})
	if err != nil {
		t.Fatal(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, contentType := []byte(nil), "application/json"
		switch p := r.URL.Path; {
		case p == "/openapi/v2" && strings.Contains(r.Header.Get("Accept"), "protobuf"):
			body, contentType = v2Proto, mediaV2Proto
		case p == "/openapi/v2":
			body = v2JSON
		case p == "/openapi/v3":
			body = indexJSON
		default:
			body = v3[strings.TrimPrefix(p, "/openapi/v3/")]
		}
		if body == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", contentType)
		w.Write(body)
	})
}

// TestKubectlExplainMatchesUpstream runs the real kubectl against our
// documents and against the ones kube-apiserver of the same release
// publishes, and requires the same output: field names, types and
// "-required-" marks of every field (recursive explain, from the v3 and the
// v2 document), and the descriptions of a few fields.
func TestKubectlExplainMatchesUpstream(t *testing.T) {
	if testing.Short() {
		t.Skip("fetches k8s.io/kubernetes (api/openapi-spec) through the module proxy; runs in the full tier")
	}
	kubectl := kubectlBinary(t, "1.33")
	docs, err := New(servedResources(), Info{Version: "v1.33.0"})
	if err != nil {
		t.Fatal(err)
	}
	ours := httptest.NewServer(&fakeAPIServer{docs: docs})
	defer ours.Close()
	upstream := httptest.NewServer(&fakeAPIServer{docs: docs, openapi: upstreamDocuments(t, upstreamSpecDir(t))})
	defer upstream.Close()

	for _, args := range [][]string{
		{"explain", "nodes", "--recursive"},
		{"explain", "pods", "--recursive"},
		{"explain", "leases", "--recursive"},
		{"explain", "nodes", "--recursive", "--output=plaintext-openapiv2"},
		{"explain", "pods", "--recursive", "--output=plaintext-openapiv2"},
		{"explain", "nodes.spec.taints"},
		{"explain", "pods.spec.containers.ports"},
		{"explain", "pods.spec.tolerations"},
		{"explain", "leases.spec"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			want, err := runKubectl(t, kubectl, upstream.URL, nil, args...)
			if err != nil {
				t.Fatalf("against upstream's documents: %v\n%s", err, want)
			}
			got, err := runKubectl(t, kubectl, ours.URL, nil, args...)
			if err != nil {
				t.Fatalf("against ours: %v\n%s", err, got)
			}
			if d := firstDifference(want, got); d != "" {
				t.Errorf("kubectl %s differs from upstream's documents:\n%s", strings.Join(args, " "), d)
			}
		})
	}
}

// firstDifference describes the first lines where a and b differ (with
// their line number), or returns "" when they are equal.
func firstDifference(want, got string) string {
	if want == got {
		return ""
	}
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b bytes.Buffer
	shown := 0
	for i := 0; i < max(len(wl), len(gl)) && shown < 8; i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			fmt.Fprintf(&b, "line %d:\n  upstream: %q\n  ours:     %q\n", i+1, w, g)
			shown++
		}
	}
	return b.String()
}
