package pods

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestEvictPostsTheEvictedStatusAndEvent(t *testing.T) {
	h := newHarness(t, options{})
	pod := h.api.add(testPod("web", "100m"))
	h.m.Upsert(pod)
	if !h.running("web") {
		t.Fatal("pod not running")
	}
	const msg = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
	if err := h.m.Evict(context.Background(), pod.UID, time.Second, msg); err != nil {
		t.Fatalf("Evict: %v", err)
	}
	got := h.api.get(pod.UID).Status
	if got.Phase != corev1.PodFailed || got.Reason != "Evicted" || got.Message != msg {
		t.Errorf("final status %s/%s/%q, want Failed/Evicted with the eviction message", got.Phase, got.Reason, got.Message)
	}
	found := false
	for _, c := range got.Conditions {
		found = found || (c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "TerminationByKubelet" && c.Message == msg)
	}
	if !found {
		t.Errorf("no DisruptionTarget=True/TerminationByKubelet condition: %+v", got.Conditions)
	}
	if h.ops.count("kill web 1s") != 1 {
		t.Errorf("runtime calls %q, want one kill with 1 s of grace", h.ops.all())
	}
	if i := slices.Index(h.events.all(), "Warning Evicted web"); i < 0 || h.events.messages[i] != msg {
		t.Errorf("events %q, want a Warning Evicted event with the message", h.events.all())
	}
	// A later sync keeps the final status.
	h.m.Notify(pod.UID)
	h.m.Upsert(h.api.get(pod.UID))
	if got := h.api.get(pod.UID).Status; got.Reason != "Evicted" || got.Phase != corev1.PodFailed {
		t.Errorf("a later sync rewrote the final status to %s/%s", got.Phase, got.Reason)
	}
	if len(h.m.Running()) != 0 {
		t.Error("an evicted pod is still listed as running")
	}
}

func TestPressureAdmissionRefusesNewPods(t *testing.T) {
	h := newHarness(t, options{pressureAdmit: func(p *corev1.Pod) (bool, string, string) {
		return false, "Evicted", "The node had condition: [DiskPressure]. "
	}})
	pod := h.api.add(testPod("late", "100m"))
	h.m.Upsert(pod)
	if h.running("late") {
		t.Fatal("a pod refused under pressure was started")
	}
	got := h.api.get(pod.UID).Status
	if got.Phase != corev1.PodFailed || got.Reason != "Evicted" || got.Message != "Pod was rejected: The node had condition: [DiskPressure]. " {
		t.Errorf("status %s/%s/%q, want Failed/Evicted with the kubelet's rejection message", got.Phase, got.Reason, got.Message)
	}
	if !slices.Contains(h.events.all(), "Warning Evicted late") {
		t.Errorf("events %q, want a Warning Evicted event", h.events.all())
	}
}
