package validation

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// fieldDiff lists the fields in which a and b (values of the same type)
// differ, one "-" line with the old value and one "+" line with the new value
// per field, each named by its Go field path (RestartPolicy,
// Containers[0].Image), the way kube's go-cmp diff names them in forbidden
// update messages.
//
// It is written here instead of calling go-cmp because go-cmp's reporter
// looks up methods by index through reflection, and a binary that can reach
// such a call keeps every exported method of every type the linker sees:
// linking go-cmp into the server costs megabytes (docs/install.md, binary
// sizes). fieldDiff only reads fields.
func fieldDiff(a, b any) string {
	var sb strings.Builder
	diffValue(&sb, "", reflect.ValueOf(a), reflect.ValueOf(b))
	return sb.String()
}

func diffValue(sb *strings.Builder, path string, a, b reflect.Value) {
	if !a.IsValid() || !b.IsValid() || a.Type() != b.Type() {
		if a.IsValid() != b.IsValid() || (a.IsValid() && !reflect.DeepEqual(a.Interface(), b.Interface())) {
			writeLeaf(sb, path, a, b)
		}
		return
	}
	if a.CanInterface() && reflect.DeepEqual(a.Interface(), b.Interface()) {
		return
	}
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			writeLeaf(sb, path, a, b)
			return
		}
		diffValue(sb, path, a.Elem(), b.Elem())
	case reflect.Struct:
		// A struct with hidden state (resource.Quantity, time.Time) is one
		// value: its exported fields alone may not tell the difference.
		for i := range a.NumField() {
			if !a.Type().Field(i).IsExported() {
				writeLeaf(sb, path, a, b)
				return
			}
		}
		for i := range a.NumField() {
			name := a.Type().Field(i).Name
			if path != "" {
				name = path + "." + name
			}
			diffValue(sb, name, a.Field(i), b.Field(i))
		}
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() || (a.Kind() == reflect.Slice && a.IsNil() != b.IsNil()) {
			writeLeaf(sb, path, a, b)
			return
		}
		for i := range a.Len() {
			diffValue(sb, fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i))
		}
	case reflect.Map:
		keys := map[string]reflect.Value{}
		for _, k := range append(a.MapKeys(), b.MapKeys()...) {
			keys[fmt.Sprintf("%#v", k.Interface())] = k
		}
		names := make([]string, 0, len(keys))
		for name := range keys {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			k := keys[name]
			diffValue(sb, fmt.Sprintf("%s[%s]", path, name), a.MapIndex(k), b.MapIndex(k))
		}
	default:
		writeLeaf(sb, path, a, b)
	}
}

func writeLeaf(sb *strings.Builder, path string, a, b reflect.Value) {
	if path == "" {
		path = "(value)"
	}
	fmt.Fprintf(sb, "-\t%s: %s\n+\t%s: %s\n", path, leafString(a), path, leafString(b))
}

func leafString(v reflect.Value) string {
	switch {
	case !v.IsValid():
		return "<none>"
	case (v.Kind() == reflect.Pointer || v.Kind() == reflect.Slice || v.Kind() == reflect.Map) && v.IsNil():
		return "nil"
	case !v.CanInterface():
		return "<unexported>"
	}
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	// A Stringer (resource.Quantity, metav1.Time) prints as kube shows it.
	if s, ok := v.Interface().(fmt.Stringer); ok {
		return s.String()
	}
	// Map values are not addressable: copy to reach pointer-receiver methods.
	p := reflect.New(v.Type())
	p.Elem().Set(v)
	if s, ok := p.Interface().(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%#v", v.Interface())
}
