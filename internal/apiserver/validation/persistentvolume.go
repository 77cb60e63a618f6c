package validation

import (
	"fmt"
	"path"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeplane/nodeplane/internal/volume/shareddir"
)

// Sorted, as kube prints them.
var (
	validAccessModes = []corev1.PersistentVolumeAccessMode{
		corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOnce, corev1.ReadWriteOncePod,
	}
	validReclaimPolicies = []corev1.PersistentVolumeReclaimPolicy{
		corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRecycle, corev1.PersistentVolumeReclaimRetain,
	}
	validVolumeModes = []corev1.PersistentVolumeMode{corev1.PersistentVolumeBlock, corev1.PersistentVolumeFilesystem}
)

// PersistentVolume validates a PV on create: access modes, a storage
// capacity, exactly one volume source, reclaim policy and volume mode.
func PersistentVolume(pv *corev1.PersistentVolume) field.ErrorList {
	allErrs := objectMeta(&pv.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, metadataPath)
	return append(allErrs, pvSpec(&pv.Spec, false, specPath)...)
}

// PersistentVolumeUpdate validates a PV update: the volume source and
// volume mode are immutable, and so is a node affinity once set (except
// moving from beta topology labels to their GA names).
func PersistentVolumeUpdate(pv, old *corev1.PersistentVolume) field.ErrorList {
	allErrs := PersistentVolume(pv)
	newSrc := pv.Spec.PersistentVolumeSource
	// A CSI controllerExpandSecretRef may be added after creation.
	if old.Spec.CSI != nil && old.Spec.CSI.ControllerExpandSecretRef == nil && newSrc.CSI != nil && newSrc.CSI.ControllerExpandSecretRef != nil {
		newSrc = *newSrc.DeepCopy()
		newSrc.CSI.ControllerExpandSecretRef = nil
	}
	if !equality.Semantic.DeepEqual(newSrc, old.Spec.PersistentVolumeSource) {
		diff := fieldDiff(old.Spec.PersistentVolumeSource, newSrc)
		allErrs = append(allErrs, field.Forbidden(field.NewPath("spec", "persistentvolumesource"), fmt.Sprintf("spec.persistentvolumesource is immutable after creation\n%v", diff)))
	}
	// kube reports this one without the spec prefix.
	allErrs = append(allErrs, immutable(pv.Spec.VolumeMode, old.Spec.VolumeMode, field.NewPath("volumeMode"))...)
	if old.Spec.NodeAffinity != nil && !nodeAffinityEqualModuloGALabels(pv.Spec.NodeAffinity, old.Spec.NodeAffinity) {
		allErrs = append(allErrs, field.Invalid(field.NewPath("nodeAffinity"), pv.Spec.NodeAffinity, fieldImmutableMsg+", except for updating from beta label to GA"))
	}
	if old.Spec.VolumeAttributesClassName != nil && pv.Spec.VolumeAttributesClassName == nil {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("spec", "volumeAttributesClassName"), "update from non-nil value to nil is forbidden"))
	}
	return allErrs
}

// PersistentVolumeStatusUpdate validates an update through the status
// subresource.
func PersistentVolumeStatusUpdate(pv, old *corev1.PersistentVolume) field.ErrorList {
	allErrs := objectMetaUpdate(&pv.ObjectMeta, &old.ObjectMeta, metadataPath)
	if pv.ResourceVersion == "" {
		allErrs = append(allErrs, field.Required(field.NewPath("resourceVersion"), ""))
	}
	return allErrs
}

func accessModes(modes []corev1.PersistentVolumeAccessMode, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	rwop, other := false, false
	for _, m := range modes {
		switch m {
		case corev1.ReadWriteOncePod:
			rwop = true
		case corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOnce:
			other = true
		default:
			allErrs = append(allErrs, field.NotSupported(fldPath, m, validAccessModes))
		}
	}
	if rwop && other {
		allErrs = append(allErrs, field.Forbidden(fldPath, "may not use ReadWriteOncePod with other access modes"))
	}
	return allErrs
}

// pvSpec validates a PersistentVolumeSpec; inline is true for the inline
// spec of a VolumeAttachment, which must be a CSI volume without capacity.
func pvSpec(spec *corev1.PersistentVolumeSpec, inline bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	const inlineMsg = "may not be specified in the context of inline volumes"
	if inline {
		if spec.ClaimRef != nil {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("claimRef"), inlineMsg))
		}
		if len(spec.Capacity) != 0 {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("capacity"), inlineMsg))
		}
		if spec.CSI == nil {
			allErrs = append(allErrs, field.Required(fldPath.Child("csi"), "has to be specified in the context of inline volumes"))
		}
	}
	if len(spec.AccessModes) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("accessModes"), ""))
	}
	allErrs = append(allErrs, accessModes(spec.AccessModes, fldPath.Child("accessModes"))...)
	if !inline {
		capPath := fldPath.Child("capacity")
		if len(spec.Capacity) == 0 {
			allErrs = append(allErrs, field.Required(capPath, ""))
		}
		if _, ok := spec.Capacity[corev1.ResourceStorage]; !ok || len(spec.Capacity) > 1 {
			allErrs = append(allErrs, field.NotSupported(capPath, spec.Capacity, []corev1.ResourceName{corev1.ResourceStorage}))
		}
		for r, q := range spec.Capacity {
			allErrs = append(allErrs, basicResource(q, capPath.Key(string(r)))...)
			allErrs = append(allErrs, positiveQuantity(q, capPath.Key(string(r)))...)
		}
	}
	if rp := spec.PersistentVolumeReclaimPolicy; rp != "" {
		if inline && rp != corev1.PersistentVolumeReclaimRetain {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("persistentVolumeReclaimPolicy"), "may only be Retain in the context of inline volumes"))
		} else if !inline && rp != corev1.PersistentVolumeReclaimDelete && rp != corev1.PersistentVolumeReclaimRecycle && rp != corev1.PersistentVolumeReclaimRetain {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("persistentVolumeReclaimPolicy"), rp, validReclaimPolicies))
		}
	}
	hasNodeAffinity := false
	if na := spec.NodeAffinity; na != nil {
		if inline {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("nodeAffinity"), inlineMsg))
		} else {
			hasNodeAffinity = true
			if na.Required != nil {
				allErrs = append(allErrs, nodeSelector(na.Required, fldPath.Child("nodeAffinity", "required"))...)
			} else {
				allErrs = append(allErrs, field.Required(fldPath.Child("nodeAffinity", "required"), "must specify required node constraints"))
			}
		}
	}
	allErrs = append(allErrs, pvSource(&spec.PersistentVolumeSource, hasNodeAffinity, fldPath)...)
	if spec.HostPath != nil && path.Clean(spec.HostPath.Path) == "/" && spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRecycle {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("persistentVolumeReclaimPolicy"), "may not be 'recycle' for a hostPath mount of '/'"))
	}
	if spec.StorageClassName != "" {
		if inline {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("storageClassName"), inlineMsg))
		} else {
			allErrs = append(allErrs, dnsSubdomain(spec.StorageClassName, fldPath.Child("storageClassName"))...)
		}
	}
	if vm := spec.VolumeMode; vm != nil {
		if inline && *vm != corev1.PersistentVolumeFilesystem {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("volumeMode"), "may not specify volumeMode other than Filesystem in the context of inline volumes"))
		} else if !inline && *vm != corev1.PersistentVolumeBlock && *vm != corev1.PersistentVolumeFilesystem {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("volumeMode"), *vm, validVolumeModes))
		}
	}
	if vac := spec.VolumeAttributesClassName; vac != nil {
		if *vac == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("volumeAttributesClassName"), "an empty string is disallowed"))
		} else {
			allErrs = append(allErrs, dnsSubdomain(*vac, fldPath.Child("volumeAttributesClassName"))...)
		}
		if spec.CSI == nil {
			allErrs = append(allErrs, field.Required(fldPath.Child("csi"), "has to be specified when using volumeAttributesClassName"))
		}
	}
	return allErrs
}

// pvSource enforces exactly one source, in kube's field order, and
// validates hostPath, nfs, local and csi in detail.
func pvSource(src *corev1.PersistentVolumeSource, hasNodeAffinity bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	n := 0
	one := func(name string, set bool, check func() field.ErrorList) {
		if !set {
			return
		}
		if n > 0 {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child(name), "may not specify more than 1 volume type"))
			return
		}
		n++
		if check != nil {
			allErrs = append(allErrs, check()...)
		}
	}
	one("hostPath", src.HostPath != nil, func() field.ErrorList { return hostPathSource(src.HostPath, fldPath.Child("hostPath")) })
	one("gcePersistentDisk", src.GCEPersistentDisk != nil, nil)
	one("awsElasticBlockStore", src.AWSElasticBlockStore != nil, nil)
	one("glusterfs", src.Glusterfs != nil, nil)
	one("flocker", src.Flocker != nil, nil)
	one("nfs", src.NFS != nil, func() field.ErrorList { return nfsSource(src.NFS, fldPath.Child("nfs")) })
	one("rbd", src.RBD != nil, nil)
	one("quobyte", src.Quobyte != nil, nil)
	one("cephFS", src.CephFS != nil, nil)
	one("iscsi", src.ISCSI != nil, nil)
	one("cinder", src.Cinder != nil, nil)
	one("fc", src.FC != nil, nil)
	if src.FlexVolume != nil {
		// kube counts flexVolume without the "more than 1" check.
		n++
	}
	one("azureFile", src.AzureFile != nil, nil)
	one("vsphereVolume", src.VsphereVolume != nil, nil)
	one("photonPersistentDisk", src.PhotonPersistentDisk != nil, nil)
	one("portworxVolume", src.PortworxVolume != nil, nil)
	one("azureDisk", src.AzureDisk != nil, nil)
	one("scaleIO", src.ScaleIO != nil, nil)
	one("local", src.Local != nil, func() field.ErrorList {
		var errs field.ErrorList
		if src.Local.Path == "" {
			errs = append(errs, field.Required(fldPath.Child("local", "path"), ""))
		} else {
			errs = append(errs, noBacksteps(src.Local.Path, fldPath.Child("local", "path"))...)
		}
		if !hasNodeAffinity {
			errs = append(errs, field.Required(fldPath.Child("nodeAffinity"), "Local volume requires node affinity"))
		}
		return errs
	})
	one("storageos", src.StorageOS != nil, nil)
	one("csi", src.CSI != nil, func() field.ErrorList { return csiPVSource(src.CSI, fldPath.Child("csi")) })
	if n == 0 {
		allErrs = append(allErrs, field.Required(fldPath, "must specify a volume type"))
	}
	return allErrs
}

func csiPVSource(csi *corev1.CSIPersistentVolumeSource, fldPath *field.Path) field.ErrorList {
	allErrs := csiDriverName(csi.Driver, fldPath.Child("driver"))
	if csi.VolumeHandle == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("volumeHandle"), ""))
	}
	refs := []struct {
		name string
		ref  *corev1.SecretReference
	}{
		{"controllerPublishSecretRef", csi.ControllerPublishSecretRef},
		{"controllerExpandSecretRef", csi.ControllerExpandSecretRef},
		{"nodePublishSecretRef", csi.NodePublishSecretRef},
		{"nodeExpandSecretRef", csi.NodeExpandSecretRef},
	}
	for _, r := range refs {
		if r.ref == nil {
			continue
		}
		rp := fldPath.Child(r.name)
		if r.ref.Name == "" {
			allErrs = append(allErrs, field.Required(rp.Child("name"), ""))
		} else {
			allErrs = append(allErrs, dnsSubdomain(r.ref.Name, rp.Child("name"))...)
		}
		if r.ref.Namespace == "" {
			allErrs = append(allErrs, field.Required(rp.Child("namespace"), ""))
		} else {
			allErrs = append(allErrs, dnsLabel(r.ref.Namespace, rp.Child("namespace"))...)
		}
	}
	return allErrs
}

// csiDriverName: required, at most 63 characters, a DNS subdomain once
// lower-cased. The one exception is nodeplane's built-in driver, whose name
// (nodeplane.io/shared-dir, fixed by issue 14) has a slash upstream would
// refuse (docs/differences.md).
func csiDriverName(name string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if name == shareddir.Driver {
		return nil
	}
	if name == "" {
		allErrs = append(allErrs, field.Required(fldPath, ""))
	}
	if len(name) > 63 {
		allErrs = append(allErrs, field.TooLong(fldPath, "", 63))
	}
	return append(allErrs, invalidEach(fldPath, name, utilvalidation.IsDNS1123Subdomain(strings.ToLower(name)))...)
}

// betaToGALabel maps the beta topology labels to the names a PV node
// affinity may be moved to.
var betaToGALabel = map[string]string{
	corev1.LabelFailureDomainBetaZone:   corev1.LabelTopologyZone,
	corev1.LabelFailureDomainBetaRegion: corev1.LabelTopologyRegion,
	"beta.kubernetes.io/os":             corev1.LabelOSStable,
	"beta.kubernetes.io/arch":           corev1.LabelArchStable,
	corev1.LabelInstanceType:            corev1.LabelInstanceTypeStable,
}

func nodeAffinityEqualModuloGALabels(na, old *corev1.VolumeNodeAffinity) bool {
	if na == nil || na.Required == nil || old.Required == nil || len(na.Required.NodeSelectorTerms) != len(old.Required.NodeSelectorTerms) {
		return equality.Semantic.DeepEqual(na, old)
	}
	masked := old.DeepCopy()
	for i := range masked.Required.NodeSelectorTerms {
		oldExprs, newExprs := masked.Required.NodeSelectorTerms[i].MatchExpressions, na.Required.NodeSelectorTerms[i].MatchExpressions
		for j := range oldExprs {
			if j < len(newExprs) && betaToGALabel[oldExprs[j].Key] == newExprs[j].Key {
				oldExprs[j].Key = newExprs[j].Key
			}
		}
	}
	return equality.Semantic.DeepEqual(na, masked)
}

// PersistentVolumeClaim validates a PVC on create: access modes, a
// positive storage request, volume mode, selector and data sources.
func PersistentVolumeClaim(pvc *corev1.PersistentVolumeClaim) field.ErrorList {
	allErrs := objectMeta(&pvc.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metadataPath)
	return append(allErrs, pvcSpec(&pvc.Spec, specPath)...)
}

func pvcSpec(spec *corev1.PersistentVolumeClaimSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(spec.AccessModes) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("accessModes"), "at least 1 access mode is required"))
	}
	if spec.Selector != nil {
		allErrs = append(allErrs, metav1validation.ValidateLabelSelector(spec.Selector, metav1validation.LabelSelectorValidationOptions{}, fldPath.Child("selector"))...)
	}
	allErrs = append(allErrs, accessModes(spec.AccessModes, fldPath.Child("accessModes"))...)
	// kube builds this path with Key: "spec.resources[storage]".
	storagePath := fldPath.Child("resources").Key(string(corev1.ResourceStorage))
	if q, ok := spec.Resources.Requests[corev1.ResourceStorage]; !ok {
		allErrs = append(allErrs, field.Required(storagePath, ""))
	} else if errs := positiveQuantity(q, storagePath); len(errs) > 0 {
		allErrs = append(allErrs, errs...)
	} else {
		allErrs = append(allErrs, resourceQuantityValue(corev1.ResourceStorage, q, storagePath)...)
	}
	if sc := spec.StorageClassName; sc != nil && *sc != "" {
		allErrs = append(allErrs, dnsSubdomain(*sc, fldPath.Child("storageClassName"))...)
	}
	if vm := spec.VolumeMode; vm != nil && *vm != corev1.PersistentVolumeBlock && *vm != corev1.PersistentVolumeFilesystem {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("volumeMode"), *vm, validVolumeModes))
	}
	if ds := spec.DataSource; ds != nil {
		allErrs = append(allErrs, dataSource(ds.APIGroup, ds.Kind, ds.Name, nil, fldPath.Child("dataSource"))...)
	}
	if ref := spec.DataSourceRef; ref != nil {
		allErrs = append(allErrs, dataSource(ref.APIGroup, ref.Kind, ref.Name, ref.Namespace, fldPath.Child("dataSourceRef"))...)
	}
	if ref := spec.DataSourceRef; ref != nil && ref.Namespace != nil && *ref.Namespace != "" {
		if spec.DataSource != nil {
			allErrs = append(allErrs, field.Invalid(fldPath, fldPath.Child("dataSource"), "may not be specified when dataSourceRef.namespace is specified"))
		}
	} else if ds := spec.DataSource; ds != nil && ref != nil {
		if !reflect.DeepEqual(ds.APIGroup, ref.APIGroup) || ds.Kind != ref.Kind || ds.Name != ref.Name {
			allErrs = append(allErrs, field.Invalid(fldPath, fldPath.Child("dataSource"), "must match dataSourceRef"))
		}
	}
	if vac := spec.VolumeAttributesClassName; vac != nil && *vac != "" {
		allErrs = append(allErrs, dnsSubdomain(*vac, fldPath.Child("volumeAttributesClassName"))...)
	}
	return allErrs
}

func dataSource(apiGroup *string, kind, name string, namespace *string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if name == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("name"), ""))
	}
	if kind == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("kind"), ""))
	}
	group := ""
	if apiGroup != nil {
		group = *apiGroup
	}
	if group == "" && kind != "PersistentVolumeClaim" {
		allErrs = append(allErrs, field.Invalid(fldPath, kind, "must be 'PersistentVolumeClaim' when referencing the default apiGroup"))
	}
	if group != "" {
		allErrs = append(allErrs, dnsSubdomain(group, fldPath.Child("apiGroup"))...)
	}
	if namespace != nil && *namespace != "" {
		allErrs = append(allErrs, dnsLabel(*namespace, fldPath.Child("namespace"))...)
	}
	return allErrs
}
