package gomarkers

import (
	"slices"
	"strings"
	"testing"
)

func TestScanReadsTheMarkers(t *testing.T) {
	table, err := Scan([]Module{{Path: "example.com/mod", Dir: "testdata/mod"}})
	if err != nil {
		t.Fatal(err)
	}
	thing, ok := table["example.com/mod/v1.Thing"]
	if !ok {
		t.Fatalf("no entry for Thing in %v", table)
	}
	tests := []struct {
		name string
		ok   bool
	}{
		{"a field without omitempty or +optional is required", slices.Contains(thing.Required, "plain")},
		{"omitempty makes a field optional", !slices.Contains(thing.Required, "omitted")},
		{"omitzero makes a field optional", !slices.Contains(thing.Required, "zero")},
		{"+optional makes a field optional", !slices.Contains(thing.Required, "marked")},
		{"+required overrides omitempty", slices.Contains(thing.Required, "forced")},
		{"+k8s:required overrides omitempty", slices.Contains(thing.Required, "declared")},
		{"an embedded struct with a JSON name is a field", slices.Contains(thing.Required, "metadata")},
		{"an inlined struct's fields belong to that struct", !slices.Contains(thing.Required, "kind") &&
			slices.Equal(table["example.com/mod/v1.Inline"].Required, []string{"kind"})},
		{"the required list is sorted", slices.IsSorted(thing.Required)},
		{"list type and map keys are read in order", thing.Fields["ports"].ListType == "map" &&
			slices.Equal(thing.Fields["ports"].ListMapKeys, []string{"name", "port"})},
		{"a map field's map type is read", thing.Fields["labels"].MapType == "atomic"},
		{"a struct type's +structType is its map type", thing.MapType == "atomic"},
		{"ignored and unexported fields are left out", !slices.Contains(thing.Required, "Hidden") && !slices.Contains(thing.Required, "lower")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.ok {
				t.Errorf("not so: %+v", thing)
			}
		})
	}
	if _, ok := table["example.com/mod/v1.Empty"]; ok {
		t.Error("a struct with nothing to say has an entry")
	}
}

func TestRenderIsGoSource(t *testing.T) {
	src, err := Render("p", "v", "header", map[string]Struct{
		"a.B": {MapType: "atomic", Required: []string{"x"}, Fields: map[string]Field{"l": {ListType: "map", ListMapKeys: []string{"k"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"a.B":`, `MapType: "atomic"`, `Required: []string{"x"}`, `ListMapKeys: []string{"k"}`} {
		if !strings.Contains(string(src), want) {
			t.Errorf("rendered source lacks %s:\n%s", want, src)
		}
	}
}
