package admission

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestStorageObjectInUseProtection(t *testing.T) {
	claims := schema.GroupResource{Resource: "persistentvolumeclaims"}
	volumes := schema.GroupResource{Resource: "persistentvolumes"}
	claim := func(f ...string) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{}
		c.Finalizers = f
		return c
	}
	volume := func(f ...string) *corev1.PersistentVolume {
		v := &corev1.PersistentVolume{}
		v.Finalizers = f
		return v
	}
	finalizers := func(o runtime.Object) []string {
		switch o := o.(type) {
		case *corev1.PersistentVolumeClaim:
			return o.Finalizers
		case *corev1.PersistentVolume:
			return o.Finalizers
		}
		return nil
	}
	tests := []struct {
		name string
		a    Attributes
		want []string
	}{
		{"a new claim gets pvc-protection", Attributes{Operation: Create, Resource: claims, Object: claim()}, []string{PVCProtectionFinalizer}},
		{"a new claim keeps its finalizers and gets pvc-protection once", Attributes{Operation: Create, Resource: claims, Object: claim("x", PVCProtectionFinalizer)}, []string{"x", PVCProtectionFinalizer}},
		{"a new volume gets pv-protection", Attributes{Operation: Create, Resource: volumes, Object: volume("x")}, []string{"x", PVProtectionFinalizer}},
		{"an update that removes the finalizer is left alone", Attributes{Operation: Update, Resource: claims, Object: claim()}, nil},
		{"a status create is left alone", Attributes{Operation: Create, Resource: claims, Subresource: "status", Object: claim()}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := (StorageObjectInUseProtection{}).Admit(context.Background(), tt.a); err != nil {
				t.Fatal(err)
			}
			if got := finalizers(tt.a.Object); !slices.Equal(got, tt.want) {
				t.Errorf("finalizers %v, want %v", got, tt.want)
			}
		})
	}
}
