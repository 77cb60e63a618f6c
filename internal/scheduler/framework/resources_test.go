package framework_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
	ft "github.com/nodeplane/nodeplane/internal/scheduler/framework/frameworktest"
)

const mi = 1024 * 1024

func TestComputePodRequests(t *testing.T) {
	tests := []struct {
		name              string
		pod               *corev1.Pod
		wantCPU, wantMem  int64
		wantNZCPU, wantNZ int64
		wantScalar        map[corev1.ResourceName]int64
	}{
		{
			name:    "one container's requests are the pod's",
			pod:     ft.Pod("p", ft.Container("cpu", "500m", "memory", "128Mi")),
			wantCPU: 500, wantMem: 128 * mi, wantNZCPU: 500, wantNZ: 128 * mi,
		},
		{
			name:    "regular containers add up",
			pod:     ft.Pod("p", ft.Container("cpu", "500m", "memory", "128Mi"), ft.Container("cpu", "250m", "memory", "64Mi")),
			wantCPU: 750, wantMem: 192 * mi, wantNZCPU: 750, wantNZ: 192 * mi,
		},
		{
			name: "an init container larger than the containers' sum decides",
			pod: ft.Pod("p", ft.InitContainer("cpu", "2", "memory", "1Gi"),
				ft.Container("cpu", "500m", "memory", "128Mi"), ft.Container("cpu", "500m", "memory", "128Mi")),
			wantCPU: 2000, wantMem: 1024 * mi, wantNZCPU: 2000, wantNZ: 1024 * mi,
		},
		{
			name: "init containers are compared one by one, not summed, per resource",
			pod: ft.Pod("p", ft.InitContainer("cpu", "2", "memory", "1G"), ft.InitContainer("cpu", "2", "memory", "3G"),
				ft.Container("cpu", "2", "memory", "1G"), ft.Container("cpu", "1", "memory", "1G")),
			wantCPU: 3000, wantMem: 3_000_000_000, wantNZCPU: 3000, wantNZ: 3_000_000_000,
		},
		{
			name: "overhead is added on top of the larger of init and regular",
			pod:  ft.Pod("p", ft.InitContainer("cpu", "1"), ft.Container("cpu", "250m", "memory", "64Mi"), ft.Overhead("cpu", "100m", "memory", "10Mi")),
			// The init container sets no memory, so for scoring it counts 200Mi.
			wantCPU: 1100, wantMem: 74 * mi, wantNZCPU: 1100, wantNZ: 210 * mi,
		},
		{
			name:    "a sidecar runs next to the regular containers",
			pod:     ft.Pod("p", ft.Sidecar("cpu", "100m", "memory", "32Mi"), ft.Container("cpu", "200m", "memory", "64Mi")),
			wantCPU: 300, wantMem: 96 * mi, wantNZCPU: 300, wantNZ: 96 * mi,
		},
		{
			name:    "an init container after a sidecar runs while the sidecar does",
			pod:     ft.Pod("p", ft.Sidecar("cpu", "500m"), ft.InitContainer("cpu", "1"), ft.Container("cpu", "100m")),
			wantCPU: 1500, wantNZCPU: 1500, wantNZ: 2 * framework.DefaultMemoryRequest,
		},
		{
			name:    "an init container before a sidecar does not count it",
			pod:     ft.Pod("p", ft.InitContainer("cpu", "1"), ft.Sidecar("cpu", "500m"), ft.Container("cpu", "100m")),
			wantCPU: 1000, wantNZCPU: 1000, wantNZ: 2 * framework.DefaultMemoryRequest,
		},
		{
			name:       "extended resources and hugepages are scalars, unprefixed unknown names are ignored",
			pod:        ft.Pod("p", ft.Container("example.com/gpu", "2", "hugepages-2Mi", "4Mi", "storage", "1Gi")),
			wantNZCPU:  framework.DefaultMilliCPURequest,
			wantNZ:     framework.DefaultMemoryRequest,
			wantScalar: map[corev1.ResourceName]int64{"example.com/gpu": 2, "hugepages-2Mi": 4 * mi},
		},
		{
			name:      "a container without requests costs nothing but scores as 100m and 200Mi",
			pod:       ft.Pod("p", ft.Container()),
			wantNZCPU: 100, wantNZ: 200 * mi,
		},
		{
			name:      "an explicit zero request is kept for scoring",
			pod:       ft.Pod("p", ft.Container("cpu", "0", "memory", "0")),
			wantNZCPU: 0, wantNZ: 0,
		},
		{
			name:    "pod-level requests replace the container sum, then overhead is added",
			pod:     ft.Pod("p", ft.Container("cpu", "100m"), ft.Container("cpu", "100m"), ft.PodLevelRequests("cpu", "1", "memory", "1Gi"), ft.Overhead("cpu", "50m")),
			wantCPU: 1050, wantMem: 1024 * mi, wantNZCPU: 1050, wantNZ: 1024 * mi,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, nzCPU, nzMem := framework.ComputePodRequests(tt.pod)
			if req.MilliCPU != tt.wantCPU || req.Memory != tt.wantMem {
				t.Errorf("requests cpu=%dm memory=%d, want cpu=%dm memory=%d", req.MilliCPU, req.Memory, tt.wantCPU, tt.wantMem)
			}
			if nzCPU != tt.wantNZCPU || nzMem != tt.wantNZ {
				t.Errorf("scoring requests cpu=%dm memory=%d, want cpu=%dm memory=%d", nzCPU, nzMem, tt.wantNZCPU, tt.wantNZ)
			}
			if len(req.Scalar) != len(tt.wantScalar) {
				t.Errorf("scalars %v, want %v", req.Scalar, tt.wantScalar)
			}
			for name, want := range tt.wantScalar {
				if got := req.Scalar[name]; got != want {
					t.Errorf("scalar %s = %d, want %d", name, got, want)
				}
			}
		})
	}
}

func TestNodeInfoAccountsPods(t *testing.T) {
	a := ft.Pod("a", ft.Container("cpu", "1", "memory", "1Gi", "example.com/gpu", "1"))
	b := ft.Pod("b", ft.Container())
	ni := ft.NodeInfo(ft.Node("n1"), a, b)
	if ni.Requested.MilliCPU != 1000 || ni.Requested.Scalar["example.com/gpu"] != 1 || len(ni.Pods) != 2 {
		t.Fatalf("after adding: requested %+v with %d pods, want cpu 1000m, 1 gpu, 2 pods", ni.Requested, len(ni.Pods))
	}
	if ni.NonZeroRequested.MilliCPU != 1100 || ni.NonZeroRequested.Memory != 1024*mi+200*mi {
		t.Errorf("scoring requests %+v, want 1100m and 1224Mi", ni.NonZeroRequested)
	}
	clone := ni.Clone()
	if !ni.RemovePod(a) {
		t.Fatal("RemovePod(a) reported the pod missing")
	}
	if ni.RemovePod(a) {
		t.Error("removing a pod twice reported success")
	}
	if ni.Requested.MilliCPU != 0 || ni.Requested.Scalar["example.com/gpu"] != 0 || len(ni.Pods) != 1 {
		t.Errorf("after removing: requested %+v with %d pods, want nothing requested and 1 pod", ni.Requested, len(ni.Pods))
	}
	if clone.Requested.MilliCPU != 1000 || clone.Requested.Scalar["example.com/gpu"] != 1 || len(clone.Pods) != 2 {
		t.Errorf("the clone changed with the original: %+v with %d pods", clone.Requested, len(clone.Pods))
	}
	if ni.Allocatable.AllowedPodNumber != 110 || ni.Allocatable.MilliCPU != 4000 {
		t.Errorf("allocatable %+v, want 110 pods and 4000m", ni.Allocatable)
	}
}
