package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The API server runs no metadata check of its own: each kind's validator
// must. Core events, lenient otherwise, still validate their metadata.
func TestCoreEventsValidateTheirMetadata(t *testing.T) {
	good := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "n1.1", Namespace: "default", ResourceVersion: "5"}, InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "n1"}}
	tests := []struct {
		name      string
		errs      func() field.ErrorList
		wantField string
	}{
		{"a name with a slash is refused on create", func() field.ErrorList {
			e := good.DeepCopy()
			e.Name = "a/b"
			return Event(e)
		}, "metadata.name"},
		{"a bad label key is refused on create", func() field.ErrorList {
			e := good.DeepCopy()
			e.Labels = map[string]string{"-bad-": "x"}
			return Event(e)
		}, "metadata.labels"},
		{"renaming an event is refused on update", func() field.ErrorList {
			e := good.DeepCopy()
			e.Name = "n1.2"
			return EventUpdate(e, good)
		}, "metadata.name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := tt.errs()
			found := false
			for _, e := range errs {
				if e.Field == tt.wantField {
					found = true
				}
			}
			if !found {
				t.Errorf("got %v, want an error at %s", errs, tt.wantField)
			}
		})
	}
	if errs := Event(good); len(errs) != 0 {
		t.Errorf("a valid event: %v", errs)
	}
}
