package openapi

import (
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	openapi_v3 "github.com/google/gnostic-models/openapiv3"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Media types of the documents.
const (
	mediaJSON    = "application/json"
	mediaV2Proto = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
	mediaV3Proto = "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"
)

type info struct {
	Title   string `json:"title"`
	Version string `json:"version"`
}

type swaggerDocument struct {
	Swagger     string                 `json:"swagger"`
	Info        info                   `json:"info"`
	Paths       map[string]*v2PathItem `json:"paths"`
	Definitions map[string]*jsonSchema `json:"definitions"`
}

type v2PathItem struct {
	Get        *v2Operation  `json:"get,omitempty"`
	Put        *v2Operation  `json:"put,omitempty"`
	Post       *v2Operation  `json:"post,omitempty"`
	Delete     *v2Operation  `json:"delete,omitempty"`
	Patch      *v2Operation  `json:"patch,omitempty"`
	Parameters []v2Parameter `json:"parameters,omitempty"`
}

type v2Operation struct {
	Description string                `json:"description,omitempty"`
	OperationID string                `json:"operationId"`
	Consumes    []string              `json:"consumes,omitempty"`
	Produces    []string              `json:"produces,omitempty"`
	Parameters  []v2Parameter         `json:"parameters,omitempty"`
	Responses   map[string]v2Response `json:"responses"`
	Action      string                `json:"x-kubernetes-action"`
	GVK         gvkExtension          `json:"x-kubernetes-group-version-kind"`
}

type v2Parameter struct {
	Name        string      `json:"name"`
	In          string      `json:"in"`
	Description string      `json:"description,omitempty"`
	Required    bool        `json:"required,omitempty"`
	Type        string      `json:"type,omitempty"`
	UniqueItems bool        `json:"uniqueItems,omitempty"`
	Schema      *jsonSchema `json:"schema,omitempty"`
}

type v2Response struct {
	Description string      `json:"description"`
	Schema      *jsonSchema `json:"schema,omitempty"`
}

type openAPIDocument struct {
	OpenAPI    string                 `json:"openapi"`
	Info       info                   `json:"info"`
	Paths      map[string]*v3PathItem `json:"paths"`
	Components v3Components           `json:"components"`
}

type v3Components struct {
	Schemas map[string]*jsonSchema `json:"schemas"`
}

type v3PathItem struct {
	Get        *v3Operation  `json:"get,omitempty"`
	Put        *v3Operation  `json:"put,omitempty"`
	Post       *v3Operation  `json:"post,omitempty"`
	Delete     *v3Operation  `json:"delete,omitempty"`
	Patch      *v3Operation  `json:"patch,omitempty"`
	Parameters []v3Parameter `json:"parameters,omitempty"`
}

type v3Operation struct {
	Description string                `json:"description,omitempty"`
	OperationID string                `json:"operationId"`
	Parameters  []v3Parameter         `json:"parameters,omitempty"`
	RequestBody *v3RequestBody        `json:"requestBody,omitempty"`
	Responses   map[string]v3Response `json:"responses"`
	Action      string                `json:"x-kubernetes-action"`
	GVK         gvkExtension          `json:"x-kubernetes-group-version-kind"`
}

type v3Parameter struct {
	Name        string      `json:"name"`
	In          string      `json:"in"`
	Description string      `json:"description,omitempty"`
	Required    bool        `json:"required,omitempty"`
	Schema      *jsonSchema `json:"schema"`
}

type v3RequestBody struct {
	Content  map[string]v3MediaType `json:"content"`
	Required bool                   `json:"required"`
}

type v3MediaType struct {
	Schema *jsonSchema `json:"schema"`
}

type v3Response struct {
	Description string                 `json:"description"`
	Content     map[string]v3MediaType `json:"content,omitempty"`
}

// v3Discovery is the /openapi/v3 root document.
type v3Discovery struct {
	Paths map[string]v3DiscoveryEntry `json:"paths"`
}

type v3DiscoveryEntry struct {
	ServerRelativeURL string `json:"serverRelativeURL"`
}

// representation is one marshalled document in one media type.
type representation struct {
	body        []byte
	etag        string // hex SHA-512 of body, unquoted
	contentType string
}

func newRepresentation(body []byte, contentType string) representation {
	sum := sha512.Sum512(body)
	return representation{body: body, etag: strings.ToUpper(hex.EncodeToString(sum[:])), contentType: contentType}
}

// groupVersionDoc is the OpenAPI 3.0 document of one group-version. The
// protobuf form is rare (kubectl reads JSON), so it is built on first use.
type groupVersionDoc struct {
	json representation

	protoOnce sync.Once
	proto     representation
	protoErr  error
}

func (g *groupVersionDoc) protobuf() (representation, error) {
	g.protoOnce.Do(func() {
		doc, err := openapi_v3.ParseDocument(g.json.body)
		if err != nil {
			g.protoErr = fmt.Errorf("parse OpenAPI v3 document: %w", err)
			return
		}
		b, err := proto.Marshal(doc)
		if err != nil {
			g.protoErr = fmt.Errorf("marshal OpenAPI v3 protobuf: %w", err)
			return
		}
		g.proto = representation{body: b, etag: g.json.etag, contentType: mediaV3Proto}
	})
	return g.proto, g.protoErr
}

// groupVersionKey is the /openapi/v3 root key of gv: api/v1 or
// apis/<group>/<version>.
func groupVersionKey(gv schema.GroupVersion) string {
	return strings.TrimPrefix(groupVersionPath(gv), "/")
}

// assemble renders and marshals every document.
func assemble(r *reflector, rs []Resource, inf Info) (*Documents, error) {
	defOf := func(obj runtime.Object) string { return r.names[goType(obj)] }
	meta := info{Title: inf.Title, Version: inf.Version}

	v2Defs := make(map[string]*jsonSchema, len(r.defs))
	v3Defs := make(map[string]*jsonSchema, len(r.defs))
	for name, def := range r.defs {
		v2Defs[name] = render(def, swagger2)
		v3Defs[name] = render(def, openAPI3)
	}

	v2 := swaggerDocument{Swagger: "2.0", Info: meta, Paths: map[string]*v2PathItem{}, Definitions: v2Defs}
	v3Paths := map[schema.GroupVersion]map[string]*v3PathItem{}
	for _, res := range rs {
		gv := res.GVK.GroupVersion()
		if v3Paths[gv] == nil {
			v3Paths[gv] = map[string]*v3PathItem{}
		}
		for _, item := range resourcePaths(res, defOf) {
			if _, dup := v2.Paths[item.path]; dup {
				return nil, fmt.Errorf("path %s served twice", item.path)
			}
			v2.Paths[item.path] = v2Path(item)
			v3Paths[gv][item.path] = v3Path(item)
		}
	}

	d := &Documents{v3: map[string]*groupVersionDoc{}}
	b, err := json.Marshal(v2)
	if err != nil {
		return nil, fmt.Errorf("marshal OpenAPI v2: %w", err)
	}
	d.v2JSON = newRepresentation(b, mediaJSON)
	pb, err := swaggerProtobuf(b)
	if err != nil {
		return nil, err
	}
	d.v2Proto = representation{body: pb, etag: d.v2JSON.etag + "-PB", contentType: mediaV2Proto}

	discovery := v3Discovery{Paths: map[string]v3DiscoveryEntry{}}
	for _, gv := range servedGroupVersions(rs) {
		doc := openAPIDocument{
			OpenAPI:    "3.0.0",
			Info:       meta,
			Paths:      v3Paths[gv],
			Components: v3Components{Schemas: map[string]*jsonSchema{}},
		}
		for _, name := range r.closure(r.roots[gv]) {
			doc.Components.Schemas[name] = v3Defs[name]
		}
		b, err := json.Marshal(doc)
		if err != nil {
			return nil, fmt.Errorf("marshal OpenAPI v3 %s: %w", gv, err)
		}
		key := groupVersionKey(gv)
		g := &groupVersionDoc{json: newRepresentation(b, mediaJSON)}
		d.v3[key] = g
		discovery.Paths[key] = v3DiscoveryEntry{ServerRelativeURL: serverRelativeURL(key, g.json.etag)}
	}
	b, err = json.Marshal(discovery)
	if err != nil {
		return nil, fmt.Errorf("marshal OpenAPI v3 root: %w", err)
	}
	d.v3Root = newRepresentation(b, mediaJSON)
	return d, nil
}

// swaggerProtobuf converts a Swagger 2.0 JSON document to gnostic protobuf.
func swaggerProtobuf(doc []byte) ([]byte, error) {
	parsed, err := openapi_v2.ParseDocument(doc)
	if err != nil {
		return nil, fmt.Errorf("parse OpenAPI v2 document: %w", err)
	}
	b, err := proto.Marshal(parsed)
	if err != nil {
		return nil, fmt.Errorf("marshal OpenAPI v2 protobuf: %w", err)
	}
	return b, nil
}

func serverRelativeURL(key, hash string) string {
	return "/openapi/v3/" + key + "?" + url.Values{"hash": {hash}}.Encode()
}

func v2Path(item pathItem) *v2PathItem {
	p := &v2PathItem{Parameters: v2Params(item.params)}
	for _, op := range item.ops {
		o := &v2Operation{
			Description: op.description,
			OperationID: op.id,
			Consumes:    []string{"*/*"},
			Produces:    op.mediaTypes(),
			Parameters:  v2Params(op.params),
			Responses:   map[string]v2Response{},
			Action:      op.action,
			GVK:         gvkExtension{Group: op.gvk.Group, Kind: op.gvk.Kind, Version: op.gvk.Version},
		}
		if op.patch {
			o.Consumes = patchContentTypes
		}
		if op.body != "" {
			o.Parameters = append([]v2Parameter{{
				Name: "body", In: "body", Required: true,
				Schema: &jsonSchema{Ref: swagger2.refPrefix() + op.body},
			}}, o.Parameters...)
		}
		for _, resp := range op.responses {
			o.Responses[resp.code] = v2Response{Description: statusText(resp.code), Schema: responseSchema(resp, swagger2)}
		}
		o.Responses["401"] = v2Response{Description: "Unauthorized"}
		setMethod(op.method, o, &p.Get, &p.Put, &p.Post, &p.Delete, &p.Patch)
	}
	return p
}

func v2Params(ps []parameter) []v2Parameter {
	out := make([]v2Parameter, 0, len(ps))
	for _, p := range ps {
		out = append(out, v2Parameter{
			Name: p.name, In: p.in, Description: p.description, Required: p.required,
			Type: p.typ, UniqueItems: true,
		})
	}
	return out
}

func v3Path(item pathItem) *v3PathItem {
	p := &v3PathItem{Parameters: v3Params(item.params)}
	for _, op := range item.ops {
		o := &v3Operation{
			Description: op.description,
			OperationID: op.id,
			Parameters:  v3Params(op.params),
			Responses:   map[string]v3Response{},
			Action:      op.action,
			GVK:         gvkExtension{Group: op.gvk.Group, Kind: op.gvk.Kind, Version: op.gvk.Version},
		}
		if op.body != "" {
			body := v3MediaType{Schema: &jsonSchema{Ref: openAPI3.refPrefix() + op.body}}
			o.RequestBody = &v3RequestBody{Content: map[string]v3MediaType{"*/*": body}, Required: true}
			if op.patch {
				o.RequestBody.Content = map[string]v3MediaType{}
				for _, ct := range patchContentTypes {
					o.RequestBody.Content[ct] = body
				}
			}
		}
		for _, resp := range op.responses {
			content := map[string]v3MediaType{}
			for _, mt := range op.mediaTypes() {
				content[mt] = v3MediaType{Schema: responseSchema(resp, openAPI3)}
			}
			o.Responses[resp.code] = v3Response{Description: statusText(resp.code), Content: content}
		}
		o.Responses["401"] = v3Response{Description: "Unauthorized"}
		setMethod(op.method, o, &p.Get, &p.Put, &p.Post, &p.Delete, &p.Patch)
	}
	return p
}

func v3Params(ps []parameter) []v3Parameter {
	out := make([]v3Parameter, 0, len(ps))
	for _, p := range ps {
		out = append(out, v3Parameter{
			Name: p.name, In: p.in, Description: p.description, Required: p.required,
			Schema: &jsonSchema{Type: p.typ},
		})
	}
	return out
}

func responseSchema(resp response, d dialect) *jsonSchema {
	if resp.ref == "" {
		return &jsonSchema{Type: "string"}
	}
	return &jsonSchema{Ref: d.refPrefix() + resp.ref}
}

// setMethod stores op in the slot of a path item named by method.
func setMethod[T any](method string, op *T, get, put, post, del, patch **T) {
	switch method {
	case "get":
		*get = op
	case "put":
		*put = op
	case "post":
		*post = op
	case "delete":
		*del = op
	case "patch":
		*patch = op
	}
}
