package openapi

import (
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// pathItem is one URL template with its operations, in dialect-neutral form.
type pathItem struct {
	path   string
	params []parameter // path-level: {namespace}, {name}, pretty
	ops    []operation
}

// operation is one HTTP method on a path.
type operation struct {
	method      string // get, put, post, delete, patch
	id          string // operationId, e.g. listCoreV1NamespacedPod
	description string
	action      string // x-kubernetes-action: get, list, post, put, patch, delete, deletecollection
	gvk         schema.GroupVersionKind
	params      []parameter // query parameters
	body        string      // definition of the request body; "" for none
	patch       bool        // the body is a patch in one of patchContentTypes
	responses   []response
	text        bool // responses are text/plain
}

type response struct {
	code string
	ref  string // definition of the body; "" for a plain string
}

type parameter struct {
	name        string
	in          string // path or query
	typ         string // string, integer, boolean
	description string
	required    bool
}

// patchContentTypes are the PATCH request bodies the server accepts; kubectl
// reads them from the PATCH requestBody.
var patchContentTypes = []string{
	"application/apply-patch+yaml",
	"application/json-patch+json",
	"application/merge-patch+json",
	"application/strategic-merge-patch+json",
}

var (
	statusDef        = definitionName(reflect.TypeFor[metav1.Status]())
	deleteOptionsDef = definitionName(reflect.TypeFor[metav1.DeleteOptions]())
	patchDef         = definitionName(reflect.TypeFor[metav1.Patch]())
)

func queryParam(name, typ, description string) parameter {
	return parameter{name: name, in: "query", typ: typ, description: description}
}

var (
	paramPretty       = queryParam("pretty", "string", "If 'true', then the output is pretty printed.")
	paramDryRun       = queryParam("dryRun", "string", "When present, indicates that modifications should not be persisted. The only valid value is All: all dry-run stages are processed.")
	paramFieldManager = queryParam("fieldManager", "string", "A name associated with the actor or entity making these changes, at most 128 printable characters.")
	paramFieldValid   = queryParam("fieldValidation", "string", "How the server handles unknown or duplicate fields in the request body: Ignore (drop them silently), Warn (drop them and return a warning, the default) or Strict (fail the request).")
	paramForce        = queryParam("force", "boolean", "Force apply requests to take ownership of conflicting fields. Must be unset for non-apply patch requests.")

	writeParams = []parameter{paramDryRun, paramFieldManager, paramFieldValid}

	listParams = []parameter{
		queryParam("continue", "string", "The continue token from a previous, truncated list response."),
		queryParam("fieldSelector", "string", "A selector to restrict the list of returned objects by their fields. Defaults to everything."),
		queryParam("labelSelector", "string", "A selector to restrict the list of returned objects by their labels. Defaults to everything."),
		queryParam("limit", "integer", "The maximum number of objects to return in one list call; more may be fetched with continue."),
		queryParam("resourceVersion", "string", "Constrains which resource versions the request may be served from. Defaults to unset (most recent)."),
		queryParam("resourceVersionMatch", "string", "How resourceVersion is applied to list calls: Exact or NotOlderThan."),
	}
	watchParams = []parameter{
		queryParam("allowWatchBookmarks", "boolean", "Requests watch events of type BOOKMARK. Servers may ignore it."),
		queryParam("sendInitialEvents", "boolean", "With watch=true, starts the watch stream with synthetic ADDED events for the current state, ended by a bookmark annotated k8s.io/initial-events-end."),
		queryParam("timeoutSeconds", "integer", "Timeout for the list/watch call, regardless of activity."),
		queryParam("watch", "boolean", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications."),
	}
	deleteParams = []parameter{
		paramDryRun,
		queryParam("gracePeriodSeconds", "integer", "The duration in seconds before the object should be deleted; zero means delete immediately."),
		queryParam("ignoreStoreReadErrorWithClusterBreakingPotential", "boolean", "Deletes a corrupt object that cannot be read from storage. Dangerous; off by default."),
		queryParam("orphanDependents", "boolean", "Deprecated: use propagationPolicy."),
		queryParam("propagationPolicy", "string", "Whether and how garbage collection is performed: Orphan, Background or Foreground."),
	}
	logParams = []parameter{
		queryParam("container", "string", "The container to stream logs of. Defaults to the only container if there is one."),
		queryParam("follow", "boolean", "Follow the log stream of the pod."),
		queryParam("insecureSkipTLSVerifyBackend", "boolean", "Skip verifying the serving certificate of the backend that provides the logs."),
		queryParam("limitBytes", "integer", "The number of bytes to read from the server before terminating the log output."),
		queryParam("previous", "boolean", "Return the logs of the previous, terminated container."),
		queryParam("sinceSeconds", "integer", "A relative time in seconds before the current time from which to show logs."),
		queryParam("stream", "string", "The log stream to return: All, Stdout or Stderr."),
		queryParam("tailLines", "integer", "The number of lines from the end of the logs to show."),
		queryParam("timestamps", "boolean", "Prefix every line of log output with an RFC 3339 timestamp."),
	}
)

func pathParam(name, description string) parameter {
	return parameter{name: name, in: "path", typ: "string", description: description, required: true}
}

// groupVersionPath is the URL prefix of gv: /api/v1 or /apis/<group>/<version>.
func groupVersionPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "/api/" + gv.Version
	}
	return "/apis/" + gv.Group + "/" + gv.Version
}

// operationStem is the middle of kube's operation ids: CoreV1, CoordinationV1,
// StorageV1, PolicyV1, EventsV1 ...
func operationStem(gv schema.GroupVersion) string {
	group := strings.TrimSuffix(gv.Group, ".k8s.io")
	if group == "" {
		group = "core"
	}
	var b strings.Builder
	for part := range strings.SplitSeq(group, ".") {
		b.WriteString(upperFirst(part))
	}
	b.WriteString(upperFirst(gv.Version))
	return b.String()
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// resourcePaths returns the path items serving res.
func resourcePaths(res Resource, defOf func(runtime.Object) string) []pathItem {
	gv := res.GVK.GroupVersion()
	stem := operationStem(gv)
	kind := res.GVK.Kind
	objDef := defOf(res.Object)
	has := func(verb string) bool { return slices.Contains(res.Verbs, verb) }

	scope, prefix := "", groupVersionPath(gv)
	var scopeParams []parameter
	if res.Namespaced {
		scope = "Namespaced"
		prefix += "/namespaces/{namespace}"
		scopeParams = []parameter{pathParam("namespace", "object name and auth scope, such as for teams and projects")}
	}
	collection := prefix + "/" + res.Resource
	item := collection + "/{name}"
	nameParam := pathParam("name", "name of the "+kind)

	var items []pathItem
	add := func(path string, params []parameter, ops []operation) {
		if len(ops) > 0 {
			items = append(items, pathItem{path: path, params: params, ops: ops})
		}
	}

	list := func(id string) operation {
		params := slices.Clone(listParams)
		if has("watch") {
			params = append(params, watchParams...)
		}
		return operation{
			method: "get", id: id, action: "list", gvk: res.GVK,
			description: "list or watch objects of kind " + kind,
			params:      sortedParams(params),
			responses:   []response{{code: "200", ref: defOf(res.List)}},
		}
	}

	var collOps []operation
	if has("list") {
		collOps = append(collOps, list("list"+stem+scope+kind))
	}
	if has("create") {
		collOps = append(collOps, operation{
			method: "post", id: "create" + stem + scope + kind, action: "post", gvk: res.GVK,
			description: "create a " + kind,
			params:      sortedParams(writeParams), body: objDef,
			responses: []response{{code: "200", ref: objDef}, {code: "201", ref: objDef}, {code: "202", ref: objDef}},
		})
	}
	if has("deletecollection") {
		collOps = append(collOps, operation{
			method: "delete", id: "delete" + stem + "Collection" + scope + kind, action: "deletecollection", gvk: res.GVK,
			description: "delete collection of " + kind,
			params:      sortedParams(slices.Concat(listParams, deleteParams)), body: deleteOptionsDef,
			responses: []response{{code: "200", ref: statusDef}},
		})
	}
	add(collection, slices.Concat(scopeParams, []parameter{paramPretty}), collOps)

	if res.Namespaced && has("list") {
		add(groupVersionPath(gv)+"/"+res.Resource, []parameter{paramPretty},
			[]operation{list("list" + stem + kind + "ForAllNamespaces")})
	}

	var itemOps []operation
	if has("get") {
		itemOps = append(itemOps, operation{
			method: "get", id: "read" + stem + scope + kind, action: "get", gvk: res.GVK,
			description: "read the specified " + kind,
			responses:   []response{{code: "200", ref: objDef}},
		})
	}
	if has("update") {
		itemOps = append(itemOps, operation{
			method: "put", id: "replace" + stem + scope + kind, action: "put", gvk: res.GVK,
			description: "replace the specified " + kind,
			params:      sortedParams(writeParams), body: objDef,
			responses: []response{{code: "200", ref: objDef}, {code: "201", ref: objDef}},
		})
	}
	if has("patch") {
		itemOps = append(itemOps, operation{
			method: "patch", id: "patch" + stem + scope + kind, action: "patch", gvk: res.GVK,
			description: "partially update the specified " + kind,
			params:      sortedParams(append(slices.Clone(writeParams), paramForce)), body: patchDef, patch: true,
			responses: []response{{code: "200", ref: objDef}, {code: "201", ref: objDef}},
		})
	}
	if has("delete") {
		itemOps = append(itemOps, operation{
			method: "delete", id: "delete" + stem + scope + kind, action: "delete", gvk: res.GVK,
			description: "delete a " + kind,
			params:      sortedParams(deleteParams), body: deleteOptionsDef,
			responses: []response{{code: "200", ref: statusDef}, {code: "202", ref: statusDef}},
		})
	}
	itemParams := slices.Concat([]parameter{nameParam}, scopeParams, []parameter{paramPretty})
	add(item, itemParams, itemOps)

	for _, sub := range res.Subresources {
		add(item+"/"+sub.Name, itemParams, subresourceOps(sub, stem+scope+kind+upperFirst(sub.Name), kind, defOf))
	}
	return items
}

// subresourceOps returns the operations of one subresource; idSuffix is the
// operation id without its verb, e.g. CoreV1NamespacedPodEviction.
func subresourceOps(sub Subresource, idSuffix, parentKind string, defOf func(runtime.Object) string) []operation {
	what := sub.Name + " of the specified " + parentKind
	var def string
	var ok []response
	if sub.Object != nil {
		def = defOf(sub.Object)
		ok = []response{{code: "200", ref: def}}
	} else {
		ok = []response{{code: "200"}}
	}
	var ops []operation
	for _, verb := range sub.Verbs {
		op := operation{gvk: sub.GVK, responses: ok, text: sub.Object == nil}
		switch verb {
		case "get":
			op.method, op.action, op.id, op.description = "get", "get", "read"+idSuffix, "read "+what
			if sub.Name == "log" {
				op.params = logParams
			}
		case "update":
			op.method, op.action, op.id, op.description = "put", "put", "replace"+idSuffix, "replace "+what
			op.params, op.body = sortedParams(writeParams), def
			op.responses = append(slices.Clone(ok), response{code: "201", ref: def})
		case "patch":
			op.method, op.action, op.id, op.description = "patch", "patch", "patch"+idSuffix, "partially update "+what
			op.params, op.body, op.patch = sortedParams(append(slices.Clone(writeParams), paramForce)), patchDef, true
			op.responses = append(slices.Clone(ok), response{code: "201", ref: def})
		case "create":
			op.method, op.action, op.id, op.description = "post", "post", "create"+idSuffix, "create "+what
			op.params, op.body = sortedParams(writeParams), def
			op.responses = append(slices.Clone(ok), response{code: "201", ref: def}, response{code: "202", ref: def})
		default:
			continue
		}
		ops = append(ops, op)
	}
	return ops
}

func sortedParams(ps []parameter) []parameter {
	out := slices.Clone(ps)
	slices.SortFunc(out, func(a, b parameter) int { return strings.Compare(a.name, b.name) })
	return slices.CompactFunc(out, func(a, b parameter) bool { return a.name == b.name })
}

// mediaTypes lists what an operation's responses may be encoded as.
func (op operation) mediaTypes() []string {
	switch {
	case op.text:
		return []string{"text/plain", "application/json", "application/yaml", "application/vnd.kubernetes.protobuf"}
	case op.action == "list":
		return []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf",
			"application/json;stream=watch", "application/vnd.kubernetes.protobuf;stream=watch"}
	}
	return []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf"}
}

func statusText(code string) string {
	n, err := strconv.Atoi(code)
	if err != nil {
		return code
	}
	return http.StatusText(n)
}
