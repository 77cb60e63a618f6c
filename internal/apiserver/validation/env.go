package validation

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validEnvFieldPaths are the pod fields an env var may read through
// valueFrom.fieldRef (besides labels and annotations by key).
var validEnvFieldPaths = []string{
	"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName",
	"status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs",
}

var validResourceFieldPaths = []string{
	"limits.cpu", "limits.ephemeral-storage", "limits.memory",
	"requests.cpu", "requests.ephemeral-storage", "requests.memory",
}

// env validates environment variables. Names use kube's relaxed rule
// (any printable ASCII but '='), which is GA since Kubernetes 1.34.
func env(vars []corev1.EnvVar, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, ev := range vars {
		p := fldPath.Index(i)
		if ev.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		} else {
			allErrs = append(allErrs, invalidEach(p.Child("name"), ev.Name, utilvalidation.IsRelaxedEnvVarName(ev.Name))...)
		}
		allErrs = append(allErrs, envValueFrom(ev, p.Child("valueFrom"))...)
	}
	return allErrs
}

func envValueFrom(ev corev1.EnvVar, fldPath *field.Path) field.ErrorList {
	if ev.ValueFrom == nil {
		return nil
	}
	var allErrs field.ErrorList
	n := 0
	if fr := ev.ValueFrom.FieldRef; fr != nil {
		n++
		allErrs = append(allErrs, objectFieldSelector(fr, validEnvFieldPaths, fldPath.Child("fieldRef"))...)
	}
	if rr := ev.ValueFrom.ResourceFieldRef; rr != nil {
		n++
		allErrs = append(allErrs, resourceFieldSelector(rr, false, fldPath.Child("resourceFieldRef"))...)
	}
	if ref := ev.ValueFrom.ConfigMapKeyRef; ref != nil {
		n++
		allErrs = append(allErrs, keySelector(ref.Name, ref.Key, fldPath.Child("configMapKeyRef"))...)
	}
	if ref := ev.ValueFrom.SecretKeyRef; ref != nil {
		n++
		allErrs = append(allErrs, keySelector(ref.Name, ref.Key, fldPath.Child("secretKeyRef"))...)
	}
	switch {
	case n == 0:
		allErrs = append(allErrs, field.Invalid(fldPath, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
	case ev.Value != "":
		allErrs = append(allErrs, field.Invalid(fldPath, "", "may not be specified when `value` is not empty"))
	case n > 1:
		allErrs = append(allErrs, field.Invalid(fldPath, "", "may not have more than one field specified at a time"))
	}
	return allErrs
}

// downwardAPIFieldLabels are the pod fields kube can convert for the
// downward API at all; which of them a given use accepts is narrower.
var downwardAPIFieldLabels = map[string]bool{
	"metadata.annotations": true, "metadata.labels": true, "metadata.name": true, "metadata.namespace": true,
	"metadata.uid": true, "spec.nodeName": true, "spec.restartPolicy": true, "spec.serviceAccountName": true,
	"spec.schedulerName": true, "status.phase": true, "status.hostIP": true, "status.hostIPs": true,
	"status.podIP": true, "status.podIPs": true,
}

// splitSubscript splits "metadata.labels['key']" into its path and key.
func splitSubscript(fieldPath string) (string, string, bool) {
	if !strings.HasSuffix(fieldPath, "']") {
		return "", "", false
	}
	parts := strings.SplitN(strings.TrimSuffix(fieldPath, "']"), "['", 2)
	if len(parts) < 2 || parts[0] == "" {
		return "", "", false
	}
	return parts[0], parts[1], true
}

// objectFieldSelector validates a downward API fieldRef. valid lists the
// unsubscripted paths this use accepts, sorted.
func objectFieldSelector(fs *corev1.ObjectFieldSelector, valid []string, fldPath *field.Path) field.ErrorList {
	if fs.APIVersion == "" {
		return field.ErrorList{field.Required(fldPath.Child("apiVersion"), "")}
	}
	if fs.FieldPath == "" {
		return field.ErrorList{field.Required(fldPath.Child("fieldPath"), "")}
	}
	convErr := func(msg string) field.ErrorList {
		return field.ErrorList{field.Invalid(fldPath.Child("fieldPath"), fs.FieldPath, "error converting fieldPath: "+msg)}
	}
	if fs.APIVersion != "v1" {
		return convErr("unsupported pod version: " + fs.APIVersion)
	}
	if path, subscript, ok := splitSubscript(fs.FieldPath); ok {
		switch path {
		case "metadata.annotations":
			return qualifiedName(strings.ToLower(subscript), fldPath)
		case "metadata.labels":
			return qualifiedName(subscript, fldPath)
		default:
			return convErr("field label does not support subscript: " + fs.FieldPath)
		}
	}
	if !downwardAPIFieldLabels[fs.FieldPath] {
		return convErr("field label not supported: " + fs.FieldPath)
	}
	for _, v := range valid {
		if fs.FieldPath == v {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(fldPath.Child("fieldPath"), fs.FieldPath, valid)}
}

func resourceFieldSelector(fs *corev1.ResourceFieldSelector, inVolume bool, fldPath *field.Path) field.ErrorList {
	switch {
	case inVolume && fs.ContainerName == "":
		return field.ErrorList{field.Required(fldPath.Child("containerName"), "")}
	case fs.Resource == "":
		return field.ErrorList{field.Required(fldPath.Child("resource"), "")}
	}
	for _, v := range validResourceFieldPaths {
		if fs.Resource == v {
			return nil
		}
	}
	if strings.HasPrefix(fs.Resource, "requests.hugepages-") || strings.HasPrefix(fs.Resource, "limits.hugepages-") {
		return nil
	}
	return field.ErrorList{field.NotSupported(fldPath.Child("resource"), fs.Resource, validResourceFieldPaths)}
}

func keySelector(name, key string, fldPath *field.Path) field.ErrorList {
	allErrs := dnsSubdomain(name, fldPath.Child("name"))
	if key == "" {
		return append(allErrs, field.Required(fldPath.Child("key"), ""))
	}
	return append(allErrs, invalidEach(fldPath.Child("key"), key, utilvalidation.IsConfigMapKey(key))...)
}

func envFrom(sources []corev1.EnvFromSource, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, src := range sources {
		p := fldPath.Index(i)
		if src.Prefix != "" {
			allErrs = append(allErrs, invalidEach(p.Child("prefix"), src.Prefix, utilvalidation.IsRelaxedEnvVarName(src.Prefix))...)
		}
		n := 0
		if src.ConfigMapRef != nil {
			n++
			allErrs = append(allErrs, refName(src.ConfigMapRef.Name, p.Child("configMapRef"))...)
		}
		if src.SecretRef != nil {
			n++
			allErrs = append(allErrs, refName(src.SecretRef.Name, p.Child("secretRef"))...)
		}
		switch {
		case n == 0:
			allErrs = append(allErrs, field.Invalid(fldPath, "", "must specify one of: `configMapRef` or `secretRef`"))
		case n > 1:
			allErrs = append(allErrs, field.Invalid(fldPath, "", "may not have more than one field specified at a time"))
		}
	}
	return allErrs
}

func refName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath.Child("name"), "")}
	}
	return dnsSubdomain(name, fldPath.Child("name"))
}
