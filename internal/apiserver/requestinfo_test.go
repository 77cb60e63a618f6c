package apiserver

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestParseResourcePath(t *testing.T) {
	namespaced := func(group, _, resource string) bool {
		switch group + "/" + resource {
		case "/pods", "/events", "coordination.k8s.io/leases":
			return true
		}
		return false
	}
	tests := []struct {
		name   string
		method string
		url    string
		want   requestInfo
		ok     bool
	}{
		{"a cluster-scoped list", "GET", "/api/v1/nodes", requestInfo{Verb: "list", Version: "v1", Resource: "nodes"}, true},
		{"a cluster-scoped get", "GET", "/api/v1/nodes/n1", requestInfo{Verb: "get", Version: "v1", Resource: "nodes", Name: "n1"}, true},
		{"a status subresource update", "PUT", "/api/v1/nodes/n1/status", requestInfo{Verb: "update", Version: "v1", Resource: "nodes", Name: "n1", Subresource: "status"}, true},
		{"a namespaced list", "GET", "/api/v1/namespaces/default/pods", requestInfo{Verb: "list", Version: "v1", Namespace: "default", Resource: "pods"}, true},
		{"a list across namespaces", "GET", "/api/v1/pods", requestInfo{Verb: "list", Version: "v1", Resource: "pods"}, true},
		{"a watch by query parameter", "GET", "/api/v1/pods?watch=true", requestInfo{Verb: "watch", Version: "v1", Resource: "pods"}, true},
		{"a watch by any true-ish value, as kube-apiserver reads booleans", "GET", "/api/v1/pods?watch=True", requestInfo{Verb: "watch", Version: "v1", Resource: "pods"}, true},
		{"watch=false is a list", "GET", "/api/v1/pods?watch=FALSE", requestInfo{Verb: "list", Version: "v1", Resource: "pods"}, true},
		{"watch=0 is a list", "GET", "/api/v1/pods?watch=0", requestInfo{Verb: "list", Version: "v1", Resource: "pods"}, true},
		{"a watch by legacy path", "GET", "/api/v1/watch/namespaces/default/pods", requestInfo{Verb: "watch", Version: "v1", Namespace: "default", Resource: "pods"}, true},
		{"an eviction", "POST", "/api/v1/namespaces/default/pods/p/eviction", requestInfo{Verb: "create", Version: "v1", Namespace: "default", Resource: "pods", Name: "p", Subresource: "eviction"}, true},
		{"a namespace itself", "GET", "/api/v1/namespaces/default", requestInfo{Verb: "get", Version: "v1", Resource: "namespaces", Name: "default"}, true},
		{"a namespace's status", "PUT", "/api/v1/namespaces/default/status", requestInfo{Verb: "update", Version: "v1", Resource: "namespaces", Name: "default", Subresource: "status"}, true},
		{"a group resource", "PATCH", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", requestInfo{Verb: "patch", Group: "coordination.k8s.io", Version: "v1", Namespace: "kube-node-lease", Resource: "leases", Name: "n1"}, true},
		{"a collection delete", "DELETE", "/api/v1/namespaces/default/pods", requestInfo{Verb: "deletecollection", Version: "v1", Namespace: "default", Resource: "pods"}, true},
		{"a path too deep is not a resource", "GET", "/api/v1/nodes/n1/status/x", requestInfo{}, false},
		{"a path without a resource is not one", "GET", "/apis/apps", requestInfo{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.url, nil)
			got, ok := parseResourcePath(r, namespaced)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v (%+v)", ok, tt.ok, got)
			}
			if ok && got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestNegotiate(t *testing.T) {
	tests := []struct {
		name      string
		accept    string
		transform bool
		wantType  string
		wantKind  outputKind
		ok        bool
	}{
		{"no Accept header means JSON", "", true, mediaJSON, outputObject, true},
		{"kubectl get asks for a Table first", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json", true, mediaJSON, outputTable, true},
		{"a Table is not offered where transforms are off", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json", false, mediaJSON, outputObject, true},
		{"client-go typed clients get protobuf", "application/vnd.kubernetes.protobuf,application/json", true, mediaProtobuf, outputObject, true},
		{"partial metadata as protobuf", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", true, mediaProtobuf, outputMetadata, true},
		{"YAML is served", "application/yaml", true, mediaYAML, outputObject, true},
		{"an unknown type alone is not acceptable", "text/html", true, "", outputObject, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/api/v1/nodes", nil)
			if tt.accept != "" {
				r.Header.Set("Accept", tt.accept)
			}
			f, ok := negotiate(r, tt.transform)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			if f.info.MediaType != tt.wantType || f.kind != tt.wantKind {
				t.Errorf("got %s kind %d, want %s kind %d", f.info.MediaType, f.kind, tt.wantType, tt.wantKind)
			}
		})
	}
}
