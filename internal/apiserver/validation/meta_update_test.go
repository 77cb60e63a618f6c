package validation

import (
	"reflect"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// storedLeaseMeta is a node Lease's metadata as the server stores it.
func storedLeaseMeta() metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: "node-1", Namespace: "kube-node-lease", UID: "6b1c0a8e-1",
		ResourceVersion: "41", Generation: 0,
		CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)),
		OwnerReferences:   []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node-1", UID: "a1"}},
	}
}

// TestMetadataUpdateIsUpstreams: the lean metadata check of an update
// returns exactly upstream's ValidateObjectMetaUpdate errors, on updates
// that keep the immutable fields and on every kind of invalid update.
func TestMetadataUpdateIsUpstreams(t *testing.T) {
	deleting := metav1.NewTime(time.Date(2026, 11, 26, 11, 0, 0, 0, time.UTC))
	tests := []struct {
		name    string
		change  func(meta, old *metav1.ObjectMeta)
		invalid bool
	}{
		{"an unchanged renewal is valid", func(_, _ *metav1.ObjectMeta) {}, false},
		{"new valid labels and annotations are valid", func(m, _ *metav1.ObjectMeta) {
			m.Labels = map[string]string{"zone": "a"}
			m.Annotations = map[string]string{"example.com/x": "y"}
		}, false},
		{"the same creation time in another zone is unchanged", func(m, _ *metav1.ObjectMeta) {
			m.CreationTimestamp = metav1.NewTime(m.CreationTimestamp.In(time.FixedZone("x", 3600)))
		}, false},
		{"a higher generation is valid", func(m, _ *metav1.ObjectMeta) { m.Generation = 3 }, false},
		{"an invalid label is refused", func(m, _ *metav1.ObjectMeta) { m.Labels = map[string]string{"a b": "c"} }, true},
		{"an invalid label value is refused", func(m, _ *metav1.ObjectMeta) { m.Labels = map[string]string{"a": "c d"} }, true},
		{"an invalid annotation key is refused", func(m, _ *metav1.ObjectMeta) { m.Annotations = map[string]string{"-x": "y"} }, true},
		{"annotations over the size limit are refused", func(m, _ *metav1.ObjectMeta) {
			m.Annotations = map[string]string{"big": strings.Repeat("x", apivalidation.TotalAnnotationSizeLimitB)}
		}, true},
		{"an owner reference without a uid is refused", func(m, _ *metav1.ObjectMeta) { m.OwnerReferences[0].UID = "" }, true},
		{"two controller owners are refused", func(m, _ *metav1.ObjectMeta) {
			m.OwnerReferences = []metav1.OwnerReference{
				{APIVersion: "v1", Kind: "Node", Name: "a", UID: "1", Controller: ptr.To(true)},
				{APIVersion: "v1", Kind: "Node", Name: "b", UID: "2", Controller: ptr.To(true)},
			}
		}, true},
		{"managed fields without an operation are refused", func(m, _ *metav1.ObjectMeta) {
			m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "x", FieldsType: "FieldsV1"}}
		}, true},
		{"a changed name is refused", func(m, _ *metav1.ObjectMeta) { m.Name = "node-2" }, true},
		{"a changed namespace is refused", func(m, _ *metav1.ObjectMeta) { m.Namespace = "default" }, true},
		{"a changed uid is refused", func(m, _ *metav1.ObjectMeta) { m.UID = "other" }, true},
		{"a changed creation time is refused", func(m, _ *metav1.ObjectMeta) {
			m.CreationTimestamp = metav1.NewTime(m.CreationTimestamp.Add(time.Second))
		}, true},
		{"a new deletion time is refused", func(m, _ *metav1.ObjectMeta) { m.DeletionTimestamp = &deleting }, true},
		{"a changed deletion grace period is refused", func(m, _ *metav1.ObjectMeta) { m.DeletionGracePeriodSeconds = ptr.To[int64](30) }, true},
		{"a missing resourceVersion is refused", func(m, _ *metav1.ObjectMeta) { m.ResourceVersion = "" }, true},
		{"a decremented generation is refused", func(m, o *metav1.ObjectMeta) { o.Generation, m.Generation = 2, 1 }, true},
		{"a negative generation is refused", func(m, o *metav1.ObjectMeta) { o.Generation, m.Generation = -2, -1 }, true},
		{"a finalizer added to an object being deleted is refused", func(m, o *metav1.ObjectMeta) {
			o.DeletionTimestamp, m.DeletionTimestamp = &deleting, &deleting
			m.Finalizers = []string{"example.com/f"}
		}, true},
		{"an unchanged object being deleted is valid", func(m, o *metav1.ObjectMeta) {
			o.DeletionTimestamp, m.DeletionTimestamp = &deleting, &deleting
			o.DeletionGracePeriodSeconds, m.DeletionGracePeriodSeconds = ptr.To[int64](0), ptr.To[int64](0)
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			meta, old := storedLeaseMeta(), storedLeaseMeta()
			tt.change(&meta, &old)
			want := apivalidation.ValidateObjectMetaUpdate(&meta, &old, metadataPath)
			got := metadataUpdate(&meta, &old)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("metadataUpdate = %v, want upstream's %v", got, want)
			}
			if (len(got) > 0) != tt.invalid {
				t.Fatalf("metadataUpdate = %v, want invalid=%v", got, tt.invalid)
			}
			// The Lease update check reports the same.
			lease := &coordinationv1.Lease{ObjectMeta: meta}
			oldLease := &coordinationv1.Lease{ObjectMeta: old}
			if errs := LeaseUpdate(lease, oldLease); !reflect.DeepEqual(errs, want) {
				t.Fatalf("LeaseUpdate = %v, want %v", errs, want)
			}
		})
	}
}

// TestLeaseRenewalValidationAllocatesOnlyForOwnerReferences: a renewal
// that keeps its metadata is validated with one allocation, the path of its
// one owner reference that upstream's owner reference check builds
// (upstream's whole metadata check builds eleven more paths).
func TestLeaseRenewalValidationAllocatesOnlyForOwnerReferences(t *testing.T) {
	old := &coordinationv1.Lease{ObjectMeta: storedLeaseMeta()}
	lease := old.DeepCopy()
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](40)
	if got := testing.AllocsPerRun(100, func() {
		if errs := LeaseUpdate(lease, old); len(errs) > 0 {
			t.Fatal(errs)
		}
	}); got != 1 {
		t.Fatalf("LeaseUpdate of a renewal allocates %v times, want 1", got)
	}
}
