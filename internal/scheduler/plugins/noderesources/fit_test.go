package noderesources_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
	ft "github.com/nodeplane/nodeplane/internal/scheduler/framework/frameworktest"
	"github.com/nodeplane/nodeplane/internal/scheduler/plugins/noderesources"
)

func newFit(t *testing.T, cfg noderesources.FitConfig) *noderesources.Fit {
	t.Helper()
	f, err := noderesources.NewFit(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func filter(t *testing.T, f *noderesources.Fit, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	t.Helper()
	state := framework.NewCycleState()
	if _, st := f.PreFilter(context.Background(), state, pod, []*framework.NodeInfo{ni}); !st.IsSuccess() {
		t.Fatal(st)
	}
	return f.Filter(context.Background(), state, pod, ni)
}

func TestFitFilter(t *testing.T) {
	// A node with 2 cores, 4Gi, 10Gi disk, 2 GPUs and room for 3 pods, of
	// which one pod already uses 1 core, 1Gi and 1 GPU.
	small := func(extra ...*corev1.Pod) *framework.NodeInfo {
		node := ft.Node("n1", ft.Allocatable("cpu", "2", "memory", "4Gi", "ephemeral-storage", "10Gi", "pods", "3", "example.com/gpu", "2"))
		used := ft.Pod("used", ft.Container("cpu", "1", "memory", "1Gi", "example.com/gpu", "1"))
		return ft.NodeInfo(node, append([]*corev1.Pod{used}, extra...)...)
	}
	tests := []struct {
		name        string
		pod         *corev1.Pod
		node        *framework.NodeInfo
		cfg         noderesources.FitConfig
		wantCode    framework.Code
		wantReasons string
	}{
		{name: "a pod that fits the remaining room passes", pod: ft.Pod("p", ft.Container("cpu", "1", "memory", "3Gi")), node: small()},
		{
			name: "one millicore too many is insufficient cpu", pod: ft.Pod("p", ft.Container("cpu", "1001m")), node: small(),
			wantCode: framework.Unschedulable, wantReasons: "Insufficient cpu",
		},
		{
			name: "every missing resource is a reason, cpu before memory", pod: ft.Pod("p", ft.Container("memory", "4Gi", "cpu", "2")), node: small(),
			wantCode: framework.Unschedulable, wantReasons: "Insufficient cpu, Insufficient memory",
		},
		{
			name: "ephemeral storage counts", pod: ft.Pod("p", ft.Container("ephemeral-storage", "11Gi")), node: small(),
			wantCode: framework.UnschedulableAndUnresolvable, wantReasons: "Insufficient ephemeral-storage",
		},
		{
			name: "the last pod slot taken is too many pods", pod: ft.Pod("p", ft.Container()),
			node:     small(ft.Pod("a", ft.Container()), ft.Pod("b", ft.Container())),
			wantCode: framework.Unschedulable, wantReasons: "Too many pods",
		},
		{
			name: "a pod without requests fits any node with a free slot", pod: ft.Pod("p", ft.Container()),
			node: small(ft.Pod("hog", ft.Container("cpu", "1", "memory", "3Gi"))),
		},
		{
			name: "a large init container needs its own room", pod: ft.Pod("p", ft.InitContainer("cpu", "1500m"), ft.Container("cpu", "100m")), node: small(),
			wantCode: framework.Unschedulable, wantReasons: "Insufficient cpu",
		},
		{
			name: "an init container smaller than the containers adds nothing", pod: ft.Pod("p", ft.InitContainer("cpu", "500m"), ft.Container("cpu", "1")), node: small(),
		},
		{
			name: "overhead tips a pod over", pod: ft.Pod("p", ft.Container("cpu", "900m"), ft.Overhead("cpu", "200m")), node: small(),
			wantCode: framework.Unschedulable, wantReasons: "Insufficient cpu",
		},
		{
			name: "a sidecar's request is added to the containers'", pod: ft.Pod("p", ft.Sidecar("cpu", "600m"), ft.Container("cpu", "600m")), node: small(),
			wantCode: framework.Unschedulable, wantReasons: "Insufficient cpu",
		},
		{
			name: "an extended resource in use is insufficient", pod: ft.Pod("p", ft.Container("example.com/gpu", "2")), node: small(),
			wantCode: framework.Unschedulable, wantReasons: "Insufficient example.com/gpu",
		},
		{
			name: "an extended resource the node lacks is insufficient for good", pod: ft.Pod("p", ft.Container("example.org/fpga", "1")), node: small(),
			wantCode: framework.UnschedulableAndUnresolvable, wantReasons: "Insufficient example.org/fpga",
		},
		{
			name: "an ignored extended resource is not checked", pod: ft.Pod("p", ft.Container("example.org/fpga", "1")), node: small(),
			cfg: noderesources.FitConfig{IgnoredResources: []string{"example.org/fpga"}},
		},
		{
			name: "an ignored resource group is not checked", pod: ft.Pod("p", ft.Container("example.org/fpga", "1")), node: small(),
			cfg: noderesources.FitConfig{IgnoredResourceGroups: []string{"example.org"}},
		},
		{
			name: "asking more than the node has at all is unresolvable", pod: ft.Pod("p", ft.Container("cpu", "3")), node: small(),
			wantCode: framework.UnschedulableAndUnresolvable, wantReasons: "Insufficient cpu",
		},
		{
			name: "hugepages are checked like extended resources", pod: ft.Pod("p", ft.Container("hugepages-2Mi", "2Mi")), node: small(),
			wantCode: framework.UnschedulableAndUnresolvable, wantReasons: "Insufficient hugepages-2Mi",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := filter(t, newFit(t, tt.cfg), tt.pod, tt.node)
			if st.Code() != tt.wantCode || st.Message() != tt.wantReasons {
				t.Errorf("got %v %q, want %v %q", st.Code(), st.Message(), tt.wantCode, tt.wantReasons)
			}
		})
	}
}

func TestFitsListsEveryShortage(t *testing.T) {
	ni := ft.NodeInfo(ft.Node("n1", ft.Allocatable("cpu", "1", "memory", "1Gi", "pods", "1")), ft.Pod("a", ft.Container("cpu", "500m")))
	got := noderesources.Fits(ft.Pod("p", ft.Container("cpu", "600m", "memory", "2Gi")), ni)
	var names []string
	for _, r := range got {
		names = append(names, string(r.ResourceName))
	}
	if strings.Join(names, ",") != "pods,cpu,memory" {
		t.Fatalf("shortages %v, want pods,cpu,memory", names)
	}
	if got[1].Requested != 600 || got[1].Used != 500 || got[1].Capacity != 1000 || got[1].Unresolvable {
		t.Errorf("cpu shortage %+v, want 600 requested of 1000 with 500 used, resolvable", got[1])
	}
	if !got[2].Unresolvable {
		t.Errorf("memory shortage %+v: 2Gi of 1Gi should be unresolvable", got[2])
	}
}

func scoreAll(t *testing.T, p interface {
	framework.PreScorePlugin
	framework.ScorePlugin
}, pod *corev1.Pod, nodes ...*framework.NodeInfo) (map[string]int64, *framework.Status) {
	t.Helper()
	ctx, state := context.Background(), framework.NewCycleState()
	if st := p.PreScore(ctx, state, pod, nodes, nodes); !st.IsSuccess() {
		return nil, st
	}
	out := map[string]int64{}
	for _, ni := range nodes {
		s, st := p.Score(ctx, state, pod, ni)
		if !st.IsSuccess() {
			t.Fatal(st)
		}
		out[ni.Name()] = s
	}
	return out, nil
}

func TestLeastAllocatedScore(t *testing.T) {
	f := newFit(t, noderesources.DefaultFitConfig())
	node := func(name string, pods ...*corev1.Pod) *framework.NodeInfo {
		return ft.NodeInfo(ft.Node(name, ft.Allocatable("cpu", "4", "memory", "10Gi", "pods", "110")), pods...)
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		node *framework.NodeInfo
		want int64
	}{
		// cpu (4000−1000)·100/4000 = 75; memory (10−2.5)·100/10 = 75.
		{name: "an empty node scores by the pod's own share", pod: ft.Pod("p", ft.Container("cpu", "1", "memory", "2560Mi")), node: node("a"), want: 75},
		// cpu (4000−3000)/40 = 25; memory (10240−5120)/102.4 = 50 → 37.
		{name: "the node's pods count too", pod: ft.Pod("p", ft.Container("cpu", "1", "memory", "2560Mi")), node: node("b", ft.Pod("x", ft.Container("cpu", "2", "memory", "2560Mi"))), want: 37},
		// cpu (4000−100)·100/4000 = 97; memory (10240−200)·100/10240 = 98 → 97.
		{name: "a pod without requests scores as 100m and 200Mi", pod: ft.Pod("p", ft.Container()), node: node("c"), want: 97},
		{name: "more than the node has scores 0 for that resource", pod: ft.Pod("p", ft.Container("cpu", "5", "memory", "0")), node: node("d"), want: 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, st := scoreAll(t, f, tt.pod, tt.node)
			if st != nil {
				t.Fatal(st)
			}
			if got[tt.node.Name()] != tt.want {
				t.Errorf("score %d, want %d", got[tt.node.Name()], tt.want)
			}
		})
	}
}

func TestBalancedAllocationScore(t *testing.T) {
	b, err := noderesources.NewBalancedAllocation(nil)
	if err != nil {
		t.Fatal(err)
	}
	node := func(name string, pods ...*corev1.Pod) *framework.NodeInfo {
		return ft.NodeInfo(ft.Node(name, ft.Allocatable("cpu", "4", "memory", "8Gi", "pods", "110")), pods...)
	}
	pod := ft.Pod("p", ft.Container("cpu", "1", "memory", "2Gi"))
	got, st := scoreAll(t, b, pod,
		node("even"), // 1/4 cpu, 2/8 memory → σ 0 → 100
		node("cpu-heavy", ft.Pod("x", ft.Container("cpu", "2"))),      // 3/4 vs 1/4 → σ 0.25 → 75
		node("full-cpu", ft.Pod("y", ft.Container("cpu", "4"))),       // 5/4 capped at 1 vs 1/4 → σ 0.375 → 62
		node("mem-heavy", ft.Pod("z", ft.Container("memory", "4Gi"))), // 1/4 vs 6/8 → 75
	)
	if st != nil {
		t.Fatal(st)
	}
	want := map[string]int64{"even": 100, "cpu-heavy": 75, "full-cpu": 62, "mem-heavy": 75}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s scored %d, want %d", name, got[name], w)
		}
	}
	if _, st := scoreAll(t, b, ft.Pod("best-effort", ft.Container()), node("even")); !st.IsSkip() {
		t.Errorf("a best-effort pod: PreScore %v, want Skip", st)
	}
}
