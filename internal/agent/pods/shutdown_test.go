package pods

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeplane/nodeplane/internal/agent/podstatus"
)

func TestNewPodsAreRejectedWhileTheNodeShutsDown(t *testing.T) {
	var down atomic.Bool
	h := newHarness(t, options{shuttingDown: down.Load})
	before := h.api.add(testPod("before", "100m"))
	h.m.Upsert(before)
	down.Store(true)
	late := h.api.add(testPod("late", "100m"))
	h.m.Upsert(late)

	if !h.running("before") {
		t.Error("the pod admitted before the shutdown is not running")
	}
	if h.running("late") {
		t.Error("a pod was started while the node shuts down")
	}
	got := h.api.get(late.UID).Status
	if got.Phase != corev1.PodFailed || got.Reason != "NodeShutdown" || got.Message != "Pod was rejected as the node is shutting down." {
		t.Errorf("late pod status %s/%s/%q, want Failed/NodeShutdown with the kubelet's message", got.Phase, got.Reason, got.Message)
	}
	if running := h.m.Running(); len(running) != 1 || running[0].Name != "before" {
		t.Errorf("Running() = %v, want only the pod admitted before", running)
	}
}

func TestStopForShutdownPostsTheFinalStatus(t *testing.T) {
	h := newHarness(t, options{})
	pod := h.api.add(testPod("web", "100m"))
	h.m.Upsert(pod)
	if !h.running("web") {
		t.Fatal("pod not running")
	}
	if err := h.m.StopForShutdown(context.Background(), pod.UID, 7*time.Second); err != nil {
		t.Fatalf("StopForShutdown: %v", err)
	}
	got := h.api.get(pod.UID).Status
	if got.Phase != corev1.PodFailed || got.Reason != podstatus.ReasonTerminated || got.Message != podstatus.MessageShutdownTerminated {
		t.Errorf("final status %s/%s/%q, want Failed/Terminated with the shutdown message", got.Phase, got.Reason, got.Message)
	}
	found := false
	for _, c := range got.Conditions {
		found = found || (c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == podstatus.ReasonTerminationByKubelet)
	}
	if !found {
		t.Errorf("no DisruptionTarget=True condition: %+v", got.Conditions)
	}
	if h.ops.count("kill web 7s") != 1 {
		t.Errorf("runtime calls %q, want one kill with the 7 s grace", h.ops.all())
	}
	// A later sync (the runtime reports the exit) keeps the final status.
	writes := h.ops.count("status web")
	h.m.Notify(pod.UID)
	h.m.Upsert(h.api.get(pod.UID))
	if got := h.api.get(pod.UID).Status; got.Reason != podstatus.ReasonTerminated {
		t.Errorf("a later sync rewrote the final status to %s/%s", got.Phase, got.Reason)
	}
	if n := h.ops.count("status web"); n != writes {
		t.Errorf("%d more status writes after the final one: %q", n-writes, h.ops.all())
	}
	if len(h.m.Running()) != 0 {
		t.Error("a stopped pod is still listed as running")
	}
}
