package config

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// list builds a ResourceList from name=quantity pairs.
func list(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func resolve(t *testing.T, file kubeletv1beta1.KubeletConfiguration) Settings {
	t.Helper()
	s, err := Resolve(&file)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func wantList(t *testing.T, what string, got, want corev1.ResourceList) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g.Cmp(w) != 0 {
			t.Errorf("%s[%s] = %s, want %s", what, name, g.String(), w.String())
		}
	}
}

func TestAllocatable(t *testing.T) {
	const gi, mi = 1 << 30, 1 << 20
	qty := func(v int64) resource.Quantity { return *resource.NewQuantity(v, resource.BinarySI) }
	tests := []struct {
		name     string
		capacity corev1.ResourceList
		file     kubeletv1beta1.KubeletConfiguration
		want     corev1.ResourceList
	}{
		{
			name:     "the SPEC example: 4 CPU / 16Gi with system and kube reservations and default eviction",
			capacity: list("cpu", "4", "memory", "16Gi", "pods", "110"),
			file: kubeletv1beta1.KubeletConfiguration{
				SystemReserved: map[string]string{"cpu": "500m", "memory": "1Gi"},
				KubeReserved:   map[string]string{"cpu": "500m", "memory": "1Gi"},
			},
			want: corev1.ResourceList{
				"cpu":    resource.MustParse("3"),
				"memory": qty(16*gi - 2*gi - 100*mi),
				"pods":   resource.MustParse("110"),
			},
		},
		{
			name:     "a percentage memory threshold is taken of memory capacity",
			capacity: list("cpu", "2", "memory", "16Gi"),
			file:     kubeletv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "10%"}},
			want:     corev1.ResourceList{"cpu": resource.MustParse("2"), "memory": qty(16*gi - 16*gi/10)},
		},
		{
			name:     "the default nodefs.available threshold of 10% is held back from ephemeral-storage",
			capacity: list("ephemeral-storage", "100Gi", "memory", "1Gi"),
			file:     kubeletv1beta1.KubeletConfiguration{SystemReserved: map[string]string{"ephemeral-storage": "5Gi"}},
			want:     corev1.ResourceList{"ephemeral-storage": qty(100*gi - 10*gi - 5*gi), "memory": qty(1*gi - 100*mi)},
		},
		{
			name:     "an absolute nodefs.available threshold is held back as is",
			capacity: list("ephemeral-storage", "100Gi"),
			file:     kubeletv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"nodefs.available": "20Gi"}},
			want:     corev1.ResourceList{"ephemeral-storage": qty(80 * gi)},
		},
		{
			name:     "thresholds on other signals hold nothing back",
			capacity: list("memory", "8Gi", "ephemeral-storage", "100Gi"),
			file:     kubeletv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"imagefs.available": "50%", "pid.available": "100"}},
			want:     list("memory", "8Gi", "ephemeral-storage", "100Gi"),
		},
		{
			name:     "reservations above capacity floor allocatable at zero",
			capacity: list("cpu", "1", "memory", "1Gi"),
			file: kubeletv1beta1.KubeletConfiguration{
				SystemReserved: map[string]string{"cpu": "2", "memory": "2Gi"},
			},
			want: list("cpu", "0", "memory", "0"),
		},
		{
			name:     "a pid reservation and resources missing from capacity are ignored",
			capacity: list("cpu", "4", "pods", "110"),
			file: kubeletv1beta1.KubeletConfiguration{
				SystemReserved: map[string]string{"pid": "1000", "memory": "1Gi"},
			},
			want: list("cpu", "4", "pods", "110"),
		},
		{
			name:     "reservedSystemCPUs reserves whole CPUs in place of the cpu reservations",
			capacity: list("cpu", "4"),
			file: kubeletv1beta1.KubeletConfiguration{
				ReservedSystemCPUs: "0-1",
				KubeReserved:       map[string]string{"cpu": "500m"},
			},
			want: list("cpu", "2"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.capacity.DeepCopy()
			got := Allocatable(tt.capacity, resolve(t, tt.file))
			wantList(t, "allocatable", got, tt.want)
			wantList(t, "capacity after Allocatable", tt.capacity, before)
		})
	}
}

func TestCapacity(t *testing.T) {
	tests := []struct {
		name     string
		machine  corev1.ResourceList
		file     kubeletv1beta1.KubeletConfiguration
		wantPods int64
	}{
		{"pods defaults to maxPods 110", list("cpu", "4"), kubeletv1beta1.KubeletConfiguration{}, 110},
		{"a configured maxPods is the pods capacity", list("cpu", "4"), kubeletv1beta1.KubeletConfiguration{MaxPods: 30}, 30},
		{"podsPerCore caps pods at cores times podsPerCore", list("cpu", "4"), kubeletv1beta1.KubeletConfiguration{PodsPerCore: 10}, 40},
		{"maxPods still caps pods when podsPerCore allows more", list("cpu", "4"), kubeletv1beta1.KubeletConfiguration{PodsPerCore: 100}, 110},
		{"a fractional CPU count is rounded up to whole cores", list("cpu", "1500m"), kubeletv1beta1.KubeletConfiguration{PodsPerCore: 10}, 20},
		{"an unknown CPU count leaves pods at maxPods", list("cpu", "0"), kubeletv1beta1.KubeletConfiguration{PodsPerCore: 10}, 110},
		{"a machine without a cpu entry leaves pods at maxPods", nil, kubeletv1beta1.KubeletConfiguration{PodsPerCore: 10}, 110},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.machine.DeepCopy()
			got := Capacity(tt.machine, resolve(t, tt.file))
			want := before.DeepCopy()
			if want == nil {
				want = corev1.ResourceList{}
			}
			want[corev1.ResourcePods] = *resource.NewQuantity(tt.wantPods, resource.DecimalSI)
			wantList(t, "capacity", got, want)
			if _, ok := tt.machine[corev1.ResourcePods]; ok {
				t.Error("Capacity modified the machine list")
			}
		})
	}
}
