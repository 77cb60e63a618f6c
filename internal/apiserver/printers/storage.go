package printers

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PersistentVolumes prints persistent volumes: NAME CAPACITY ACCESS MODES
// RECLAIM POLICY STATUS CLAIM STORAGECLASS VOLUMEATTRIBUTESCLASS REASON AGE,
// and with -o wide VOLUMEMODE.
func PersistentVolumes() Printer {
	spec := corev1.PersistentVolumeSpec{}.SwaggerDoc()
	status := corev1.PersistentVolumeStatus{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Capacity", "string", spec["capacity"]),
			column("Access Modes", "string", spec["accessModes"]),
			column("Reclaim Policy", "string", spec["persistentVolumeReclaimPolicy"]),
			column("Status", "string", status["phase"]),
			column("Claim", "string", spec["claimRef"]),
			column("StorageClass", "string", "StorageClass of the pv"),
			column("VolumeAttributesClass", "string", "VolumeAttributesClass of the pv"),
			column("Reason", "string", status["reason"]),
			ageColumn(),
			wideColumn("VolumeMode", "string", spec["volumeMode"]),
		},
		Cells: cellsOf(persistentVolumeCells),
	}
}

func persistentVolumeCells(pv *corev1.PersistentVolume, now time.Time) []interface{} {
	claim := ""
	if ref := pv.Spec.ClaimRef; ref != nil {
		claim = ref.Namespace + "/" + ref.Name
	}
	capacity := pv.Spec.Capacity[corev1.ResourceStorage]
	phase := string(pv.Status.Phase)
	if pv.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	class := pv.Spec.StorageClassName
	if c, ok := pv.Annotations[corev1.BetaStorageClassAnnotation]; ok {
		class = c
	}
	return []interface{}{
		pv.Name,
		capacity.String(),
		accessModes(pv.Spec.AccessModes),
		string(pv.Spec.PersistentVolumeReclaimPolicy),
		phase,
		claim,
		class,
		orUnset(pv.Spec.VolumeAttributesClassName),
		pv.Status.Reason,
		age(pv.CreationTimestamp, now),
		orUnset((*string)(pv.Spec.VolumeMode)),
	}
}

// PersistentVolumeClaims prints claims: NAME STATUS VOLUME CAPACITY ACCESS
// MODES STORAGECLASS VOLUMEATTRIBUTESCLASS AGE, and with -o wide VOLUMEMODE.
// CAPACITY and ACCESS MODES stay empty until the claim names a volume.
func PersistentVolumeClaims() Printer {
	spec := corev1.PersistentVolumeClaimSpec{}.SwaggerDoc()
	status := corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Status", "string", status["phase"]),
			column("Volume", "string", spec["volumeName"]),
			column("Capacity", "string", status["capacity"]),
			column("Access Modes", "string", status["accessModes"]),
			column("StorageClass", "string", "StorageClass of the pvc"),
			column("VolumeAttributesClass", "string", "VolumeAttributesClass of the pvc"),
			ageColumn(),
			wideColumn("VolumeMode", "string", spec["volumeMode"]),
		},
		Cells: cellsOf(persistentVolumeClaimCells),
	}
}

func persistentVolumeClaimCells(pvc *corev1.PersistentVolumeClaim, now time.Time) []interface{} {
	phase := string(pvc.Status.Phase)
	if pvc.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	capacity, modes := "", ""
	if pvc.Spec.VolumeName != "" {
		q := pvc.Status.Capacity[corev1.ResourceStorage]
		capacity, modes = q.String(), accessModes(pvc.Status.AccessModes)
	}
	class := ""
	if c, ok := pvc.Annotations[corev1.BetaStorageClassAnnotation]; ok {
		class = c
	} else if pvc.Spec.StorageClassName != nil {
		class = *pvc.Spec.StorageClassName
	}
	return []interface{}{
		pvc.Name,
		phase,
		pvc.Spec.VolumeName,
		capacity,
		modes,
		class,
		orUnset(pvc.Spec.VolumeAttributesClassName),
		age(pvc.CreationTimestamp, now),
		orUnset((*string)(pvc.Spec.VolumeMode)),
	}
}

// VolumeAttachments prints storage.k8s.io/v1 volume attachments: NAME ATTACHER
// PV NODE ATTACHED AGE.
func VolumeAttachments() Printer {
	spec := storagev1.VolumeAttachmentSpec{}.SwaggerDoc()
	attacher := column("Attacher", "string", spec["attacher"])
	attacher.Format = "name" // as in Kubernetes
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			attacher,
			column("PV", "string", storagev1.VolumeAttachmentSource{}.SwaggerDoc()["persistentVolumeName"]),
			column("Node", "string", spec["nodeName"]),
			column("Attached", "boolean", storagev1.VolumeAttachmentStatus{}.SwaggerDoc()["attached"]),
			ageColumn(),
		},
		Cells: cellsOf(func(va *storagev1.VolumeAttachment, now time.Time) []interface{} {
			pv := ""
			if va.Spec.Source.PersistentVolumeName != nil {
				pv = *va.Spec.Source.PersistentVolumeName
			}
			return []interface{}{va.Name, va.Spec.Attacher, pv, va.Spec.NodeName, va.Status.Attached, age(va.CreationTimestamp, now)}
		}),
	}
}

// accessModes abbreviates access modes in a fixed order, each once:
// RWO,ROX,RWX,RWOP.
func accessModes(modes []corev1.PersistentVolumeAccessMode) string {
	var out []string
	for _, m := range []struct {
		mode  corev1.PersistentVolumeAccessMode
		short string
	}{
		{corev1.ReadWriteOnce, "RWO"},
		{corev1.ReadOnlyMany, "ROX"},
		{corev1.ReadWriteMany, "RWX"},
		{corev1.ReadWriteOncePod, "RWOP"},
	} {
		if slices.Contains(modes, m.mode) {
			out = append(out, m.short)
		}
	}
	return strings.Join(out, ",")
}

// orUnset returns *s, or "<unset>" for nil.
func orUnset(s *string) string {
	if s == nil {
		return "<unset>"
	}
	return *s
}

// StorageClasses prints storage.k8s.io/v1 storage classes: NAME PROVISIONER
// RECLAIMPOLICY VOLUMEBINDINGMODE ALLOWVOLUMEEXPANSION AGE. The default
// class's name gets " (default)", as kubectl shows it.
func StorageClasses() Printer {
	doc := storagev1.StorageClass{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Provisioner", "string", doc["provisioner"]),
			column("ReclaimPolicy", "string", doc["reclaimPolicy"]),
			column("VolumeBindingMode", "string", doc["volumeBindingMode"]),
			column("AllowVolumeExpansion", "string", doc["allowVolumeExpansion"]),
			ageColumn(),
		},
		Cells: cellsOf(func(sc *storagev1.StorageClass, now time.Time) []interface{} {
			name := sc.Name
			if isDefaultClass(sc.Annotations) {
				name += " (default)"
			}
			reclaim := string(corev1.PersistentVolumeReclaimDelete)
			if sc.ReclaimPolicy != nil {
				reclaim = string(*sc.ReclaimPolicy)
			}
			mode := string(storagev1.VolumeBindingImmediate)
			if sc.VolumeBindingMode != nil {
				mode = string(*sc.VolumeBindingMode)
			}
			expand := "false"
			if sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion {
				expand = "true"
			}
			return []interface{}{name, sc.Provisioner, reclaim, mode, expand, age(sc.CreationTimestamp, now)}
		}),
	}
}

// isDefaultClass reads the is-default-class annotation (and its beta form).
func isDefaultClass(ann map[string]string) bool {
	return ann["storageclass.kubernetes.io/is-default-class"] == "true" || ann["storageclass.beta.kubernetes.io/is-default-class"] == "true"
}
