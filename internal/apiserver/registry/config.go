package registry

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeplane/nodeplane/internal/apiserver/printers"
	"github.com/nodeplane/nodeplane/internal/apiserver/validation"
)

// ConfigMaps declares configmaps (what configMap volumes project).
func ConfigMaps() *Resource {
	return &Resource{
		GroupVersion: coreV1, Resource: "configmaps", Singular: "configmap", Kind: "ConfigMap", ListKind: "ConfigMapList",
		Namespaced:    true,
		ShortNames:    []string{"cm"},
		New:           func() runtime.Object { return &corev1.ConfigMap{} },
		NewList:       func() runtime.Object { return &corev1.ConfigMapList{} },
		IndexedFields: []string{"metadata.name"},
		Printer:       printers.ConfigMaps(),
		Strategy: Strategy{
			Validate: func(obj runtime.Object) field.ErrorList { return validation.ConfigMap(obj.(*corev1.ConfigMap)) },
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.ConfigMapUpdate(obj.(*corev1.ConfigMap), old.(*corev1.ConfigMap))
			},
		},
	}
}

// Secrets declares secrets (what secret volumes project); type defaults
// to Opaque.
func Secrets() *Resource {
	return &Resource{
		GroupVersion: coreV1, Resource: "secrets", Singular: "secret", Kind: "Secret", ListKind: "SecretList",
		Namespaced:    true,
		New:           func() runtime.Object { return &corev1.Secret{} },
		NewList:       func() runtime.Object { return &corev1.SecretList{} },
		IndexedFields: []string{"metadata.name"},
		Fields: func(obj runtime.Object) fields.Set {
			return fields.Set{"type": string(obj.(*corev1.Secret).Type)}
		},
		Printer: printers.Secrets(),
		Strategy: Strategy{
			Default: func(obj runtime.Object) {
				s := obj.(*corev1.Secret)
				if s.Type == "" {
					s.Type = corev1.SecretTypeOpaque
				}
				// stringData is write-only: merged into data.
				for k, v := range s.StringData {
					if s.Data == nil {
						s.Data = map[string][]byte{}
					}
					s.Data[k] = []byte(v)
				}
				s.StringData = nil
			},
			Validate: func(obj runtime.Object) field.ErrorList { return validation.Secret(obj.(*corev1.Secret)) },
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.SecretUpdate(obj.(*corev1.Secret), old.(*corev1.Secret))
			},
		},
	}
}
