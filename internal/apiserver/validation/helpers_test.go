package validation_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// want is one expected error: its type and its field path.
type want struct {
	typ   field.ErrorType
	field string
}

func invalid(f string) want      { return want{field.ErrorTypeInvalid, f} }
func required(f string) want     { return want{field.ErrorTypeRequired, f} }
func forbidden(f string) want    { return want{field.ErrorTypeForbidden, f} }
func notSupported(f string) want { return want{field.ErrorTypeNotSupported, f} }
func duplicate(f string) want    { return want{field.ErrorTypeDuplicate, f} }
func notFound(f string) want     { return want{field.ErrorTypeNotFound, f} }
func tooLong(f string) want      { return want{field.ErrorTypeTooLong, f} }

// checkErrs compares got with wants as multisets of (type, field), so map
// iteration order inside a validator cannot make a test flaky.
func checkErrs(t *testing.T, got field.ErrorList, wants ...want) {
	t.Helper()
	key := func(typ field.ErrorType, f string) string { return fmt.Sprintf("%s %s", f, typ) }
	var g, w []string
	for _, e := range got {
		g = append(g, key(e.Type, e.Field))
	}
	for _, e := range wants {
		w = append(w, key(e.typ, e.field))
	}
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Errorf("got errors\n  %s\nwant\n  %s\nfull errors:\n  %s", strings.Join(g, "\n  "), strings.Join(w, "\n  "), errorLines(got))
	}
}

// checkDetail asserts that some error at fieldPath has a detail starting
// with prefix.
func checkDetail(t *testing.T, got field.ErrorList, fieldPath, prefix string) {
	t.Helper()
	for _, e := range got {
		if e.Field == fieldPath && strings.HasPrefix(e.Detail, prefix) {
			return
		}
	}
	t.Errorf("no error at %s with detail %q; got:\n  %s", fieldPath, prefix, errorLines(got))
}

func errorLines(errs field.ErrorList) string {
	var lines []string
	for _, e := range errs {
		lines = append(lines, e.Error())
	}
	return strings.Join(lines, "\n  ")
}

func ptr[T any](v T) *T { return &v }
