// Package gomarkers reads, from the Go source of the API type modules
// (k8s.io/api, k8s.io/apimachinery), the facts about each field that the Go
// types themselves do not carry: whether it is required, and how a list or
// map field merges (the "+listType", "+listMapKey", "+mapType" and
// "+structType" comment markers). The OpenAPI builder reflects the types at
// run time, where comments are gone; this package turns the markers into a
// generated Go table (markers_generated.go in the openapi package, written by
// ../markergen) that the builder consults.
//
// Which fields are required follows the rule the upstream OpenAPI generator
// applies: a field is optional when it carries "+optional" or "+k8s:optional",
// or its JSON tag has omitempty or omitzero, unless it carries "+required" or
// "+k8s:required".
package gomarkers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Field is what the markers say about one JSON field of a struct.
type Field struct {
	ListType    string   // "atomic", "set" or "map"
	ListMapKeys []string // for ListType "map"
	MapType     string   // "atomic" or "granular" (from +mapType or +structType)
}

// Struct is what the markers say about one struct type.
type Struct struct {
	MapType  string           // +structType / +mapType on the type: "atomic" or "granular"
	Required []string         // JSON names of the required fields, sorted
	Fields   map[string]Field // JSON name → markers, only fields that have some
}

// empty reports whether s says nothing.
func (s Struct) empty() bool {
	return s.MapType == "" && len(s.Required) == 0 && len(s.Fields) == 0
}

// Module is a Go module to scan: its import path and its directory.
type Module struct {
	Path    string
	Version string
	Dir     string
}

// Scan reads every non-test Go file of every package in the modules and
// returns the markers of each struct type, keyed by import path + "." +
// type name. Packages under testdata, vendor or internal directories are
// skipped; so are structs with nothing to say.
func Scan(mods []Module) (map[string]Struct, error) {
	out := map[string]Struct{}
	for _, m := range mods {
		err := filepath.WalkDir(m.Dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			switch d.Name() {
			case "testdata", "vendor", "internal":
				return filepath.SkipDir
			}
			rel, err := filepath.Rel(m.Dir, path)
			if err != nil {
				return err
			}
			importPath := m.Path
			if rel != "." {
				importPath += "/" + filepath.ToSlash(rel)
			}
			return scanDir(path, importPath, out)
		})
		if err != nil {
			return nil, fmt.Errorf("scan %s: %w", m.Path, err)
		}
	}
	return out, nil
}

func scanDir(dir, importPath string, out map[string]Struct) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				st, ok := ts.Type.(*ast.StructType)
				if !ok || ts.TypeParams != nil {
					continue
				}
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				s := structMarkers(doc, st)
				if !s.empty() {
					out[importPath+"."+ts.Name.Name] = s
				}
			}
		}
	}
	return nil
}

func structMarkers(doc *ast.CommentGroup, st *ast.StructType) Struct {
	tm := markers(doc)
	s := Struct{MapType: first(tm["structType"], tm["mapType"])}
	for _, f := range st.Fields.List {
		tag := ""
		if f.Tag != nil {
			tag, _ = strconv.Unquote(f.Tag.Value)
		}
		jsonTag := reflect.StructTag(tag).Get("json")
		name, opts, _ := strings.Cut(jsonTag, ",")
		switch {
		case jsonTag == "-":
			continue
		case len(f.Names) == 0 && name == "":
			continue // embedded and inlined: the embedded type has its own entry
		case len(f.Names) > 0 && !f.Names[0].IsExported():
			continue
		case name == "":
			name = f.Names[0].Name
		}
		fm := markers(f.Doc)
		optional := has(fm, "optional") || has(fm, "k8s:optional") ||
			hasOpt(opts, "omitempty") || hasOpt(opts, "omitzero")
		if has(fm, "required") || has(fm, "k8s:required") {
			optional = false
		}
		if !optional {
			s.Required = append(s.Required, name)
		}
		fld := Field{
			ListType:    first(fm["listType"]),
			ListMapKeys: fm["listMapKey"],
			MapType:     first(fm["mapType"], fm["structType"]),
		}
		if fld.ListType != "" || len(fld.ListMapKeys) > 0 || fld.MapType != "" {
			if s.Fields == nil {
				s.Fields = map[string]Field{}
			}
			s.Fields[name] = fld
		}
	}
	sort.Strings(s.Required)
	return s
}

// markers returns the "+name=value" comment markers of a doc comment; a
// marker without "=" has the value "".
func markers(doc *ast.CommentGroup) map[string][]string {
	m := map[string][]string{}
	if doc == nil {
		return m
	}
	for _, c := range doc.List {
		line := strings.TrimSpace(strings.TrimPrefix(c.Text, "//"))
		if !strings.HasPrefix(line, "+") {
			continue
		}
		key, val, _ := strings.Cut(line[1:], "=")
		m[key] = append(m[key], val)
	}
	return m
}

func has(m map[string][]string, key string) bool { _, ok := m[key]; return ok }

func hasOpt(opts, want string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// first returns the first value of the first marker present.
func first(vals ...[]string) string {
	for _, v := range vals {
		if len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// Render writes the table as Go source of package pkg: a map variable
// named varName of type map[string]structMarkers, whose element types
// (structMarkers, fieldMarkers) the package declares itself with the fields
// of Struct and Field. header is written first, as a comment.
func Render(pkg, varName, header string, table map[string]Struct) ([]byte, error) {
	keys := make([]string, 0, len(table))
	for k := range table {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by markergen. DO NOT EDIT.\n// %s\n\npackage %s\n\n", header, pkg)
	fmt.Fprintf(&b, "var %s = map[string]structMarkers{\n", varName)
	for _, k := range keys {
		s := table[k]
		fmt.Fprintf(&b, "%q: {", k)
		if s.MapType != "" {
			fmt.Fprintf(&b, "MapType: %q,", s.MapType)
		}
		if len(s.Required) > 0 {
			fmt.Fprintf(&b, "Required: %#v,", s.Required)
		}
		if len(s.Fields) > 0 {
			names := make([]string, 0, len(s.Fields))
			for n := range s.Fields {
				names = append(names, n)
			}
			sort.Strings(names)
			b.WriteString("Fields: map[string]fieldMarkers{")
			for _, n := range names {
				f := s.Fields[n]
				fmt.Fprintf(&b, "%q: {", n)
				if f.ListType != "" {
					fmt.Fprintf(&b, "ListType: %q,", f.ListType)
				}
				if len(f.ListMapKeys) > 0 {
					fmt.Fprintf(&b, "ListMapKeys: %#v,", f.ListMapKeys)
				}
				if f.MapType != "" {
					fmt.Fprintf(&b, "MapType: %q,", f.MapType)
				}
				b.WriteString("},\n")
			}
			b.WriteString("},")
		}
		b.WriteString("},\n")
	}
	b.WriteString("}\n")
	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("format generated source: %w", err)
	}
	return src, nil
}

// Modules are the modules whose types the OpenAPI documents describe.
var Modules = []string{"k8s.io/api", "k8s.io/apimachinery"}

// Locate asks the go command for the directories of Modules at the versions
// the current module requires (downloading them if needed).
func Locate() ([]Module, error) {
	args := append([]string{"list", "-m", "-json"}, Modules...)
	cmd := exec.Command("go", args...)
	cmd.Stderr = os.Stderr
	outb, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m: %w", err)
	}
	var mods []Module
	dec := json.NewDecoder(bytes.NewReader(outb))
	for dec.More() {
		var m struct{ Path, Version, Dir string }
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("go list -m: %w", err)
		}
		if m.Dir == "" {
			return nil, fmt.Errorf("module %s@%s is not downloaded (run go mod download)", m.Path, m.Version)
		}
		mods = append(mods, Module{Path: m.Path, Version: m.Version, Dir: m.Dir})
	}
	return mods, nil
}

// Generate locates the modules, scans them and renders the table for the
// openapi package.
func Generate() ([]byte, error) {
	mods, err := Locate()
	if err != nil {
		return nil, err
	}
	table, err := Scan(mods)
	if err != nil {
		return nil, err
	}
	versions := make([]string, 0, len(mods))
	for _, m := range mods {
		versions = append(versions, m.Path+"@"+m.Version)
	}
	return Render("openapi", "sourceMarkers", "Markers of "+strings.Join(versions, ", ")+".", table)
}
