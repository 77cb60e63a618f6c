package validation

import (
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const fileModeErrorMsg = "must be a number between 0 and 0777 (octal), both inclusive"

// volumes validates spec.volumes and returns the valid ones by name, for the
// mount checks of the containers.
func volumes(vols []corev1.Volume, podMeta *metav1.ObjectMeta, fldPath *field.Path) (map[string]corev1.VolumeSource, field.ErrorList) {
	var allErrs field.ErrorList
	byName := map[string]corev1.VolumeSource{}
	// PVCs the pod will create for its generic ephemeral volumes; a
	// persistentVolumeClaim volume must not point at one of them.
	created := map[string]bool{}
	if podMeta != nil && podMeta.Name != "" {
		for _, v := range vols {
			if v.Ephemeral != nil {
				created[podMeta.Name+"-"+v.Name] = true
			}
		}
	}
	for i, v := range vols {
		p := fldPath.Index(i)
		namePath := p.Child("name")
		errs := volumeSource(&v.VolumeSource, v.Name, podMeta, p)
		if v.Name == "" {
			errs = append(errs, field.Required(namePath, ""))
		} else {
			errs = append(errs, dnsLabel(v.Name, namePath)...)
		}
		if _, dup := byName[v.Name]; dup {
			errs = append(errs, field.Duplicate(namePath, v.Name))
		}
		if len(errs) == 0 {
			byName[v.Name] = v.VolumeSource
		} else {
			allErrs = append(allErrs, errs...)
		}
		if v.PersistentVolumeClaim != nil && created[v.PersistentVolumeClaim.ClaimName] {
			allErrs = append(allErrs, field.Invalid(p.Child("persistentVolumeClaim").Child("claimName"), v.PersistentVolumeClaim.ClaimName,
				"must not reference a PVC that gets created for an ephemeral volume"))
		}
	}
	return byName, allErrs
}

// volumeSource enforces "exactly one volume type" in kube's field order
// and validates the sources nodeplane's workloads actually use: emptyDir,
// hostPath, secret, configMap, persistentVolumeClaim, projected,
// downwardAPI, nfs, csi and ephemeral. Other in-tree sources only count
// towards the one-source rule.
func volumeSource(src *corev1.VolumeSource, volName string, podMeta *metav1.ObjectMeta, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	n := 0
	one := func(name string, set bool, check func() field.ErrorList) {
		if !set {
			return
		}
		if n > 0 {
			allErrs = append(allErrs, field.Forbidden(p.Child(name), "may not specify more than 1 volume type"))
			return
		}
		n++
		if check != nil {
			allErrs = append(allErrs, check()...)
		}
	}
	if src.EmptyDir != nil {
		n++
		if sl := src.EmptyDir.SizeLimit; sl != nil && sl.Cmp(resource.Quantity{}) < 0 {
			allErrs = append(allErrs, field.Forbidden(p.Child("emptyDir").Child("sizeLimit"), "SizeLimit field must be a valid resource quantity"))
		}
	}
	one("hostPath", src.HostPath != nil, func() field.ErrorList { return hostPathSource(src.HostPath, p.Child("hostPath")) })
	one("gitRepo", src.GitRepo != nil, func() field.ErrorList {
		var errs field.ErrorList
		if src.GitRepo.Repository == "" {
			errs = append(errs, field.Required(p.Child("gitRepo", "repository"), ""))
		}
		return append(errs, localDescendingPath(src.GitRepo.Directory, p.Child("gitRepo", "directory"))...)
	})
	one("gcePersistentDisk", src.GCEPersistentDisk != nil, nil)
	one("awsElasticBlockStore", src.AWSElasticBlockStore != nil, nil)
	one("secret", src.Secret != nil, func() field.ErrorList {
		sp := p.Child("secret")
		var errs field.ErrorList
		if src.Secret.SecretName == "" {
			errs = append(errs, field.Required(sp.Child("secretName"), ""))
		}
		errs = append(errs, fileMode(src.Secret.DefaultMode, sp.Child("defaultMode"))...)
		for i := range src.Secret.Items {
			errs = append(errs, keyToPath(&src.Secret.Items[i], sp.Child("items").Index(i))...)
		}
		return errs
	})
	one("nfs", src.NFS != nil, func() field.ErrorList { return nfsSource(src.NFS, p.Child("nfs")) })
	one("iscsi", src.ISCSI != nil, nil)
	one("glusterfs", src.Glusterfs != nil, nil)
	one("flocker", src.Flocker != nil, nil)
	one("persistentVolumeClaim", src.PersistentVolumeClaim != nil, func() field.ErrorList {
		if src.PersistentVolumeClaim.ClaimName == "" {
			return field.ErrorList{field.Required(p.Child("persistentVolumeClaim", "claimName"), "")}
		}
		return nil
	})
	one("rbd", src.RBD != nil, nil)
	one("cinder", src.Cinder != nil, nil)
	one("cephFS", src.CephFS != nil, nil)
	one("quobyte", src.Quobyte != nil, nil)
	// kube misspells this path; kept so the message matches.
	one("downwarAPI", src.DownwardAPI != nil, func() field.ErrorList {
		dp := p.Child("downwardAPI")
		errs := fileMode(src.DownwardAPI.DefaultMode, dp.Child("defaultMode"))
		for i := range src.DownwardAPI.Items {
			errs = append(errs, downwardAPIFile(&src.DownwardAPI.Items[i], dp)...)
		}
		return errs
	})
	one("fc", src.FC != nil, nil)
	one("flexVolume", src.FlexVolume != nil, nil)
	one("configMap", src.ConfigMap != nil, func() field.ErrorList {
		cp := p.Child("configMap")
		var errs field.ErrorList
		if src.ConfigMap.Name == "" {
			errs = append(errs, field.Required(cp.Child("name"), ""))
		}
		errs = append(errs, fileMode(src.ConfigMap.DefaultMode, cp.Child("defaultMode"))...)
		for i := range src.ConfigMap.Items {
			errs = append(errs, keyToPath(&src.ConfigMap.Items[i], cp.Child("items").Index(i))...)
		}
		return errs
	})
	one("azureFile", src.AzureFile != nil, nil)
	one("vsphereVolume", src.VsphereVolume != nil, nil)
	one("photonPersistentDisk", src.PhotonPersistentDisk != nil, nil)
	one("portworxVolume", src.PortworxVolume != nil, nil)
	one("azureDisk", src.AzureDisk != nil, nil)
	one("storageos", src.StorageOS != nil, nil)
	one("projected", src.Projected != nil, func() field.ErrorList { return projectedSource(src.Projected, p.Child("projected")) })
	one("scaleIO", src.ScaleIO != nil, nil)
	one("csi", src.CSI != nil, func() field.ErrorList {
		cp := p.Child("csi")
		errs := csiDriverName(src.CSI.Driver, cp.Child("driver"))
		if ref := src.CSI.NodePublishSecretRef; ref != nil {
			if ref.Name == "" {
				errs = append(errs, field.Required(cp.Child("nodePublishSecretRef", "name"), ""))
			} else {
				errs = append(errs, dnsSubdomain(ref.Name, cp.Child("name"))...)
			}
		}
		return errs
	})
	one("ephemeral", src.Ephemeral != nil, func() field.ErrorList {
		ep := p.Child("ephemeral")
		if src.Ephemeral.VolumeClaimTemplate == nil {
			return field.ErrorList{field.Required(ep.Child("volumeClaimTemplate"), "")}
		}
		tp := ep.Child("volumeClaimTemplate")
		errs := templateObjectMeta(&src.Ephemeral.VolumeClaimTemplate.ObjectMeta, tp.Child("metadata"))
		errs = append(errs, pvcSpec(&src.Ephemeral.VolumeClaimTemplate.Spec, tp.Child("spec"))...)
		if podMeta != nil && podMeta.Name != "" && volName != "" {
			pvcName := podMeta.Name + "-" + volName
			for _, msg := range dnsSubdomain(pvcName, p.Child("name")) {
				errs = append(errs, field.Invalid(p.Child("name"), volName, fmt.Sprintf("PVC name %q: %v", pvcName, msg.Detail)))
			}
		}
		return errs
	})
	one("image", src.Image != nil, func() field.ErrorList {
		ip := p.Child("image")
		var errs field.ErrorList
		if podMeta != nil && src.Image.Reference == "" {
			errs = append(errs, field.Required(ip.Child("reference"), ""))
		}
		return append(errs, pullPolicy(src.Image.PullPolicy, ip.Child("pullPolicy"))...)
	})
	if n == 0 {
		allErrs = append(allErrs, field.Required(p, "must specify a volume type"))
	}
	return allErrs
}

var validHostPathTypes = []corev1.HostPathType{
	corev1.HostPathUnset, corev1.HostPathBlockDev, corev1.HostPathCharDev, corev1.HostPathDirectory,
	corev1.HostPathDirectoryOrCreate, corev1.HostPathFile, corev1.HostPathFileOrCreate, corev1.HostPathSocket,
}

func hostPathSource(hp *corev1.HostPathVolumeSource, p *field.Path) field.ErrorList {
	if hp.Path == "" {
		return field.ErrorList{field.Required(p.Child("path"), "")}
	}
	allErrs := noBacksteps(hp.Path, p.Child("path"))
	if hp.Type != nil {
		ok := false
		for _, t := range validHostPathTypes {
			ok = ok || *hp.Type == t
		}
		if !ok {
			allErrs = append(allErrs, field.NotSupported(p.Child("type"), hp.Type, validHostPathTypes))
		}
	}
	return allErrs
}

func nfsSource(nfs *corev1.NFSVolumeSource, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if nfs.Server == "" {
		allErrs = append(allErrs, field.Required(p.Child("server"), ""))
	}
	if nfs.Path == "" {
		allErrs = append(allErrs, field.Required(p.Child("path"), ""))
	}
	if len(nfs.Path) == 0 || nfs.Path[0] != '/' {
		allErrs = append(allErrs, field.Invalid(p.Child("path"), nfs.Path, "must be an absolute path"))
	}
	return allErrs
}

func fileMode(mode *int32, p *field.Path) field.ErrorList {
	if mode != nil && (*mode > 0777 || *mode < 0) {
		return field.ErrorList{field.Invalid(p, *mode, fileModeErrorMsg)}
	}
	return nil
}

func keyToPath(kp *corev1.KeyToPath, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if kp.Key == "" {
		allErrs = append(allErrs, field.Required(p.Child("key"), ""))
	}
	if kp.Path == "" {
		allErrs = append(allErrs, field.Required(p.Child("path"), ""))
	}
	allErrs = append(allErrs, localNonReservedPath(kp.Path, p.Child("path"))...)
	return append(allErrs, fileMode(kp.Mode, p.Child("mode"))...)
}

var validVolumeFieldPaths = []string{"metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid"}

func downwardAPIFile(f *corev1.DownwardAPIVolumeFile, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if f.Path == "" {
		allErrs = append(allErrs, field.Required(p.Child("path"), ""))
	}
	allErrs = append(allErrs, localNonReservedPath(f.Path, p.Child("path"))...)
	switch {
	case f.FieldRef != nil:
		allErrs = append(allErrs, objectFieldSelector(f.FieldRef, validVolumeFieldPaths, p.Child("fieldRef"))...)
		if f.ResourceFieldRef != nil {
			allErrs = append(allErrs, field.Invalid(p, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously"))
		}
	case f.ResourceFieldRef != nil:
		allErrs = append(allErrs, resourceFieldSelector(f.ResourceFieldRef, true, p.Child("resourceFieldRef"))...)
	default:
		allErrs = append(allErrs, field.Required(p, "one of fieldRef and resourceFieldRef is required"))
	}
	return append(allErrs, fileMode(f.Mode, p.Child("mode"))...)
}

// projectedSource validates a projected volume: one source per entry and no
// two entries writing the same path.
func projectedSource(pr *corev1.ProjectedVolumeSource, p *field.Path) field.ErrorList {
	allErrs := fileMode(pr.DefaultMode, p.Child("defaultMode"))
	paths := map[string]bool{}
	claim := func(path string, value any) {
		if path == "" {
			return
		}
		if paths[path] {
			allErrs = append(allErrs, field.Invalid(p, value, "conflicting duplicate paths"))
		}
		paths[path] = true
	}
	for i, s := range pr.Sources {
		sp := p.Child("sources").Index(i)
		n := 0
		if s.Secret != nil {
			n++
			if s.Secret.Name == "" {
				allErrs = append(allErrs, field.Required(sp.Child("secret", "name"), ""))
			}
			for j := range s.Secret.Items {
				allErrs = append(allErrs, keyToPath(&s.Secret.Items[j], sp.Child("secret", "items").Index(j))...)
				claim(s.Secret.Items[j].Path, s.Secret.Name)
			}
		}
		if s.ConfigMap != nil {
			n++
			if s.ConfigMap.Name == "" {
				allErrs = append(allErrs, field.Required(sp.Child("configMap", "name"), ""))
			}
			for j := range s.ConfigMap.Items {
				allErrs = append(allErrs, keyToPath(&s.ConfigMap.Items[j], sp.Child("configMap", "items").Index(j))...)
				claim(s.ConfigMap.Items[j].Path, s.ConfigMap.Name)
			}
		}
		if s.DownwardAPI != nil {
			n++
			for j := range s.DownwardAPI.Items {
				allErrs = append(allErrs, downwardAPIFile(&s.DownwardAPI.Items[j], sp.Child("downwardAPI"))...)
				claim(s.DownwardAPI.Items[j].Path, s.DownwardAPI.Items[j].Path)
			}
		}
		if t := s.ServiceAccountToken; t != nil {
			n++
			tp := sp.Child("serviceAccountToken")
			if t.ExpirationSeconds != nil && *t.ExpirationSeconds < 10*60 {
				allErrs = append(allErrs, field.Invalid(tp.Child("expirationSeconds"), *t.ExpirationSeconds, "may not specify a duration less than 10 minutes"))
			}
			if t.ExpirationSeconds != nil && *t.ExpirationSeconds > 1<<32 {
				allErrs = append(allErrs, field.Invalid(tp.Child("expirationSeconds"), *t.ExpirationSeconds, "may not specify a duration larger than 2^32 seconds"))
			}
			if t.Path == "" {
				allErrs = append(allErrs, field.Required(p.Child("path"), ""))
			} else {
				allErrs = append(allErrs, localNonReservedPath(t.Path, p.Child("path"))...)
			}
		}
		if s.ClusterTrustBundle != nil {
			n++
			claim(s.ClusterTrustBundle.Path, s.ClusterTrustBundle.Path)
		}
		if s.PodCertificate != nil {
			n++
		}
		if n > 1 {
			allErrs = append(allErrs, field.Forbidden(sp, "may not specify more than 1 volume type per source"))
		}
	}
	return allErrs
}

// templateObjectMeta validates the metadata of an embedded template that
// may only carry labels and annotations; any other field is Forbidden.
func templateObjectMeta(meta *metav1.ObjectMeta, p *field.Path) field.ErrorList {
	allErrs := annotations(meta.Annotations, p.Child("annotations"))
	allErrs = append(allErrs, labels(meta.Labels, p.Child("labels"))...)
	return append(allErrs, onlyFieldsSet(*meta, map[string]bool{"Labels": true, "Annotations": true}, "cannot be set", p)...)
}

// onlyFieldsSet reports every non-zero field of the struct value that is
// not in allowed, under its JSON-style (lower camel case) name.
func onlyFieldsSet(value any, allowed map[string]bool, detail string, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	t, v := reflect.TypeOf(value), reflect.ValueOf(value)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if allowed[f.Name] || v.Field(i).IsZero() {
			continue
		}
		allErrs = append(allErrs, field.Forbidden(p.Child(strings.ToLower(f.Name[:1])+f.Name[1:]), detail))
	}
	return allErrs
}
