package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestFieldDiff(t *testing.T) {
	base := func() corev1.PodSpec {
		return corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyAlways,
			NodeSelector:  map[string]string{"zone": "a"},
			Containers: []corev1.Container{{
				Name:  "c",
				Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"),
				}},
			}},
		}
	}
	tests := []struct {
		name   string
		change func(*corev1.PodSpec)
		want   string
	}{
		{"equal values give an empty diff", func(*corev1.PodSpec) {}, ""},
		{"a changed top-level field is named with both values", func(s *corev1.PodSpec) {
			s.RestartPolicy = corev1.RestartPolicyNever
		}, "-\tRestartPolicy: \"Always\"\n+\tRestartPolicy: \"Never\"\n"},
		{"a field inside a slice element is named by its index", func(s *corev1.PodSpec) {
			s.Containers[0].Image = "nginx"
		}, "-\tContainers[0].Image: \"busybox\"\n+\tContainers[0].Image: \"nginx\"\n"},
		{"a quantity prints as kube writes it", func(s *corev1.PodSpec) {
			s.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
		}, "-\tContainers[0].Resources.Requests[\"cpu\"]: 100m\n+\tContainers[0].Resources.Requests[\"cpu\"]: 2\n"},
		{"a map key only on one side shows as none", func(s *corev1.PodSpec) {
			s.NodeSelector["rack"] = "r1"
		}, "-\tNodeSelector[\"rack\"]: <none>\n+\tNodeSelector[\"rack\"]: \"r1\"\n"},
		{"a pointer set from nil shows nil and the value", func(s *corev1.PodSpec) {
			s.Hostname = "h"
			v := int64(5)
			s.ActiveDeadlineSeconds = &v
		}, "-\tActiveDeadlineSeconds: nil\n+\tActiveDeadlineSeconds: 5\n-\tHostname: \"\"\n+\tHostname: \"h\"\n"},
		{"a slice of another length is shown whole", func(s *corev1.PodSpec) {
			s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "s"}}
		}, "-\tImagePullSecrets: nil\n+\tImagePullSecrets: []v1.LocalObjectReference{v1.LocalObjectReference{Name:\"s\"}}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, changed := base(), base()
			tt.change(&changed)
			if got := fieldDiff(old, changed); got != tt.want {
				t.Errorf("fieldDiff:\ngot  %q\nwant %q", got, tt.want)
			}
		})
	}
}
