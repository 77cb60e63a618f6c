package openapi

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// buildDocs builds the documents of servedResources once per test.
func buildDocs(t testing.TB) *Documents {
	t.Helper()
	d, err := New(servedResources(), Info{Version: "v1.33.0"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return d
}

// parsedV3 decodes the OpenAPI v3 document of one group-version.
func parsedV3(t testing.TB, d *Documents, key string) openAPIDocument {
	t.Helper()
	g, ok := d.v3[key]
	if !ok {
		t.Fatalf("no OpenAPI v3 document %q", key)
	}
	var doc openAPIDocument
	if err := json.Unmarshal(g.json.body, &doc); err != nil {
		t.Fatalf("decode %s: %v", key, err)
	}
	return doc
}

func parsedV2(t testing.TB, d *Documents) swaggerDocument {
	t.Helper()
	var doc swaggerDocument
	if err := json.Unmarshal(d.v2JSON.body, &doc); err != nil {
		t.Fatalf("decode v2: %v", err)
	}
	return doc
}

func gvk(group, version, kind string) gvkExtension {
	return gvkExtension{Group: group, Version: version, Kind: kind}
}

func TestDefinitionsCarryTheirKinds(t *testing.T) {
	d := buildDocs(t)
	v2 := parsedV2(t, d)
	tests := []struct {
		name string
		doc  string // v3 document key
		def  string
		want []gvkExtension
	}{
		{"Node carries the core v1 Node kind", "api/v1", "io.k8s.api.core.v1.Node", []gvkExtension{gvk("", "v1", "Node")}},
		{"NodeList carries its list kind", "api/v1", "io.k8s.api.core.v1.NodeList", []gvkExtension{gvk("", "v1", "NodeList")}},
		{"Pod carries the core v1 Pod kind", "api/v1", "io.k8s.api.core.v1.Pod", []gvkExtension{gvk("", "v1", "Pod")}},
		{"core Event carries the core v1 Event kind", "api/v1", "io.k8s.api.core.v1.Event", []gvkExtension{gvk("", "v1", "Event")}},
		{"events.k8s.io Event is a separate definition in its own document", "apis/events.k8s.io/v1", "io.k8s.api.events.v1.Event",
			[]gvkExtension{gvk("events.k8s.io", "v1", "Event")}},
		{"Lease lives in the coordination.k8s.io document", "apis/coordination.k8s.io/v1", "io.k8s.api.coordination.v1.Lease",
			[]gvkExtension{gvk("coordination.k8s.io", "v1", "Lease")}},
		{"Eviction is published with api/v1 under its policy kind", "api/v1", "io.k8s.api.policy.v1.Eviction",
			[]gvkExtension{gvk("policy", "v1", "Eviction")}},
		{"Binding carries its kind", "api/v1", "io.k8s.api.core.v1.Binding", []gvkExtension{gvk("", "v1", "Binding")}},
		{"Status carries only the core kind", "api/v1", "io.k8s.apimachinery.pkg.apis.meta.v1.Status", []gvkExtension{gvk("", "v1", "Status")}},
		{"DeleteOptions carries one kind per served group-version", "apis/coordination.k8s.io/v1", "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
			[]gvkExtension{
				gvk("", "v1", "DeleteOptions"),
				gvk("coordination.k8s.io", "v1", "DeleteOptions"),
				gvk("events.k8s.io", "v1", "DeleteOptions"),
				gvk("storage.k8s.io", "v1", "DeleteOptions"),
			}},
		{"NodeSpec is not a kind", "api/v1", "io.k8s.api.core.v1.NodeSpec", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v3 := parsedV3(t, d, tt.doc)
			def, ok := v3.Components.Schemas[tt.def]
			if !ok {
				t.Fatalf("%s has no schema %s", tt.doc, tt.def)
			}
			if !slices.Equal(def.GroupVersionKinds, tt.want) {
				t.Errorf("v3 x-kubernetes-group-version-kind = %v, want %v", def.GroupVersionKinds, tt.want)
			}
			if def.Description == "" {
				t.Errorf("v3 schema %s has no description", tt.def)
			}
			if got := v2.Definitions[tt.def].GroupVersionKinds; !slices.Equal(got, tt.want) {
				t.Errorf("v2 x-kubernetes-group-version-kind = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSpecialTypes(t *testing.T) {
	d := buildDocs(t)
	v2 := parsedV2(t, d).Definitions
	v3 := parsedV3(t, d, "api/v1").Components.Schemas
	oneOf := func(types ...string) []*jsonSchema {
		var out []*jsonSchema
		for _, typ := range types {
			out = append(out, &jsonSchema{Type: typ})
		}
		return out
	}
	tests := []struct {
		name   string
		def    string
		wantV2 jsonSchema // Description is not compared
		wantV3 jsonSchema
	}{
		{
			name:   "Quantity is a string in v2 and a string or number in v3",
			def:    "io.k8s.apimachinery.pkg.api.resource.Quantity",
			wantV2: jsonSchema{Type: "string"},
			wantV3: jsonSchema{OneOf: oneOf("string", "number")},
		},
		{
			name:   "IntOrString is an int-or-string string in v2 and an integer or string in v3",
			def:    "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
			wantV2: jsonSchema{Type: "string", Format: "int-or-string"},
			wantV3: jsonSchema{Format: "int-or-string", OneOf: oneOf("integer", "string"), IntOrString: true},
		},
		{
			name:   "Time is a date-time string",
			def:    "io.k8s.apimachinery.pkg.apis.meta.v1.Time",
			wantV2: jsonSchema{Type: "string", Format: "date-time"},
			wantV3: jsonSchema{Type: "string", Format: "date-time"},
		},
		{
			name:   "MicroTime is a date-time string",
			def:    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime",
			wantV2: jsonSchema{Type: "string", Format: "date-time"},
			wantV3: jsonSchema{Type: "string", Format: "date-time"},
		},
		{
			name:   "RawExtension is an arbitrary object",
			def:    "io.k8s.apimachinery.pkg.runtime.RawExtension",
			wantV2: jsonSchema{Type: "object"},
			wantV3: jsonSchema{Type: "object"},
		},
		{
			name:   "FieldsV1 is an arbitrary object",
			def:    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
			wantV2: jsonSchema{Type: "object"},
			wantV3: jsonSchema{Type: "object"},
		},
		{
			name:   "Patch is an empty object",
			def:    "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
			wantV2: jsonSchema{Type: "object"},
			wantV3: jsonSchema{Type: "object"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range []struct {
				version string
				got     *jsonSchema
				want    jsonSchema
			}{{"v2", v2[tt.def], tt.wantV2}, {"v3", v3[tt.def], tt.wantV3}} {
				if c.got == nil {
					t.Fatalf("%s: no definition %s", c.version, tt.def)
				}
				if c.got.Description == "" {
					t.Errorf("%s: %s has no description", c.version, tt.def)
				}
				got := *c.got
				got.Description = ""
				if !reflect.DeepEqual(got, c.want) {
					t.Errorf("%s: got %s, want %s", c.version, mustJSON(t, got), mustJSON(t, c.want))
				}
			}
		})
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFields(t *testing.T) {
	d := buildDocs(t)
	v2 := parsedV2(t, d).Definitions
	v3 := parsedV3(t, d, "api/v1").Components.Schemas
	tests := []struct {
		name      string
		def       string
		field     string
		wantV2    jsonSchema // Description is compared only for being non-empty
		wantV3    jsonSchema
		undefined bool // the field must not exist
	}{
		{
			name: "spec.containers merges by name and is a list map keyed by name", def: "io.k8s.api.core.v1.PodSpec", field: "containers",
			wantV2: jsonSchema{Type: "array", Items: &jsonSchema{Ref: "#/definitions/io.k8s.api.core.v1.Container"},
				PatchStrategy: "merge", PatchMergeKey: "name", ListType: "map", ListMapKeys: []string{"name"}},
			wantV3: jsonSchema{Type: "array", Items: &jsonSchema{Ref: "#/components/schemas/io.k8s.api.core.v1.Container"},
				PatchStrategy: "merge", PatchMergeKey: "name", ListType: "map", ListMapKeys: []string{"name"}},
		},
		{
			name: "node status.conditions merges by type", def: "io.k8s.api.core.v1.NodeStatus", field: "conditions",
			wantV2: jsonSchema{Type: "array", Items: &jsonSchema{Ref: "#/definitions/io.k8s.api.core.v1.NodeCondition"},
				PatchStrategy: "merge", PatchMergeKey: "type", ListType: "map", ListMapKeys: []string{"type"}},
			wantV3: jsonSchema{Type: "array", Items: &jsonSchema{Ref: "#/components/schemas/io.k8s.api.core.v1.NodeCondition"},
				PatchStrategy: "merge", PatchMergeKey: "type", ListType: "map", ListMapKeys: []string{"type"}},
		},
		{
			name: "volumes keep both patch strategies", def: "io.k8s.api.core.v1.PodSpec", field: "volumes",
			wantV2: jsonSchema{Type: "array", Items: &jsonSchema{Ref: "#/definitions/io.k8s.api.core.v1.Volume"},
				PatchStrategy: "merge,retainKeys", PatchMergeKey: "name", ListType: "map", ListMapKeys: []string{"name"}},
			wantV3: jsonSchema{Type: "array", Items: &jsonSchema{Ref: "#/components/schemas/io.k8s.api.core.v1.Volume"},
				PatchStrategy: "merge,retainKeys", PatchMergeKey: "name", ListType: "map", ListMapKeys: []string{"name"}},
		},
		{
			name: "a struct field is a sibling-described $ref in v2 and an allOf in v3", def: "io.k8s.api.core.v1.Node", field: "spec",
			wantV2: jsonSchema{Ref: "#/definitions/io.k8s.api.core.v1.NodeSpec"},
			wantV3: jsonSchema{AllOf: []*jsonSchema{{Ref: "#/components/schemas/io.k8s.api.core.v1.NodeSpec"}}},
		},
		{
			name: "embedded TypeMeta is flattened into kind", def: "io.k8s.api.core.v1.Node", field: "kind",
			wantV2: jsonSchema{Type: "string"},
			wantV3: jsonSchema{Type: "string"},
		},
		{
			name: "embedded TypeMeta leaves no TypeMeta property", def: "io.k8s.api.core.v1.Node", field: "TypeMeta",
			undefined: true,
		},
		{
			name: "resource lists map names to quantities", def: "io.k8s.api.core.v1.ResourceRequirements", field: "limits",
			wantV2: jsonSchema{Type: "object", AdditionalProperties: &jsonSchema{Ref: "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity"}},
			wantV3: jsonSchema{Type: "object", AdditionalProperties: &jsonSchema{Ref: "#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity"}},
		},
		{
			name: "labels are a string map", def: "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", field: "labels",
			wantV2: jsonSchema{Type: "object", AdditionalProperties: &jsonSchema{Type: "string"}},
			wantV3: jsonSchema{Type: "object", AdditionalProperties: &jsonSchema{Type: "string"}},
		},
		{
			name: "int32 fields are int32 integers", def: "io.k8s.api.core.v1.ContainerPort", field: "containerPort",
			wantV2: jsonSchema{Type: "integer", Format: "int32"},
			wantV3: jsonSchema{Type: "integer", Format: "int32"},
		},
		{
			name: "pointer-to-int64 fields are int64 integers", def: "io.k8s.api.core.v1.PodSpec", field: "terminationGracePeriodSeconds",
			wantV2: jsonSchema{Type: "integer", Format: "int64"},
			wantV3: jsonSchema{Type: "integer", Format: "int64"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range []struct {
				version string
				defs    map[string]*jsonSchema
				want    jsonSchema
			}{{"v2", v2, tt.wantV2}, {"v3", v3, tt.wantV3}} {
				def := c.defs[tt.def]
				if def == nil {
					t.Fatalf("%s: no definition %s", c.version, tt.def)
				}
				field, ok := def.Properties[tt.field]
				if tt.undefined {
					if ok {
						t.Errorf("%s: %s has property %q, want none", c.version, tt.def, tt.field)
					}
					continue
				}
				if !ok {
					t.Fatalf("%s: %s has no property %q", c.version, tt.def, tt.field)
				}
				if field.Description == "" {
					t.Errorf("%s: %s.%s has no description", c.version, tt.def, tt.field)
				}
				got := *field
				got.Description = ""
				if !reflect.DeepEqual(got, c.want) {
					t.Errorf("%s: got %s, want %s", c.version, mustJSON(t, got), mustJSON(t, c.want))
				}
			}
		})
	}
}

// sample exercises reflection rules that the served types may not all use.
type sample struct {
	metav1.TypeMeta `json:",inline"`
	*embedded
	Data       []byte `json:"data,omitempty"`
	Skipped    string `json:"-"`
	Dash       string `json:"-,"`
	NoTag      string
	Ratio      float64             `json:"ratio"`
	Quantities []resource.Quantity `json:"quantities"`
	Anonymous  struct {
		Inner bool `json:"inner"`
	} `json:"anonymous"`
	Self       *sample `json:"self,omitempty"`
	unexported string
}

type embedded struct {
	Promoted string `json:"promoted"`
}

func TestReflectionRules(t *testing.T) {
	r := newReflector()
	name, err := r.define(reflect.TypeFor[sample]())
	if err != nil {
		t.Fatal(err)
	}
	if want := "com.github.nodeplane.nodeplane.internal.apiserver.openapi.sample"; name != want {
		t.Fatalf("definition name = %q, want %q", name, want)
	}
	props := r.defs[name].Properties
	tests := []struct {
		name  string
		field string
		want  *jsonSchema // nil: absent
	}{
		{"inline TypeMeta contributes apiVersion", "apiVersion", &jsonSchema{Type: "string"}},
		{"an embedded struct pointer is flattened", "promoted", &jsonSchema{Type: "string"}},
		{"byte slices are base64 strings", "data", &jsonSchema{Type: "string", Format: "byte"}},
		{`json:"-" hides a field`, "Skipped", nil},
		{`json:"-," names a field "-"`, "-", &jsonSchema{Type: "string"}},
		{"an untagged field uses its Go name", "NoTag", &jsonSchema{Type: "string"}},
		{"float64 is a double", "ratio", &jsonSchema{Type: "number", Format: "double"}},
		{"slices of special types refer to them", "quantities",
			&jsonSchema{Type: "array", Items: &jsonSchema{Ref: "io.k8s.apimachinery.pkg.api.resource.Quantity"}}},
		{"anonymous structs are inlined", "anonymous",
			&jsonSchema{Type: "object", Properties: map[string]*jsonSchema{"inner": {Type: "boolean"}}}},
		{"recursive types refer to themselves", "self", &jsonSchema{Ref: name}},
		{"unexported fields are skipped", "unexported", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := props[tt.field]
			if tt.want == nil {
				if ok {
					t.Errorf("property %q = %s, want none", tt.field, mustJSON(t, got))
				}
				return
			}
			if !ok {
				t.Fatalf("no property %q among %v", tt.field, keys(props))
			}
			stripped := *got
			stripped.Description = ""
			if !reflect.DeepEqual(&stripped, tt.want) {
				t.Errorf("property %q = %s, want %s", tt.field, mustJSON(t, got), mustJSON(t, tt.want))
			}
		})
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Adding a resource should be one declarative registration: every type the
// client-go scheme knows must reflect without error.
func TestEveryClientGoTypeReflects(t *testing.T) {
	r := newReflector()
	for gvk, typ := range clientgoscheme.Scheme.AllKnownTypes() {
		if _, err := r.define(typ); err != nil {
			t.Errorf("%v: %v", gvk, err)
		}
	}
	if len(r.defs) < 500 {
		t.Errorf("reflected %d definitions, want the whole scheme (>500)", len(r.defs))
	}
}

// Every $ref in every document must resolve within that document.
func TestEveryReferenceResolves(t *testing.T) {
	d := buildDocs(t)
	check := func(t *testing.T, doc []byte, prefix string, defs map[string]*jsonSchema) {
		var generic any
		if err := json.Unmarshal(doc, &generic); err != nil {
			t.Fatal(err)
		}
		count := 0
		walkJSON(generic, func(key string, value any) {
			if key != "$ref" {
				return
			}
			ref, _ := value.(string)
			name, ok := strings.CutPrefix(ref, prefix)
			if !ok || defs[name] == nil {
				t.Errorf("dangling $ref %q", ref)
			}
			count++
		})
		if count == 0 {
			t.Error("no $ref at all")
		}
	}
	t.Run("v2", func(t *testing.T) {
		check(t, d.v2JSON.body, "#/definitions/", parsedV2(t, d).Definitions)
	})
	for key := range d.v3 {
		t.Run(key, func(t *testing.T) {
			check(t, d.v3[key].json.body, "#/components/schemas/", parsedV3(t, d, key).Components.Schemas)
		})
	}
}

func walkJSON(v any, visit func(key string, value any)) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			visit(k, child)
			walkJSON(child, visit)
		}
	case []any:
		for _, child := range v {
			walkJSON(child, visit)
		}
	}
}
