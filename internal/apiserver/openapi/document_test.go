package openapi

import (
	"bytes"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	openapi_v3 "github.com/google/gnostic-models/openapiv3"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/kube-openapi/pkg/spec3"
	kubeproto "k8s.io/kube-openapi/pkg/util/proto"
	"k8s.io/kube-openapi/pkg/util/proto/validation"
	"sigs.k8s.io/yaml"
)

func TestV3RootListsEveryGroupVersionWithItsHash(t *testing.T) {
	d := buildDocs(t)
	var root v3Discovery
	if err := json.Unmarshal(d.v3Root.body, &root); err != nil {
		t.Fatal(err)
	}
	want := []string{"api/v1", "apis/coordination.k8s.io/v1", "apis/events.k8s.io/v1", "apis/storage.k8s.io/v1"}
	if got := keys(root.Paths); !slices.Equal(got, want) {
		t.Fatalf("root paths = %v, want %v", got, want)
	}
	for key, entry := range root.Paths {
		sum := sha512.Sum512(d.v3[key].json.body)
		wantURL := "/openapi/v3/" + key + "?hash=" + strings.ToUpper(hex.EncodeToString(sum[:]))
		if entry.ServerRelativeURL != wantURL {
			t.Errorf("%s: serverRelativeURL = %q, want %q", key, entry.ServerRelativeURL, wantURL)
		}
	}
}

func TestHashFollowsTheDocument(t *testing.T) {
	base := buildDocs(t)
	withoutLog := servedResources()
	for i, res := range withoutLog {
		if res.Resource == "pods" {
			withoutLog[i].Subresources = slices.DeleteFunc(slices.Clone(res.Subresources),
				func(s Subresource) bool { return s.Name == "log" })
		}
	}
	changed, err := New(withoutLog, Info{Version: "v1.33.0"})
	if err != nil {
		t.Fatal(err)
	}
	again := buildDocs(t)
	tests := []struct {
		name     string
		other    *Documents
		key      string
		wantSame bool
	}{
		{"a rebuild of the same resources keeps the api/v1 hash", again, "api/v1", true},
		{"dropping pods/log changes the api/v1 hash", changed, "api/v1", false},
		{"dropping pods/log keeps the coordination.k8s.io hash", changed, "apis/coordination.k8s.io/v1", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := base.v3[tt.key].json.etag, tt.other.v3[tt.key].json.etag
			if (a == b) != tt.wantSame {
				t.Errorf("hash %s… vs %s…, want same=%v", a[:12], b[:12], tt.wantSame)
			}
			if sameRoot := bytes.Equal(base.v3Root.body, tt.other.v3Root.body); sameRoot != (tt.other == again) {
				t.Errorf("root documents equal = %v", sameRoot)
			}
		})
	}
}

func TestV2ProtobufRoundTrips(t *testing.T) {
	d := buildDocs(t)
	var fromProto openapi_v2.Document
	if err := proto.Unmarshal(d.v2Proto.body, &fromProto); err != nil {
		t.Fatalf("unmarshal protobuf: %v", err)
	}
	fromJSON, err := openapi_v2.ParseDocument(d.v2JSON.body)
	if err != nil {
		t.Fatalf("ParseDocument: %v", err)
	}
	if !proto.Equal(&fromProto, fromJSON) {
		t.Error("protobuf document differs from the parsed JSON document")
	}
	if got, want := len(fromProto.GetDefinitions().GetAdditionalProperties()), len(parsedV2(t, d).Definitions); got != want {
		t.Errorf("protobuf has %d definitions, JSON %d", got, want)
	}
}

func TestV3ProtobufParses(t *testing.T) {
	d := buildDocs(t)
	rep, err := d.v3["api/v1"].protobuf()
	if err != nil {
		t.Fatal(err)
	}
	var doc openapi_v3.Document
	if err := proto.Unmarshal(rep.body, &doc); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	if len(doc.GetComponents().GetSchemas().GetAdditionalProperties()) == 0 {
		t.Error("protobuf document has no schemas")
	}
}

// kubectl 1.27+ validates client-side (when the server lacks fieldValidation)
// with the kube-openapi proto models built from the v2 protobuf document.
func TestV2ModelsValidateLikeKubectl(t *testing.T) {
	d := buildDocs(t)
	var doc openapi_v2.Document
	if err := proto.Unmarshal(d.v2Proto.body, &doc); err != nil {
		t.Fatal(err)
	}
	models, err := kubeproto.NewOpenAPIData(&doc)
	if err != nil {
		t.Fatalf("NewOpenAPIData: %v", err)
	}
	tests := []struct {
		name    string
		def     string
		kind    string
		yaml    string
		wantErr string // "" for valid
	}{
		{"a node with taints is valid", "io.k8s.api.core.v1.Node", "Node",
			"apiVersion: v1\nkind: Node\nmetadata: {name: n1, labels: {a: b}}\nspec: {taints: [{key: k, effect: NoSchedule}]}", ""},
		{"an unknown spec field is rejected", "io.k8s.api.core.v1.Node", "Node",
			"apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nspec: {bogus: 1}", `unknown field "bogus"`},
		{"a string where an integer belongs is rejected", "io.k8s.api.coordination.v1.Lease", "Lease",
			"apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: l}\nspec: {leaseDurationSeconds: forty}", "leaseDurationSeconds"},
		{"numeric and string quantities and int-or-string ports are valid", "io.k8s.api.core.v1.Pod", "Pod", `
apiVersion: v1
kind: Pod
metadata: {name: p, creationTimestamp: null}
spec:
  containers:
  - name: c
    image: i
    resources: {limits: {cpu: 1, memory: 1Gi}, requests: {cpu: "0.5"}}
    livenessProbe: {httpGet: {port: 8080}}
    readinessProbe: {httpGet: {port: http}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := models.LookupModel(tt.def)
			if model == nil {
				t.Fatalf("no model %s among %d", tt.def, len(models.ListModels()))
			}
			var obj any
			if err := yaml.Unmarshal([]byte(tt.yaml), &obj); err != nil {
				t.Fatal(err)
			}
			errs := validation.ValidateModel(obj, model, tt.kind)
			switch {
			case tt.wantErr == "" && len(errs) > 0:
				t.Errorf("ValidateModel: %v", errs)
			case tt.wantErr != "" && !strings.Contains(joinErrors(errs), tt.wantErr):
				t.Errorf("ValidateModel errors %v, want one containing %q", errs, tt.wantErr)
			}
		})
	}
}

func joinErrors(errs []error) string {
	var b strings.Builder
	for _, err := range errs {
		b.WriteString(err.Error())
		b.WriteString("\n")
	}
	return b.String()
}

// kubectl apply computes strategic merge patches from the v3 schema; the patch
// must equal the one computed from the Go struct tags.
func TestV3SchemaDrivesStrategicMergePatch(t *testing.T) {
	d := buildDocs(t)
	var doc spec3.OpenAPI
	if err := json.Unmarshal(d.v3["api/v1"].json.body, &doc); err != nil {
		t.Fatalf("decode as spec3.OpenAPI: %v", err)
	}
	tests := []struct {
		name     string
		def      string
		goType   any
		original string
		modified string
	}{
		{"a container image change keeps the merge key", "io.k8s.api.core.v1.Pod", corev1.Pod{},
			`{"spec":{"containers":[{"name":"a","image":"x:1"},{"name":"b","image":"y:1"}]}}`,
			`{"spec":{"containers":[{"name":"a","image":"x:2"},{"name":"b","image":"y:1"}]}}`},
		{"a new node condition merges by type", "io.k8s.api.core.v1.Node", corev1.Node{},
			`{"status":{"conditions":[{"type":"Ready","status":"True"}]}}`,
			`{"status":{"conditions":[{"type":"Ready","status":"True"},{"type":"DiskPressure","status":"False"}]}}`},
		{"removing a taint deletes by key", "io.k8s.api.core.v1.Node", corev1.Node{},
			`{"spec":{"taints":[{"key":"a","effect":"NoSchedule"},{"key":"b","effect":"NoSchedule"}]}}`,
			`{"spec":{"taints":[{"key":"a","effect":"NoSchedule"}]}}`},
		{"a volume source switch retains keys", "io.k8s.api.core.v1.Pod", corev1.Pod{},
			`{"spec":{"volumes":[{"name":"v","emptyDir":{}}]}}`,
			`{"spec":{"volumes":[{"name":"v","hostPath":{"path":"/x"}}]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			meta := strategicpatch.PatchMetaFromOpenAPIV3{
				SchemaList: doc.Components.Schemas,
				Schema:     doc.Components.Schemas[tt.def],
			}
			if meta.Schema == nil {
				t.Fatalf("no schema %s", tt.def)
			}
			fromSchema, err := strategicpatch.CreateTwoWayMergePatchUsingLookupPatchMeta([]byte(tt.original), []byte(tt.modified), meta)
			if err != nil {
				t.Fatalf("patch from schema: %v", err)
			}
			fromStruct, err := strategicpatch.CreateTwoWayMergePatch([]byte(tt.original), []byte(tt.modified), tt.goType)
			if err != nil {
				t.Fatalf("patch from struct: %v", err)
			}
			if string(fromSchema) != string(fromStruct) {
				t.Errorf("patch from schema %s, from Go struct %s", fromSchema, fromStruct)
			}
		})
	}
}

// kubectl ≥1.29 detects fieldValidation support from the first PATCH operation
// it finds for the kind, in Go map order, so every PATCH operation of every
// kind must declare it; create and update declare it too.
func TestEveryWriteOperationDeclaresFieldValidation(t *testing.T) {
	d := buildDocs(t)
	for key := range d.v3 {
		doc := parsedV3(t, d, key)
		for path, item := range doc.Paths {
			for method, op := range map[string]*v3Operation{"post": item.Post, "put": item.Put, "patch": item.Patch} {
				if op == nil {
					continue
				}
				if !slices.ContainsFunc(op.Parameters, func(p v3Parameter) bool { return p.Name == "fieldValidation" && p.In == "query" }) {
					t.Errorf("%s %s has no fieldValidation query parameter", method, path)
				}
				if op.GVK.Kind == "" || op.Action == "" {
					t.Errorf("%s %s lacks x-kubernetes-group-version-kind or x-kubernetes-action", method, path)
				}
				if method == "patch" {
					for _, ct := range patchContentTypes {
						if _, ok := op.RequestBody.Content[ct]; !ok {
							t.Errorf("patch %s: requestBody lacks %s", path, ct)
						}
					}
				}
			}
		}
	}
}

func TestBuildIsDeterministic(t *testing.T) {
	a, b := buildDocs(t), buildDocs(t)
	if !bytes.Equal(a.v2JSON.body, b.v2JSON.body) || !bytes.Equal(a.v2Proto.body, b.v2Proto.body) || !bytes.Equal(a.v3Root.body, b.v3Root.body) {
		t.Error("two builds of the same resources differ")
	}
}

func TestNewRejectsIncompleteResources(t *testing.T) {
	node := servedResources()[1]
	tests := []struct {
		name   string
		mutate func(*Resource)
		want   string
	}{
		{"a resource without a plural name", func(r *Resource) { r.Resource = "" }, "no plural name"},
		{"a resource without an object", func(r *Resource) { r.Object = nil }, "no Object"},
		{"a listable resource without a list type", func(r *Resource) { r.List = nil }, "without a List type"},
		{"a resource without a version", func(r *Resource) { r.GVK.Version = "" }, "incomplete GVK"},
		{"an unnamed subresource", func(r *Resource) { r.Subresources = []Subresource{{Verbs: []string{"get"}}} }, "subresource without a name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := node
			tt.mutate(&res)
			_, err := New([]Resource{res}, Info{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New error = %v, want one containing %q", err, tt.want)
			}
		})
	}
	t.Run("a resource served twice", func(t *testing.T) {
		_, err := New([]Resource{node, node}, Info{})
		if err == nil || !strings.Contains(err.Error(), "served twice") {
			t.Errorf("New error = %v, want served twice", err)
		}
	})
}

// BenchmarkNew measures the start-up cost and reports the document sizes.
func BenchmarkNew(b *testing.B) {
	var d *Documents
	for b.Loop() {
		var err error
		if d, err = New(servedResources(), Info{Version: "v1.33.0"}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(d.v2JSON.body)), "v2-json-bytes")
	b.ReportMetric(float64(len(d.v2Proto.body)), "v2-pb-bytes")
	b.ReportMetric(float64(len(d.v3["api/v1"].json.body)), "v3-core-bytes")
}
