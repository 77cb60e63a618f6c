package validation_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/apiserver/defaults"
	"github.com/nodeplane/nodeplane/internal/apiserver/validation"
)

func validStorageClass() *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Provisioner: "nodeplane.io/shared-dir"}
	defaults.StorageClass(sc)
	return sc
}

func TestStorageClass(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(sc *storagev1.StorageClass)
		want   []want
	}{
		{"a defaulted class is valid", func(*storagev1.StorageClass) {}, nil},
		{"a class needs a provisioner", func(sc *storagev1.StorageClass) { sc.Provisioner = "" }, []want{required("provisioner")}},
		{"the provisioner must be a qualified name", func(sc *storagev1.StorageClass) { sc.Provisioner = "shared dir!" }, []want{invalid("provisioner")}},
		{"Recycle is not a class reclaim policy", func(sc *storagev1.StorageClass) {
			p := corev1.PersistentVolumeReclaimRecycle
			sc.ReclaimPolicy = &p
		}, []want{notSupported("reclaimPolicy")}},
		{"an unknown binding mode is rejected", func(sc *storagev1.StorageClass) {
			m := storagev1.VolumeBindingMode("Later")
			sc.VolumeBindingMode = &m
		}, []want{notSupported("volumeBindingMode")}},
		{"a parameter needs a key", func(sc *storagev1.StorageClass) { sc.Parameters = map[string]string{"": "x"} }, []want{invalid("parameters")}},
		{"an allowed topology term needs an expression", func(sc *storagev1.StorageClass) {
			sc.AllowedTopologies = []corev1.TopologySelectorTerm{{}}
		}, []want{required("allowedTopologies[0].matchLabelExpressions")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := validStorageClass()
			tt.mutate(sc)
			checkErrs(t, validation.StorageClass(sc), tt.want...)
		})
	}
}

func TestStorageClassUpdate(t *testing.T) {
	old := validStorageClass()
	old.ResourceVersion = "2"
	labelled := old.DeepCopy()
	labelled.Labels = map[string]string{"tier": "gold"}
	checkErrs(t, validation.StorageClassUpdate(labelled, old))

	moved := old.DeepCopy()
	moved.Provisioner = "other.example.com"
	checkErrs(t, validation.StorageClassUpdate(moved, old), forbidden("provisioner"))

	wffc := old.DeepCopy()
	m := storagev1.VolumeBindingWaitForFirstConsumer
	wffc.VolumeBindingMode = &m
	checkErrs(t, validation.StorageClassUpdate(wffc, old), invalid("volumeBindingMode"))
}

func TestBuiltInDriverNameIsTheOnlyCSINameWithASlash(t *testing.T) {
	pv := validPV()
	pv.Spec.CSI.Driver = "nodeplane.io/shared-dir"
	checkErrs(t, validation.PersistentVolume(pv))
	pv.Spec.CSI.Driver = "example.com/other"
	checkErrs(t, validation.PersistentVolume(pv), invalid("spec.csi.driver"))
	va := validVolumeAttachment()
	va.Spec.Attacher = "nodeplane.io/shared-dir"
	checkErrs(t, validation.VolumeAttachment(va))
}
