package pods

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodeplane/nodeplane/internal/agent/podstatus"
)

func TestAdmission(t *testing.T) {
	tests := []struct {
		name string
		node *corev1.Node
		// running are started (in this order) before pod arrives.
		running    []*corev1.Pod
		pod        *corev1.Pod
		wantPhase  corev1.PodPhase
		wantReason string
	}{
		{
			name:      "a bound pod that fits is started and reported Running",
			pod:       testPod("web", "500m"),
			wantPhase: corev1.PodRunning,
		},
		{
			name:       "a pod asking for more cpu than allocatable is rejected and never started",
			pod:        testPod("big", "3"),
			wantPhase:  corev1.PodFailed,
			wantReason: podstatus.ReasonOutOfCPU,
		},
		{
			name:       "a pod that fits an empty node is rejected when the running pods use the cpu",
			running:    []*corev1.Pod{testPod("first", "1500m", createdAgo(time.Hour))},
			pod:        testPod("second", "1"),
			wantPhase:  corev1.PodFailed,
			wantReason: podstatus.ReasonOutOfCPU,
		},
		{
			name:       "a pod beyond the node's pod count is rejected",
			node:       testNode(func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("1") }),
			running:    []*corev1.Pod{testPod("first", "100m", createdAgo(time.Hour))},
			pod:        testPod("second", "100m"),
			wantPhase:  corev1.PodFailed,
			wantReason: podstatus.ReasonOutOfPods,
		},
		{
			name: "a pod with a nodeSelector the node lacks is rejected",
			pod: testPod("picky", "100m", func(p *corev1.Pod) {
				p.Spec.NodeSelector = map[string]string{"topology.kubernetes.io/zone": "zone-b"}
			}),
			wantPhase:  corev1.PodFailed,
			wantReason: podstatus.ReasonNodeAffinity,
		},
		{
			name: "a pod with a nodeSelector the node has is started",
			pod: testPod("zonal", "100m", func(p *corev1.Pod) {
				p.Spec.NodeSelector = map[string]string{"topology.kubernetes.io/zone": "zone-a"}
			}),
			wantPhase: corev1.PodRunning,
		},
		{
			name: "a pod not tolerating a NoExecute taint is rejected",
			node: testNode(func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}}
			}),
			pod:        testPod("web", "100m"),
			wantPhase:  corev1.PodFailed,
			wantReason: podstatus.ReasonTaintToleration,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, options{node: tt.node})
			for _, p := range tt.running {
				h.m.Upsert(h.api.add(p))
				if !h.running(p.Name) {
					t.Fatalf("pod %s is not running before the test pod arrives; calls %q", p.Name, h.ops.all())
				}
			}
			before := len(h.ops.all())

			h.m.Upsert(h.api.add(tt.pod))

			got := h.api.get(tt.pod.UID).Status
			if got.Phase != tt.wantPhase || got.Reason != tt.wantReason {
				t.Fatalf("status phase %q reason %q (message %q), want %q %q", got.Phase, got.Reason, got.Message, tt.wantPhase, tt.wantReason)
			}
			calls := h.ops.all()[before:]
			if tt.wantPhase == corev1.PodRunning {
				if want := []string{"start " + tt.pod.Name, "status " + tt.pod.Name + " Running"}; !slices.Equal(calls, want) {
					t.Errorf("calls %q, want %q", calls, want)
				}
				wantAddresses(t, got)
				return
			}
			if want := []string{fmt.Sprintf("status %s Failed %s", tt.pod.Name, tt.wantReason)}; !slices.Equal(calls, want) {
				t.Errorf("calls %q, want %q (a rejected pod is never started)", calls, want)
			}
			if !strings.HasPrefix(got.Message, "Pod was rejected: ") {
				t.Errorf("message %q, want the kubelet's rejection prefix", got.Message)
			}
			if want := "Warning " + tt.wantReason + " " + tt.pod.Name; !slices.Contains(h.events.all(), want) {
				t.Errorf("events %q, want %q", h.events.all(), want)
			}
			for _, p := range tt.running {
				if !h.running(p.Name) {
					t.Errorf("pod %s stopped running when %s was rejected", p.Name, tt.pod.Name)
				}
			}
		})
	}
}

func wantAddresses(t *testing.T, st corev1.PodStatus) {
	t.Helper()
	if st.HostIP != hostIPs[0] || st.PodIP != hostIPs[0] {
		t.Errorf("hostIP %q podIP %q, want both %q", st.HostIP, st.PodIP, hostIPs[0])
	}
	var hostList, podList []string
	for _, ip := range st.HostIPs {
		hostList = append(hostList, ip.IP)
	}
	for _, ip := range st.PodIPs {
		podList = append(podList, ip.IP)
	}
	if !slices.Equal(hostList, hostIPs) || !slices.Equal(podList, hostIPs) {
		t.Errorf("hostIPs %q podIPs %q, want both %q", hostList, podList, hostIPs)
	}
}

func TestPodsListedTogetherAreAdmittedOldestFirst(t *testing.T) {
	h := newHarness(t, options{})
	older := h.api.add(testPod("older", "1500m", createdAgo(time.Hour)))
	newer := h.api.add(testPod("newer", "1500m", createdAgo(time.Minute)))

	h.m.Replace([]*corev1.Pod{newer, older})

	if !h.running("older") || h.running("newer") {
		t.Fatalf("older running %v, newer running %v; want only the older; calls %q", h.running("older"), h.running("newer"), h.ops.all())
	}
	if got := h.api.get(newer.UID).Status; got.Phase != corev1.PodFailed || got.Reason != podstatus.ReasonOutOfCPU {
		t.Errorf("newer pod status %q %q, want Failed %s", got.Phase, got.Reason, podstatus.ReasonOutOfCPU)
	}
}

func TestRejectedPodIsNotAdmittedAgain(t *testing.T) {
	h := newHarness(t, options{node: testNode(func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("1") })})
	first := h.api.add(testPod("first", "1", createdAgo(time.Hour)))
	h.m.Upsert(first)
	pending := h.api.add(testPod("second", "1"))
	h.m.Upsert(pending)
	if h.running("second") {
		t.Fatal("second pod started on a full node")
	}
	// The node frees up: the pod that held the cpu is gone.
	h.m.Delete(first)
	if h.running("first") {
		t.Fatal("first pod still runs after it left the API")
	}
	writes := h.ops.count("status second")

	h.m.Upsert(h.api.get(pending.UID))

	if h.running("second") {
		t.Error("a rejected pod was admitted on a later Upsert")
	}
	if got := h.ops.count("status second"); got != writes {
		t.Errorf("status of the rejected pod written %d more times, want none: %q", got-writes, h.ops.all())
	}
	if got := h.api.get(pending.UID).Status; got.Phase != corev1.PodFailed {
		t.Errorf("rejected pod's phase is %q, want Failed", got.Phase)
	}
}

func TestRejectionIsPostedAgainWhenItsWriteFailed(t *testing.T) {
	h := newHarness(t, options{workers: 1})
	ctx := context.Background()
	pod := h.api.add(testPod("big", "3"))
	h.api.statusErrs = []error{apierrors.NewServiceUnavailable("etcd is down")}
	h.m.Upsert(pod)

	if err := h.m.sync(ctx, pod.UID); err == nil {
		t.Fatal("sync reported success although the rejection was not written")
	}
	if err := h.m.sync(ctx, pod.UID); err != nil {
		t.Fatalf("second sync: %v", err)
	}

	if got := h.api.get(pod.UID).Status; got.Phase != corev1.PodFailed || got.Reason != podstatus.ReasonOutOfCPU {
		t.Errorf("status %q %q after the retry, want Failed %s", got.Phase, got.Reason, podstatus.ReasonOutOfCPU)
	}
	if h.running("big") {
		t.Error("the retry started the rejected pod")
	}
	if got := h.events.all(); len(got) != 1 {
		t.Errorf("events %q, want the rejection recorded once", got)
	}
}
