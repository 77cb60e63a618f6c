// Package openapi builds and serves the OpenAPI documents of the nodeplane API
// server: Swagger 2.0 at /openapi/v2 (JSON and the gnostic protobuf form that
// kubectl 1.27–1.28 insist on) and OpenAPI 3.0 at /openapi/v3, one document per
// served group-version.
//
// The schemas are generated once, at start-up, by reflection over the Go types
// of k8s.io/api and k8s.io/apimachinery; descriptions come from each type's
// SwaggerDoc method. The documents follow the layout kube-apiserver publishes
// (definition names, x-kubernetes-* extensions, operation parameters) closely
// enough for kubectl's explain, client-side validation, field-validation
// detection and apply patch computation.
//
// The package owns only the documents and their HTTP handler. It knows nothing
// about storage, the registry or authorisation: callers describe the served
// resources in a []Resource and mount Handler.
package openapi

import (
	"errors"
	"fmt"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resource describes one served REST resource.
type Resource struct {
	// GVK is the kind of Object, e.g. {Version: "v1", Kind: "Node"}.
	GVK schema.GroupVersionKind
	// ListGVK is the kind of List. Zero means GVK with Kind+"List".
	ListGVK schema.GroupVersionKind
	// Resource is the lower-case plural used in paths, e.g. "nodes".
	Resource string
	// Namespaced resources live under /namespaces/{namespace}/ and also get
	// an all-namespaces list path.
	Namespaced bool
	// Object and List are zero values of the Go types, e.g. &corev1.Node{}
	// and &corev1.NodeList{}. List may be nil when Verbs has no list.
	Object runtime.Object
	List   runtime.Object
	// Verbs are the Kubernetes verbs served on the resource: get, list,
	// watch, create, update, patch, delete, deletecollection.
	Verbs []string
	// Subresources served under /{name}/.
	Subresources []Subresource
}

// Subresource describes one subresource such as nodes/status or pods/eviction.
type Subresource struct {
	// Name is the path segment, e.g. "status", "eviction", "binding", "log".
	Name string
	// GVK is the kind of Object. Zero means the parent's GVK (right for
	// status); eviction needs {Group: "policy", Version: "v1", Kind: "Eviction"}.
	GVK schema.GroupVersionKind
	// Object is the request and response body type. Nil means the
	// subresource returns plain text (pods/log).
	Object runtime.Object
	// Verbs served: get (GET), update (PUT), patch (PATCH), create (POST).
	Verbs []string
}

// Info is the document metadata.
type Info struct {
	// Title defaults to "Kubernetes".
	Title string
	// Version is the server version, e.g. "v1.33.0".
	Version string
}

// Documents holds every OpenAPI document, marshalled once in New. It is
// immutable and safe for concurrent use.
type Documents struct {
	v2JSON  representation
	v2Proto representation
	v3Root  representation
	v3      map[string]*groupVersionDoc // key: "api/v1", "apis/<group>/<version>"
}

// New reflects the Go types of resources and builds every document. It fails
// when a resource is incomplete or a type cannot be expressed as a schema.
func New(resources []Resource, info Info) (*Documents, error) {
	if info.Title == "" {
		info.Title = "Kubernetes"
	}
	rs, err := normalize(resources)
	if err != nil {
		return nil, err
	}
	r := newReflector()
	for _, res := range rs {
		if err := r.addRoots(res); err != nil {
			return nil, fmt.Errorf("resource %q: %w", res.Resource, err)
		}
	}
	if err := r.addMetaRoots(servedGroupVersions(rs)); err != nil {
		return nil, err
	}
	return assemble(r, rs, info)
}

// normalize checks resources and fills defaults, returning copies.
func normalize(resources []Resource) ([]Resource, error) {
	if len(resources) == 0 {
		return nil, errors.New("no resources")
	}
	out := make([]Resource, 0, len(resources))
	seen := map[string]bool{}
	for _, res := range resources {
		switch {
		case res.Resource == "":
			return nil, fmt.Errorf("resource of kind %q has no plural name", res.GVK.Kind)
		case res.GVK.Kind == "" || res.GVK.Version == "":
			return nil, fmt.Errorf("resource %q: incomplete GVK %v", res.Resource, res.GVK)
		case res.Object == nil:
			return nil, fmt.Errorf("resource %q: no Object", res.Resource)
		case slices.Contains(res.Verbs, "list") && res.List == nil:
			return nil, fmt.Errorf("resource %q: verb list without a List type", res.Resource)
		}
		key := res.GVK.GroupVersion().String() + "/" + res.Resource
		if seen[key] {
			return nil, fmt.Errorf("resource %q served twice in %s", res.Resource, res.GVK.GroupVersion())
		}
		seen[key] = true
		if res.ListGVK.Empty() {
			res.ListGVK = res.GVK.GroupVersion().WithKind(res.GVK.Kind + "List")
		}
		subs := make([]Subresource, 0, len(res.Subresources))
		for _, sub := range res.Subresources {
			if sub.Name == "" {
				return nil, fmt.Errorf("resource %q: subresource without a name", res.Resource)
			}
			if sub.GVK.Empty() {
				sub.GVK = res.GVK
			}
			subs = append(subs, sub)
		}
		res.Subresources = subs
		out = append(out, res)
	}
	return out, nil
}

// servedGroupVersions lists the distinct group-versions of resources in the
// order they first appear.
func servedGroupVersions(rs []Resource) []schema.GroupVersion {
	var gvs []schema.GroupVersion
	for _, res := range rs {
		if gv := res.GVK.GroupVersion(); !slices.Contains(gvs, gv) {
			gvs = append(gvs, gv)
		}
	}
	return gvs
}

// goType is the struct type behind a runtime.Object pointer.
func goType(obj runtime.Object) reflect.Type {
	t := reflect.TypeOf(obj)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}
