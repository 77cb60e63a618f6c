package openapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// jsonSchema is one schema node. Its JSON layout is valid in both Swagger 2.0
// and OpenAPI 3.0 once render has applied the dialect's differences; in the
// reflected (dialect-neutral) form Ref holds a bare definition name.
type jsonSchema struct {
	Ref                   string                 `json:"$ref,omitempty"`
	AllOf                 []*jsonSchema          `json:"allOf,omitempty"`
	OneOf                 []*jsonSchema          `json:"oneOf,omitempty"`
	Description           string                 `json:"description,omitempty"`
	Type                  string                 `json:"type,omitempty"`
	Format                string                 `json:"format,omitempty"`
	Items                 *jsonSchema            `json:"items,omitempty"`
	Properties            map[string]*jsonSchema `json:"properties,omitempty"`
	AdditionalProperties  *jsonSchema            `json:"additionalProperties,omitempty"`
	GroupVersionKinds     []gvkExtension         `json:"x-kubernetes-group-version-kind,omitempty"`
	IntOrString           bool                   `json:"x-kubernetes-int-or-string,omitempty"`
	PreserveUnknownFields bool                   `json:"x-kubernetes-preserve-unknown-fields,omitempty"`
	PatchMergeKey         string                 `json:"x-kubernetes-patch-merge-key,omitempty"`
	PatchStrategy         string                 `json:"x-kubernetes-patch-strategy,omitempty"`
	ListType              string                 `json:"x-kubernetes-list-type,omitempty"`
	ListMapKeys           []string               `json:"x-kubernetes-list-map-keys,omitempty"`
	MapType               string                 `json:"x-kubernetes-map-type,omitempty"`
	Required              []string               `json:"required,omitempty"`
}

// gvkExtension is one element of x-kubernetes-group-version-kind.
type gvkExtension struct {
	Group   string `json:"group"`
	Kind    string `json:"kind"`
	Version string `json:"version"`
}

// dialect selects the OpenAPI version a schema is rendered for.
type dialect int

const (
	swagger2 dialect = iota
	openAPI3
)

func (d dialect) refPrefix() string {
	if d == swagger2 {
		return "#/definitions/"
	}
	return "#/components/schemas/"
}

// render copies a reflected schema into dialect d:
//   - refs get the dialect's prefix; in OpenAPI 3.0 a ref with siblings
//     (a field description) is wrapped in allOf, since 3.0 ignores $ref
//     siblings;
//   - oneOf (Quantity, IntOrString) exists only in 3.0; 2.0 keeps the plain
//     type, and x-kubernetes-int-or-string is likewise 3.0 only.
func render(s *jsonSchema, d dialect) *jsonSchema {
	if s == nil {
		return nil
	}
	out := *s
	out.Items = render(s.Items, d)
	out.AdditionalProperties = render(s.AdditionalProperties, d)
	if s.Properties != nil {
		out.Properties = make(map[string]*jsonSchema, len(s.Properties))
		for name, p := range s.Properties {
			out.Properties[name] = render(p, d)
		}
	}
	switch d {
	case swagger2:
		out.OneOf = nil
		out.IntOrString = false
		if s.Ref != "" {
			out.Ref = d.refPrefix() + s.Ref
		}
	case openAPI3:
		if len(s.OneOf) > 0 {
			out.Type = ""
			out.OneOf = make([]*jsonSchema, len(s.OneOf))
			for i, o := range s.OneOf {
				out.OneOf[i] = render(o, d)
			}
		}
		if s.Ref != "" {
			ref := d.refPrefix() + s.Ref
			if s.Description == "" && s.PatchStrategy == "" && s.PatchMergeKey == "" && s.MapType == "" {
				out.Ref = ref
			} else {
				out.Ref = ""
				out.AllOf = []*jsonSchema{{Ref: ref}}
			}
		}
	}
	return &out
}

// scalarType is implemented by apimachinery types that serialise as a JSON
// scalar (Quantity, IntOrString, Time, MicroTime, Duration).
type scalarType interface {
	OpenAPISchemaType() []string
	OpenAPISchemaFormat() string
}

// oneOfTypes is implemented by scalar types accepting several JSON types.
type oneOfTypes interface {
	OpenAPIV3OneOfTypes() []string
}

// swaggerDocumented is implemented by the k8s.io/api types: key "" is the type
// description, other keys are JSON field names.
type swaggerDocumented interface {
	SwaggerDoc() map[string]string
}

var (
	intOrStringType = reflect.TypeFor[intstr.IntOrString]()
	byteSliceType   = reflect.TypeFor[[]byte]()
	marshalerType   = reflect.TypeFor[json.Marshaler]()

	// opaqueObjects serialise as an arbitrary JSON object.
	opaqueObjects = map[reflect.Type]bool{
		reflect.TypeFor[runtime.RawExtension](): true,
		reflect.TypeFor[metav1.FieldsV1]():      true,
	}

	// typeDescriptions covers the special types, which have no SwaggerDoc.
	typeDescriptions = map[reflect.Type]string{
		reflect.TypeFor[resource.Quantity](): "Quantity is a fixed-point representation of a number, " +
			"written as a string (\"100m\", \"1Gi\", \"2\") or a plain number. Binary suffixes are Ki, Mi, Gi, Ti, Pi, Ei; " +
			"decimal suffixes are m, k, M, G, T, P, E; exponents (1e3) are also accepted.",
		intOrStringType: "IntOrString is a type that can hold an int32 or a string. " +
			"A port, for example, can be given as a number (8080) or as a named port (\"http\").",
		reflect.TypeFor[metav1.Time](): "Time is a timestamp serialised as an RFC 3339 string " +
			"with second precision, e.g. \"2024-01-02T15:04:05Z\".",
		reflect.TypeFor[metav1.MicroTime](): "MicroTime is a timestamp serialised as an RFC 3339 string " +
			"with microsecond precision, e.g. \"2024-01-02T15:04:05.000000Z\".",
		reflect.TypeFor[metav1.Duration](): "Duration is a length of time written as a Go duration string, e.g. \"1m30s\".",
		reflect.TypeFor[runtime.RawExtension](): "RawExtension holds an arbitrary, usually complete, " +
			"serialised API object, including its apiVersion and kind.",
		reflect.TypeFor[metav1.FieldsV1](): "FieldsV1 stores a set of fields in a data structure like a Trie, in JSON format. " +
			"Managed by the server; clients should not set it.",
	}
)

// reflector turns Go types into named schema definitions.
type reflector struct {
	defs  map[string]*jsonSchema // definition name → reflected schema
	names map[reflect.Type]string
	// roots are the definitions each group-version document starts from
	// (key: schema.GroupVersion).
	roots map[schema.GroupVersion][]string
}

func newReflector() *reflector {
	return &reflector{
		defs:  map[string]*jsonSchema{},
		names: map[reflect.Type]string{},
		roots: map[schema.GroupVersion][]string{},
	}
}

// addRoots reflects the types of res and tags them with their kinds.
func (r *reflector) addRoots(res Resource) error {
	gv := res.GVK.GroupVersion()
	add := func(obj runtime.Object, gvk schema.GroupVersionKind) error {
		name, err := r.define(goType(obj))
		if err != nil {
			return err
		}
		r.tagKind(name, gvk)
		r.roots[gv] = append(r.roots[gv], name)
		return nil
	}
	if err := add(res.Object, res.GVK); err != nil {
		return err
	}
	if res.List != nil {
		if err := add(res.List, res.ListGVK); err != nil {
			return err
		}
	}
	for _, sub := range res.Subresources {
		if sub.Object == nil {
			continue
		}
		if err := add(sub.Object, sub.GVK); err != nil {
			return fmt.Errorf("subresource %q: %w", sub.Name, err)
		}
	}
	return nil
}

// addMetaRoots adds the meta.k8s.io types every operation refers to. As in
// kube-apiserver, DeleteOptions and WatchEvent carry one kind per served
// group-version, Status only the core one.
func (r *reflector) addMetaRoots(gvs []schema.GroupVersion) error {
	metaTypes := []struct {
		typ     reflect.Type
		kindPer string // kind tagged in every group-version; "" for none
	}{
		{reflect.TypeFor[metav1.DeleteOptions](), "DeleteOptions"},
		{reflect.TypeFor[metav1.WatchEvent](), "WatchEvent"},
		{reflect.TypeFor[metav1.Status](), ""},
		{reflect.TypeFor[metav1.Patch](), ""},
	}
	for _, m := range metaTypes {
		name, err := r.define(m.typ)
		if err != nil {
			return err
		}
		for _, gv := range gvs {
			if m.kindPer != "" {
				r.tagKind(name, gv.WithKind(m.kindPer))
			}
			r.roots[gv] = append(r.roots[gv], name)
		}
	}
	r.tagKind(statusDef, schema.GroupVersionKind{Version: "v1", Kind: "Status"})
	return nil
}

// tagKind adds gvk to the x-kubernetes-group-version-kind of a definition,
// keeping the list sorted and free of duplicates.
func (r *reflector) tagKind(name string, gvk schema.GroupVersionKind) {
	def := r.defs[name]
	ext := gvkExtension{Group: gvk.Group, Kind: gvk.Kind, Version: gvk.Version}
	if slices.Contains(def.GroupVersionKinds, ext) {
		return
	}
	def.GroupVersionKinds = append(def.GroupVersionKinds, ext)
	slices.SortFunc(def.GroupVersionKinds, func(a, b gvkExtension) int {
		return strings.Compare(a.Group+"/"+a.Version+"/"+a.Kind, b.Group+"/"+b.Version+"/"+b.Kind)
	})
}

// definitionName derives the kube-style definition name from the Go package
// path: k8s.io/api/core/v1.Node → io.k8s.api.core.v1.Node.
func definitionName(t reflect.Type) string {
	pkg := t.PkgPath()
	domain, rest, _ := strings.Cut(pkg, "/")
	labels := strings.Split(domain, ".")
	slices.Reverse(labels)
	parts := []string{strings.Join(labels, ".")}
	if rest != "" {
		parts = append(parts, strings.ReplaceAll(rest, "/", "."))
	}
	return strings.Join(append(parts, t.Name()), ".")
}

// define reflects the named type t into a definition and returns its name.
func (r *reflector) define(t reflect.Type) (string, error) {
	if name, ok := r.names[t]; ok {
		return name, nil
	}
	if t.Name() == "" || t.PkgPath() == "" {
		return "", fmt.Errorf("type %v has no name to define", t)
	}
	name := definitionName(t)
	if _, ok := r.defs[name]; ok {
		return "", fmt.Errorf("type %v: definition name %q already taken", t, name)
	}
	def := &jsonSchema{}
	// Register before descending so recursive types terminate.
	r.names[t] = name
	r.defs[name] = def

	var err error
	switch {
	case implements(t, reflect.TypeFor[scalarType]()):
		s := reflect.New(t).Elem().Interface().(scalarType)
		types := s.OpenAPISchemaType()
		if len(types) != 1 {
			return "", fmt.Errorf("type %v declares OpenAPI types %v, want exactly one", t, types)
		}
		def.Type = types[0]
		def.Format = s.OpenAPISchemaFormat()
		if o, ok := reflect.New(t).Elem().Interface().(oneOfTypes); ok {
			for _, typ := range o.OpenAPIV3OneOfTypes() {
				def.OneOf = append(def.OneOf, &jsonSchema{Type: typ})
			}
		}
		def.IntOrString = t == intOrStringType
	case opaqueObjects[t]:
		def.Type = "object"
	case t.Kind() == reflect.Struct:
		if implements(t, marshalerType) {
			return "", fmt.Errorf("type %v has custom JSON marshalling and no known schema", t)
		}
		def.Type = "object"
		def.Properties = map[string]*jsonSchema{}
		err = r.addFields(def, t)
		def.Required = r.required(t)
		def.MapType = markersOf(t).MapType
	default:
		var s *jsonSchema
		s, err = r.inline(t)
		if s != nil {
			*def = *s
		}
	}
	if err != nil {
		return "", fmt.Errorf("%v: %w", t, err)
	}
	def.Description = typeDescriptions[t]
	if doc := swaggerDoc(t); doc != nil {
		def.Description = doc[""]
	}
	return name, nil
}

// implements reports whether t or *t implements iface.
func implements(t, iface reflect.Type) bool {
	return t.Implements(iface) || reflect.PointerTo(t).Implements(iface)
}

// swaggerDoc returns the SwaggerDoc map of t, or nil.
func swaggerDoc(t reflect.Type) map[string]string {
	if d, ok := reflect.New(t).Interface().(swaggerDocumented); ok {
		return d.SwaggerDoc()
	}
	return nil
}

// addFields adds the JSON fields of struct t to s, flattening embedded
// structs the way encoding/json does.
func (r *reflector) addFields(s *jsonSchema, t reflect.Type) error {
	docs := swaggerDoc(t)
	marks := markersOf(t).Fields
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				if err := r.addFields(s, et); err != nil {
					return err
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fs, err := r.inline(f.Type)
		if err != nil {
			return fmt.Errorf("field %s: %w", f.Name, err)
		}
		fs.Description = docs[name]
		fs.PatchStrategy = f.Tag.Get("patchStrategy")
		fs.PatchMergeKey = f.Tag.Get("patchMergeKey")
		if m, ok := marks[name]; ok {
			fs.ListType, fs.ListMapKeys, fs.MapType = m.ListType, m.ListMapKeys, m.MapType
		}
		s.Properties[name] = fs
	}
	return nil
}

// required lists the required JSON fields of struct t and of the structs
// it embeds, sorted, as their source markers say.
func (r *reflector) required(t reflect.Type) []string {
	var names []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		names = append(names, markersOf(t).Required...)
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if f.Anonymous && name == "" && et.Kind() == reflect.Struct {
				walk(et)
			}
		}
	}
	walk(t)
	slices.Sort(names)
	return names
}

// inline returns a fresh schema for a value of type t: a reference for named
// structs and special types, an inline schema otherwise.
func (r *reflector) inline(t reflect.Type) (*jsonSchema, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Name() != "" && t.PkgPath() != "" &&
		(t.Kind() == reflect.Struct || implements(t, reflect.TypeFor[scalarType]()) || opaqueObjects[t]) {
		name, err := r.define(t)
		if err != nil {
			return nil, err
		}
		return &jsonSchema{Ref: name}, nil
	}
	switch t.Kind() {
	case reflect.Bool:
		return &jsonSchema{Type: "boolean"}, nil
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint8, reflect.Uint16:
		return &jsonSchema{Type: "integer", Format: "int32"}, nil
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64:
		return &jsonSchema{Type: "integer", Format: "int64"}, nil
	case reflect.Float32:
		return &jsonSchema{Type: "number", Format: "float"}, nil
	case reflect.Float64:
		return &jsonSchema{Type: "number", Format: "double"}, nil
	case reflect.String:
		return &jsonSchema{Type: "string"}, nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.ConvertibleTo(byteSliceType) {
			return &jsonSchema{Type: "string", Format: "byte"}, nil
		}
		items, err := r.inline(t.Elem())
		if err != nil {
			return nil, err
		}
		return &jsonSchema{Type: "array", Items: items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("map key %v is not a string", t.Key())
		}
		values, err := r.inline(t.Elem())
		if err != nil {
			return nil, err
		}
		return &jsonSchema{Type: "object", AdditionalProperties: values}, nil
	case reflect.Struct:
		// An anonymous struct: inline its fields.
		s := &jsonSchema{Type: "object", Properties: map[string]*jsonSchema{}}
		return s, r.addFields(s, t)
	case reflect.Interface:
		return &jsonSchema{Type: "object", PreserveUnknownFields: true}, nil
	}
	return nil, fmt.Errorf("type %v (kind %v) has no JSON schema", t, t.Kind())
}

// closure returns the names of roots and of every definition they reach,
// sorted.
func (r *reflector) closure(roots []string) []string {
	seen := map[string]bool{}
	var visit func(s *jsonSchema)
	var enter func(name string)
	enter = func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		visit(r.defs[name])
	}
	visit = func(s *jsonSchema) {
		if s == nil {
			return
		}
		if s.Ref != "" {
			enter(s.Ref)
		}
		visit(s.Items)
		visit(s.AdditionalProperties)
		for _, p := range s.Properties {
			visit(p)
		}
		for _, o := range s.AllOf {
			visit(o)
		}
	}
	for _, name := range roots {
		enter(name)
	}
	names := make([]string, 0, len(seen))
	for name := range seen {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
