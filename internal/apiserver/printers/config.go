package printers

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConfigMaps prints configmaps: NAME DATA AGE (DATA counts data and
// binaryData keys).
func ConfigMaps() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Data", "integer", "Number of keys in the configmap"),
			ageColumn(),
		},
		Cells: cellsOf(func(cm *corev1.ConfigMap, now time.Time) []interface{} {
			return []interface{}{cm.Name, int64(len(cm.Data) + len(cm.BinaryData)), age(cm.CreationTimestamp, now)}
		}),
	}
}

// Secrets prints secrets: NAME TYPE DATA AGE.
func Secrets() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Type", "string", "The type of the secret"),
			column("Data", "integer", "Number of keys in the secret"),
			ageColumn(),
		},
		Cells: cellsOf(func(s *corev1.Secret, now time.Time) []interface{} {
			return []interface{}{s.Name, string(s.Type), int64(len(s.Data)), age(s.CreationTimestamp, now)}
		}),
	}
}
