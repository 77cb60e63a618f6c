package config

import (
	"errors"
	"slices"
	"testing"
)

// fieldsOf returns the Field of every *FieldError in err's tree, in order.
func fieldsOf(err error) []string {
	var out []string
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if fe, ok := err.(*FieldError); ok {
			out = append(out, fe.Field)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// wantFields fails unless err names exactly the given fields.
func wantFields(t *testing.T, err error, want ...string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("error = %v, want none", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error, want errors naming %v", want)
	}
	if got := fieldsOf(err); !slices.Equal(got, want) {
		t.Fatalf("error %q names fields %q, want %q", err, got, want)
	}
}

func isUnknownField(err error) bool { return errors.Is(err, ErrUnknownField) }
