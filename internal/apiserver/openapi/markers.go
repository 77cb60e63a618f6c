package openapi

import "reflect"

//go:generate go run ./markergen -o markers_generated.go

// structMarkers is what the comment markers in a type's Go source say about
// it (see package gomarkers); sourceMarkers, generated from the k8s.io/api and
// k8s.io/apimachinery sources, maps import path + "." + type name to them.
type structMarkers struct {
	MapType  string
	Required []string
	Fields   map[string]fieldMarkers
}

// fieldMarkers is the merge behaviour of one field.
type fieldMarkers struct {
	ListType    string
	ListMapKeys []string
	MapType     string
}

// markersOf returns the markers of the named type t.
func markersOf(t reflect.Type) structMarkers {
	return sourceMarkers[t.PkgPath()+"."+t.Name()]
}
