package validation_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/apiserver/defaults"
	"github.com/nodeplane/nodeplane/internal/apiserver/validation"
)

func validVolumeAttachment() *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "csi-0123abcd"},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: "ebs.csi.aws.com",
			NodeName: "node-1",
			Source:   storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr("pv-1")},
		},
	}
}

func TestVolumeAttachment(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(va *storagev1.VolumeAttachment)
		want   []want
	}{
		{"an attachment of a named PV is valid", func(*storagev1.VolumeAttachment) {}, nil},
		{"an attachment needs an attacher", func(va *storagev1.VolumeAttachment) { va.Spec.Attacher = "" }, []want{required("spec.attacher"), required("spec.attacher"), invalid("spec.attacher")}},
		{"the attacher must be a DNS subdomain driver name", func(va *storagev1.VolumeAttachment) { va.Spec.Attacher = "ebs csi" }, []want{invalid("spec.attacher")}},
		{"the attacher is at most 63 characters", func(va *storagev1.VolumeAttachment) {
			va.Spec.Attacher = strings.Repeat("a", 64)
		}, []want{tooLong("spec.attacher")}},
		{"an attachment needs a node name", func(va *storagev1.VolumeAttachment) { va.Spec.NodeName = "" }, []want{invalid("spec.nodeName")}},
		{"an attachment needs a source", func(va *storagev1.VolumeAttachment) { va.Spec.Source = storagev1.VolumeAttachmentSource{} }, []want{required("spec.source")}},
		{"an attachment may not have two sources", func(va *storagev1.VolumeAttachment) {
			va.Spec.Source.InlineVolumeSpec = &corev1.PersistentVolumeSpec{}
		}, []want{forbidden("spec.source")}},
		{"an empty PV name is rejected", func(va *storagev1.VolumeAttachment) {
			va.Spec.Source.PersistentVolumeName = ptr("")
		}, []want{required("spec.source.persistentVolumeName"), invalid("spec.source.persistentVolumeName")}},
		{"an inline spec must be CSI without capacity", func(va *storagev1.VolumeAttachment) {
			va.Spec.Source = storagev1.VolumeAttachmentSource{InlineVolumeSpec: &corev1.PersistentVolumeSpec{
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				PersistentVolumeSource: corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "/x"}},
			}}
		}, []want{forbidden("spec.source.inlineVolumeSpec.capacity"), required("spec.source.inlineVolumeSpec.csi")}},
		{"an attach error message above 1024 characters is rejected", func(va *storagev1.VolumeAttachment) {
			va.Status.AttachError = &storagev1.VolumeError{Message: strings.Repeat("e", 1025)}
		}, []want{tooLong("status.attachError.message")}},
		{"a detach error message above 1024 characters is rejected", func(va *storagev1.VolumeAttachment) {
			va.Status.DetachError = &storagev1.VolumeError{Message: strings.Repeat("e", 1025)}
		}, []want{tooLong("status.detachError.message")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			va := validVolumeAttachment()
			tt.mutate(va)
			checkErrs(t, validation.VolumeAttachment(va), tt.want...)
		})
	}
}

func TestVolumeAttachmentUpdate(t *testing.T) {
	old := validVolumeAttachment()
	old.ResourceVersion = "2"
	status := old.DeepCopy()
	status.Status.Attached = true
	checkErrs(t, validation.VolumeAttachmentStatusUpdate(status, old))

	moved := old.DeepCopy()
	moved.Spec.NodeName = "node-2"
	checkErrs(t, validation.VolumeAttachmentUpdate(moved, old), invalid("spec"))
}

func validPV() *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-1"},
			},
		},
	}
	defaults.PersistentVolume(pv)
	return pv
}

func TestPersistentVolume(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(pv *corev1.PersistentVolume)
		want   []want
	}{
		{"a defaulted CSI volume is valid", func(*corev1.PersistentVolume) {}, nil},
		{"a PV needs access modes", func(pv *corev1.PersistentVolume) { pv.Spec.AccessModes = nil }, []want{required("spec.accessModes")}},
		{"an unknown access mode is rejected", func(pv *corev1.PersistentVolume) {
			pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{"ReadSometimes"}
		}, []want{notSupported("spec.accessModes")}},
		{"ReadWriteOncePod may not be combined", func(pv *corev1.PersistentVolume) {
			pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod, corev1.ReadOnlyMany}
		}, []want{forbidden("spec.accessModes")}},
		{"a PV needs a storage capacity", func(pv *corev1.PersistentVolume) { pv.Spec.Capacity = nil }, []want{required("spec.capacity"), notSupported("spec.capacity")}},
		{"a zero capacity is invalid", func(pv *corev1.PersistentVolume) {
			pv.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("0")
		}, []want{invalid("spec.capacity[storage]")}},
		{"a PV needs a volume source", func(pv *corev1.PersistentVolume) { pv.Spec.CSI = nil }, []want{required("spec")}},
		{"a PV may have only one volume source", func(pv *corev1.PersistentVolume) {
			pv.Spec.HostPath = &corev1.HostPathVolumeSource{Path: "/data"}
		}, []want{forbidden("spec.csi")}},
		{"an unknown reclaim policy is rejected", func(pv *corev1.PersistentVolume) { pv.Spec.PersistentVolumeReclaimPolicy = "Keep" }, []want{notSupported("spec.persistentVolumeReclaimPolicy")}},
		{"an unknown volume mode is rejected", func(pv *corev1.PersistentVolume) {
			pv.Spec.VolumeMode = ptr(corev1.PersistentVolumeMode("Raw"))
		}, []want{notSupported("spec.volumeMode")}},
		{"a local volume needs node affinity", func(pv *corev1.PersistentVolume) {
			pv.Spec.CSI = nil
			pv.Spec.Local = &corev1.LocalVolumeSource{Path: "/mnt/disk"}
		}, []want{required("spec.nodeAffinity")}},
		{"a CSI volume needs a handle", func(pv *corev1.PersistentVolume) { pv.Spec.CSI.VolumeHandle = "" }, []want{required("spec.csi.volumeHandle")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pv := validPV()
			tt.mutate(pv)
			checkErrs(t, validation.PersistentVolume(pv), tt.want...)
		})
	}
}

func TestPersistentVolumeUpdate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(pv *corev1.PersistentVolume)
		want   []want
	}{
		{"capacity and reclaim policy may change", func(pv *corev1.PersistentVolume) {
			pv.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("20Gi")
			pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
		}, nil},
		{"binding to a claim is allowed", func(pv *corev1.PersistentVolume) {
			pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "default", Name: "data"}
		}, nil},
		{"the volume source is immutable", func(pv *corev1.PersistentVolume) { pv.Spec.CSI.VolumeHandle = "vol-2" }, []want{forbidden("spec.persistentvolumesource")}},
		{"a controller expand secret may be added", func(pv *corev1.PersistentVolume) {
			pv.Spec.CSI.ControllerExpandSecretRef = &corev1.SecretReference{Name: "s", Namespace: "kube-system"}
		}, nil},
		{"the volume mode is immutable", func(pv *corev1.PersistentVolume) {
			pv.Spec.VolumeMode = ptr(corev1.PersistentVolumeBlock)
		}, []want{invalid("volumeMode")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := validPV()
			old.ResourceVersion = "4"
			pv := old.DeepCopy()
			tt.mutate(pv)
			checkErrs(t, validation.PersistentVolumeUpdate(pv, old), tt.want...)
		})
	}
}

func validPVC() *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}},
		},
	}
	defaults.PersistentVolumeClaim(pvc)
	return pvc
}

func TestPersistentVolumeClaim(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(pvc *corev1.PersistentVolumeClaim)
		want   []want
	}{
		{"a defaulted claim is valid", func(*corev1.PersistentVolumeClaim) {}, nil},
		{"a claim needs access modes", func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.AccessModes = nil }, []want{required("spec.accessModes")}},
		{"a claim needs a storage request (at kube's spec.resources[storage])", func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Spec.Resources.Requests = nil
		}, []want{required("spec.resources[storage]")}},
		{"a zero storage request is invalid", func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("0")
		}, []want{invalid("spec.resources[storage]")}},
		{"an unknown volume mode is rejected", func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Spec.VolumeMode = ptr(corev1.PersistentVolumeMode("Raw"))
		}, []want{notSupported("spec.volumeMode")}},
		{"a selector must be valid", func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"bad key": "x"}}
		}, []want{invalid("spec.selector.matchLabels")}},
		{"a core data source must be a PVC", func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "Pod", Name: "x"}
		}, []want{invalid("spec.dataSource")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pvc := validPVC()
			tt.mutate(pvc)
			checkErrs(t, validation.PersistentVolumeClaim(pvc), tt.want...)
		})
	}
}

func TestPersistentVolumeClaimUpdate(t *testing.T) {
	tests := []struct {
		name   string
		bound  bool
		mutate func(pvc *corev1.PersistentVolumeClaim)
		want   []want
	}{
		{"binding sets volumeName once", false, func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.VolumeName = "pv-1" }, nil},
		{"a bound claim may grow", true, func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("10Gi")
		}, nil},
		{"an unbound claim may not change its request", false, func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("10Gi")
		}, []want{forbidden("spec")}},
		{"a bound claim may not shrink below its capacity", true, func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("1Gi")
		}, []want{forbidden("spec.resources.requests.storage")}},
		{"access modes are immutable", true, func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
		}, []want{forbidden("spec")}},
		{"volumeName may not change once set", true, func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.VolumeName = "pv-2" }, []want{forbidden("spec")}},
		{"a storage class may be set on a claim without one", false, func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.StorageClassName = ptr("standard") }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := validPVC()
			old.ResourceVersion = "6"
			if tt.bound {
				old.Spec.VolumeName = "pv-1"
				old.Status.Phase = corev1.ClaimBound
				old.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}
			}
			pvc := old.DeepCopy()
			tt.mutate(pvc)
			checkErrs(t, validation.PersistentVolumeClaimUpdate(pvc, old), tt.want...)
		})
	}
}

func TestPersistentVolumeClaimStatusUpdate(t *testing.T) {
	old := validPVC()
	old.ResourceVersion = "6"
	pvc := old.DeepCopy()
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}
	checkErrs(t, validation.PersistentVolumeClaimStatusUpdate(pvc, old))

	pvc.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{corev1.ResourceStorage: "Shrinking"}
	checkErrs(t, validation.PersistentVolumeClaimStatusUpdate(pvc, old), notSupported("status.allocatedResourceStatus"))
}
