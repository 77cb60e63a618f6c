package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// The type a config file must declare.
const (
	APIVersion = "kubelet.config.k8s.io/v1beta1"
	Kind       = "KubeletConfiguration"
)

// ErrUnknownField is wrapped in the FieldError for a field that
// KubeletConfiguration does not have.
var ErrUnknownField = errors.New("unknown field")

// FieldError is a problem with one field of the configuration. Field is the
// field's name as written in the file (e.g. "maxPods"), with a map key or
// list index where one applies ("evictionHard[memory.available]").
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return fmt.Sprintf("%s: %v", e.Field, e.Err) }

func (e *FieldError) Unwrap() error { return e.Err }

// Load reads a KubeletConfiguration file, decodes it strictly (see Decode)
// and checks that it resolves (see Resolve), so that every problem in the
// file is reported when it is loaded, each naming its field.
func Load(path string) (*kubeletv1beta1.KubeletConfiguration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read kubelet config: %w", err)
	}
	cfg, err := Decode(data)
	if err == nil {
		_, err = Resolve(cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("kubelet config %s: %w", path, err)
	}
	return cfg, nil
}

// Decode parses a KubeletConfiguration from YAML (or JSON). apiVersion and
// kind must be APIVersion and Kind. Decoding is strict: field names are
// case-sensitive, a field the type does not have (at any depth) or a
// duplicated key is an error, and a value of the wrong shape (maxPods: many,
// nodeStatusUpdateFrequency: 10 parsecs) is an error naming its field. All
// field errors are reported together, each a *FieldError. Values are not
// validated here; Resolve does that.
func Decode(data []byte) (*kubeletv1beta1.KubeletConfiguration, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("parse YAML: %w", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(j, &fields); err != nil {
		return nil, fmt.Errorf("want a mapping of fields: %w", err)
	}
	if err := checkTypeMeta(fields); err != nil {
		return nil, err
	}

	cfg := &kubeletv1beta1.KubeletConfiguration{}
	cfg.APIVersion, cfg.Kind = APIVersion, Kind
	target := reflect.ValueOf(cfg).Elem()
	index := jsonFieldIndex(target.Type())
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if name == "apiVersion" || name == "kind" {
			continue
		}
		i, ok := index[name]
		if !ok {
			errs = append(errs, &FieldError{Field: name, Err: ErrUnknownField})
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(fields[name]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(target.Field(i).Addr().Interface()); err != nil {
			errs = append(errs, &FieldError{Field: name, Err: err})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cfg, nil
}

func checkTypeMeta(fields map[string]json.RawMessage) error {
	for _, want := range []struct{ field, value string }{{"apiVersion", APIVersion}, {"kind", Kind}} {
		raw, ok := fields[want.field]
		if !ok {
			return &FieldError{Field: want.field, Err: fmt.Errorf("missing, want %q", want.value)}
		}
		var got string
		if err := json.Unmarshal(raw, &got); err != nil || got != want.value {
			return &FieldError{Field: want.field, Err: fmt.Errorf("got %s, want %q", raw, want.value)}
		}
	}
	return nil
}

// jsonFieldIndex maps the JSON names of a struct's fields to their indexes,
// skipping embedded structs (TypeMeta) and fields JSON ignores.
func jsonFieldIndex(t reflect.Type) map[string]int {
	index := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous || !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		index[name] = i
	}
	return index
}
