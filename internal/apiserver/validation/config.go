package validation

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxConfigSize is the most data a ConfigMap or Secret may hold (1 MiB).
const maxConfigSize = 1 * 1024 * 1024

// ConfigMap validates a ConfigMap as kube does: metadata, keys (config
// keys, not in both data and binaryData), total size.
func ConfigMap(cm *corev1.ConfigMap) field.ErrorList {
	allErrs := GenericObjectMeta(cm, true)
	size := 0
	for k, v := range cm.Data {
		allErrs = append(allErrs, invalidEach(field.NewPath("data").Key(k), k, utilvalidation.IsConfigMapKey(k))...)
		if _, dup := cm.BinaryData[k]; dup {
			allErrs = append(allErrs, field.Invalid(field.NewPath("data").Key(k), k, "duplicate of key present in binaryData"))
		}
		size += len(v)
	}
	for k, v := range cm.BinaryData {
		allErrs = append(allErrs, invalidEach(field.NewPath("binaryData").Key(k), k, utilvalidation.IsConfigMapKey(k))...)
		size += len(v)
	}
	if size > maxConfigSize {
		allErrs = append(allErrs, field.TooLong(field.NewPath(""), "", maxConfigSize))
	}
	return allErrs
}

// ConfigMapUpdate forbids changing an immutable ConfigMap's data.
func ConfigMapUpdate(cm, old *corev1.ConfigMap) field.ErrorList {
	allErrs := GenericObjectMetaUpdate(cm, old)
	if old.Immutable != nil && *old.Immutable {
		if cm.Immutable == nil || !*cm.Immutable {
			allErrs = append(allErrs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
		}
		if !reflect.DeepEqual(cm.Data, old.Data) {
			allErrs = append(allErrs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
		}
		if !reflect.DeepEqual(cm.BinaryData, old.BinaryData) {
			allErrs = append(allErrs, field.Forbidden(field.NewPath("binaryData"), "field is immutable when `immutable` is set"))
		}
	}
	return append(allErrs, ConfigMap(cm)...)
}

// Secret validates a Secret: metadata, keys, total size, and the keys its
// type requires.
func Secret(s *corev1.Secret) field.ErrorList {
	allErrs := GenericObjectMeta(s, true)
	dataPath := field.NewPath("data")
	size := 0
	for k, v := range s.Data {
		allErrs = append(allErrs, invalidEach(dataPath.Key(k), k, utilvalidation.IsConfigMapKey(k))...)
		size += len(v)
	}
	if size > maxConfigSize {
		allErrs = append(allErrs, field.TooLong(dataPath, "", maxConfigSize))
	}
	need := map[corev1.SecretType][]string{
		corev1.SecretTypeDockercfg:        {corev1.DockerConfigKey},
		corev1.SecretTypeDockerConfigJson: {corev1.DockerConfigJsonKey},
		corev1.SecretTypeBasicAuth:        nil,
		corev1.SecretTypeSSHAuth:          {corev1.SSHAuthPrivateKey},
		corev1.SecretTypeTLS:              {corev1.TLSCertKey, corev1.TLSPrivateKeyKey},
	}
	for _, k := range need[s.Type] {
		if _, ok := s.Data[k]; !ok {
			allErrs = append(allErrs, field.Required(dataPath.Key(k), ""))
		}
	}
	if s.Type == corev1.SecretTypeServiceAccountToken {
		if v := s.Annotations[corev1.ServiceAccountNameKey]; v == "" {
			allErrs = append(allErrs, field.Required(field.NewPath("metadata", "annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	}
	return allErrs
}

// SecretUpdate forbids changing the type, and an immutable Secret's data.
func SecretUpdate(s, old *corev1.Secret) field.ErrorList {
	allErrs := GenericObjectMetaUpdate(s, old)
	if s.Type != old.Type {
		allErrs = append(allErrs, field.Invalid(field.NewPath("type"), s.Type, "field is immutable"))
	}
	if old.Immutable != nil && *old.Immutable {
		if s.Immutable == nil || !*s.Immutable {
			allErrs = append(allErrs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
		}
		if !reflect.DeepEqual(s.Data, old.Data) {
			allErrs = append(allErrs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
		}
	}
	return append(allErrs, Secret(s)...)
}
