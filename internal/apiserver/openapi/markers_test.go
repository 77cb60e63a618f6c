package openapi

import (
	"bytes"
	"os"
	"slices"
	"testing"

	"github.com/nodeplane/nodeplane/internal/apiserver/openapi/gomarkers"
)

// TestGeneratedMarkersAreCurrent regenerates the marker table from the
// k8s.io/api and k8s.io/apimachinery versions in go.mod: after a version bump
// `go generate ./internal/apiserver/openapi` must be run again.
func TestGeneratedMarkersAreCurrent(t *testing.T) {
	want, err := gomarkers.Generate()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("markers_generated.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("markers_generated.go is stale: run go generate ./internal/apiserver/openapi")
	}
}

func TestMarkersReachTheSchemas(t *testing.T) {
	defs := parsedV2(t, buildDocs(t)).Definitions
	tests := []struct {
		name  string
		check func() bool
	}{
		{"a container's name is required", func() bool {
			return slices.Equal(defs["io.k8s.api.core.v1.Container"].Required, []string{"name"})
		}},
		{"a taint's key and effect are required", func() bool {
			return slices.Equal(defs["io.k8s.api.core.v1.Taint"].Required, []string{"effect", "key"})
		}},
		{"a pod's containers are a list map keyed by name", func() bool {
			p := defs["io.k8s.api.core.v1.PodSpec"].Properties["containers"]
			return p.ListType == "map" && slices.Equal(p.ListMapKeys, []string{"name"})
		}},
		{"node selector terms are an atomic list", func() bool {
			return defs["io.k8s.api.core.v1.NodeSelector"].Properties["nodeSelectorTerms"].ListType == "atomic"
		}},
		{"a local object reference is an atomic struct", func() bool {
			return defs["io.k8s.api.core.v1.LocalObjectReference"].MapType == "atomic"
		}},
		{"an event requires its metadata (a named embedded field)", func() bool {
			return slices.Equal(defs["io.k8s.api.core.v1.Event"].Required, []string{"involvedObject", "metadata"})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.check() {
				t.Error("not so in the reflected schemas")
			}
		})
	}
}
