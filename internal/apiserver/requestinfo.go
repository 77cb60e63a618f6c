package apiserver

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/nodeplane/nodeplane/internal/apiserver/authz"
)

// requestInfo is what a resource URL says.
type requestInfo struct {
	// Verb is the Kubernetes verb: get list watch create update patch delete deletecollection.
	Verb        string
	Group       string
	Version     string
	Namespace   string
	Resource    string
	Name        string
	Subresource string
}

// parseResourcePath parses /api/v1/... and /apis/<g>/<v>/... resource paths.
// isNamespaced answers whether a resource of the group-version is namespaced
// (to tell /namespaces/<ns>/<resource> from /namespaces/<name>/<subresource>).
func parseResourcePath(r *http.Request, isNamespaced func(group, version, resource string) bool) (requestInfo, bool) {
	parts := splitPath(r.URL.Path)
	var info requestInfo
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		info.Version = parts[1]
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		info.Group, info.Version = parts[1], parts[2]
		parts = parts[3:]
	default:
		return info, false
	}
	if len(parts) == 0 {
		return info, false
	}
	watchPath := false
	if parts[0] == "watch" {
		watchPath = true
		parts = parts[1:]
	}
	if len(parts) >= 3 && parts[0] == "namespaces" && isNamespaced(info.Group, info.Version, parts[2]) {
		info.Namespace = parts[1]
		parts = parts[2:]
	}
	if len(parts) == 0 || len(parts) > 3 {
		return info, false
	}
	info.Resource = parts[0]
	if len(parts) > 1 {
		info.Name = parts[1]
	}
	if len(parts) > 2 {
		info.Subresource = parts[2]
	}
	if info.Resource == "namespaces" && info.Name != "" && info.Namespace == "" {
		// /api/v1/namespaces/<name> is the namespace object itself.
		info.Namespace = ""
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		// Only a read can be a watch: the query of a write is not parsed
		// here (it is once, with the write's options). The watch parameter
		// is read as kube-apiserver reads a boolean parameter: present and
		// neither "0" nor "false" (any case) is true.
		isWatch := watchPath
		if v, ok := query(r)["watch"]; ok && len(v) > 0 {
			isWatch = isWatch || (v[0] != "0" && !strings.EqualFold(v[0], "false"))
		}
		switch {
		case info.Name == "" && isWatch:
			info.Verb = "watch"
		case info.Name == "":
			info.Verb = "list"
		case isWatch:
			info.Verb = "watch"
		default:
			info.Verb = "get"
		}
	case http.MethodPost:
		info.Verb = "create"
	case http.MethodPut:
		info.Verb = "update"
	case http.MethodPatch:
		info.Verb = "patch"
	case http.MethodDelete:
		if info.Name == "" {
			info.Verb = "deletecollection"
		} else {
			info.Verb = "delete"
		}
	default:
		info.Verb = strings.ToLower(r.Method)
	}
	return info, true
}

// query is r.URL.Query() without building an empty map for a request
// without a query (every agent heartbeat): a nil url.Values reads the same.
func query(r *http.Request) url.Values {
	if r.URL.RawQuery == "" {
		return nil
	}
	return r.URL.Query()
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// resourceAttributes describes a resource request for authorization.
func resourceAttributes(r *http.Request, info requestInfo) authz.Attributes {
	a := authz.Attributes{
		ResourceRequest: true,
		Verb:            info.Verb,
		APIGroup:        info.Group,
		Resource:        info.Resource,
		Subresource:     info.Subresource,
		Namespace:       info.Namespace,
		Name:            info.Name,
	}
	// Selectors matter only to requests that select (as in kube-apiserver's
	// request info); a node's heartbeat is an update and skips the parse.
	switch info.Verb {
	case "list", "watch", "deletecollection":
		q := query(r)
		a.FieldSelector, a.LabelSelector = q.Get("fieldSelector"), q.Get("labelSelector")
	}
	return a
}
