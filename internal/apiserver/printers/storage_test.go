package printers

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func storage(q string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(q)}
}

func TestStorageCells(t *testing.T) {
	block := corev1.PersistentVolumeBlock
	tests := []struct {
		name    string
		printer Printer
		obj     runtime.Object
		want    []interface{}
	}{
		{
			name:    "a bound volume shows capacity, abbreviated modes and its claim",
			printer: PersistentVolumes(),
			obj: &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: "pv1", CreationTimestamp: ago(3 * time.Hour)},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:                      storage("10Gi"),
					AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod, corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteOnce},
					PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
					ClaimRef:                      &corev1.ObjectReference{Namespace: "default", Name: "data"},
					StorageClassName:              "fast",
					VolumeAttributesClassName:     new("gold"),
					VolumeMode:                    &block,
				},
				Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
			},
			want: []interface{}{"pv1", "10Gi", "RWO,ROX,RWOP", "Retain", "Bound", "default/data", "fast", "gold", "", "3h", "Block"},
		},
		{
			name:    "a deleting volume shows Terminating and the beta class annotation wins",
			printer: PersistentVolumes(),
			obj: &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: "pv2", DeletionTimestamp: new(ago(time.Second)), Annotations: map[string]string{corev1.BetaStorageClassAnnotation: "legacy"}},
				Spec:       corev1.PersistentVolumeSpec{StorageClassName: "fast", AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}},
				Status:     corev1.PersistentVolumeStatus{Phase: corev1.VolumeFailed, Reason: "Recycler failed"},
			},
			want: []interface{}{"pv2", "0", "RWX", "", "Terminating", "", "legacy", "<unset>", "Recycler failed", "<unknown>", "<unset>"},
		},
		{
			name:    "a bound claim shows the volume's capacity and modes",
			printer: PersistentVolumeClaims(),
			obj: &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "data", CreationTimestamp: ago(5 * time.Minute)},
				Spec: corev1.PersistentVolumeClaimSpec{
					VolumeName:       "pv1",
					StorageClassName: new("fast"),
					Resources:        corev1.VolumeResourceRequirements{Requests: storage("5Gi")},
				},
				Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: storage("10Gi"), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}},
			},
			want: []interface{}{"data", "Bound", "pv1", "10Gi", "RWO", "fast", "<unset>", "5m", "<unset>"},
		},
		{
			name:    "a pending claim leaves volume, capacity and modes empty",
			printer: PersistentVolumeClaims(),
			obj: &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "wait", CreationTimestamp: ago(5 * time.Second)},
				Spec:       corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: storage("1Gi")}},
				Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
			},
			want: []interface{}{"wait", "Pending", "", "", "", "", "<unset>", "5s", "<unset>"},
		},
		{
			name:    "an attached volume attachment shows attacher, volume, node and true",
			printer: VolumeAttachments(),
			obj: &storagev1.VolumeAttachment{
				ObjectMeta: metav1.ObjectMeta{Name: "csi-123", CreationTimestamp: ago(2 * time.Minute)},
				Spec:       storagev1.VolumeAttachmentSpec{Attacher: "csi.example.com", NodeName: "n1", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: new("pv1")}},
				Status:     storagev1.VolumeAttachmentStatus{Attached: true},
			},
			want: []interface{}{"csi-123", "csi.example.com", "pv1", "n1", true, "2m"},
		},
		{
			name:    "an inline volume attachment has no PV and is not attached yet",
			printer: VolumeAttachments(),
			obj: &storagev1.VolumeAttachment{
				ObjectMeta: metav1.ObjectMeta{Name: "csi-456"},
				Spec:       storagev1.VolumeAttachmentSpec{Attacher: "csi.example.com", NodeName: "n2"},
			},
			want: []interface{}{"csi-456", "csi.example.com", "", "n2", false, "<unknown>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.printer.Cells(tt.obj, now)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}
