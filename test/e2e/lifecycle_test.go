package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Short lifecycle knobs: agents renew every 1 s (lease 4 s); the
// controller checks every second and waits 8 s.
var shortLifecycle = []string{"--node-monitor-grace-period=8s", "--node-monitor-period=1s", "--node-startup-grace-period=8s"}

// TestNodeFailure kills one of three real agents and follows what the node
// lifecycle and taint eviction controllers do: Ready Unknown within grace +
// 2·period, unreachable NoSchedule then NoExecute taints, a pod tolerating
// unreachable for 5 s evicted about 5 s later, one tolerating it forever
// kept; restarting the agent removes the taints and cancels the pending
// eviction of a pod tolerating 60 s.
func TestNodeFailure(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{args: shortLifecycle})
	cs := s.client()
	agents := map[string]*agentProc{}
	for _, name := range []string{"f1", "f2", "f3"} {
		agents[name] = startAgent(t, s, agentOptions{name: name, config: agentTestConfig,
			args: []string{"--node-labels", "topology.kubernetes.io/zone=z-" + name}})
	}
	eventually(t, 30*time.Second, "three Ready nodes without the not-ready taint", func() error {
		for _, name := range []string{"f1", "f2", "f3"} {
			n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if condition(n, corev1.NodeReady).Status != corev1.ConditionTrue || len(n.Spec.Taints) != 0 {
				return fmt.Errorf("%s: ready %s taints %v", name, condition(n, corev1.NodeReady).Status, n.Spec.Taints)
			}
		}
		return nil
	})
	tolerating := func(name string, seconds *int64) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			NodeName:                      "f2",
			TerminationGracePeriodSeconds: ptrInt64(1),
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds}},
			Containers: []corev1.Container{{Name: "c", Image: "sleep", Args: []string{"120"}}}}}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPodPhase(t, cs, name, corev1.PodRunning)
	}
	tolerating("five", ptrInt64(5))
	tolerating("forever", nil)
	tolerating("sixty", ptrInt64(60))

	agents["f2"].kill9()
	killed := time.Now()
	var unknownAt, noExecuteAt time.Time
	eventually(t, 30*time.Second, "f2 Unknown with unreachable taints", func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, "f2", metav1.GetOptions{})
		if err != nil {
			return err
		}
		r := condition(n, corev1.NodeReady)
		if r.Status == corev1.ConditionUnknown && unknownAt.IsZero() {
			unknownAt = time.Now()
			if r.Reason != "NodeStatusUnknown" || r.Message != "Kubelet stopped posting node status." {
				t.Errorf("Ready = %+v", r)
			}
		}
		hasNoSchedule, hasNoExecute := false, false
		for _, tn := range n.Spec.Taints {
			if tn.Key == "node.kubernetes.io/unreachable" {
				hasNoSchedule = hasNoSchedule || tn.Effect == corev1.TaintEffectNoSchedule
				hasNoExecute = hasNoExecute || tn.Effect == corev1.TaintEffectNoExecute
			}
		}
		if hasNoExecute && noExecuteAt.IsZero() {
			noExecuteAt = time.Now()
		}
		if r.Status != corev1.ConditionUnknown || !hasNoSchedule || !hasNoExecute {
			return fmt.Errorf("ready %s taints %v", r.Status, n.Spec.Taints)
		}
		return nil
	})
	// The last renewal was at most 1 s before the kill; grace 8 s + 2 periods.
	if d := unknownAt.Sub(killed); d > 8*time.Second+2*time.Second+time.Second {
		t.Errorf("Unknown %v after kill -9, want within grace + 2·period (10 s) plus polling", d)
	}
	t.Logf("kill -9 → Unknown %v, → NoExecute %v", unknownAt.Sub(killed).Round(100*time.Millisecond), noExecuteAt.Sub(killed).Round(100*time.Millisecond))

	evictedAt := func(name string) (time.Time, bool) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return time.Now(), true
		}
		if err != nil || p.DeletionTimestamp == nil {
			return time.Time{}, false
		}
		return p.DeletionTimestamp.Time.Add(-time.Duration(*p.DeletionGracePeriodSeconds) * time.Second), true
	}
	eventually(t, 20*time.Second, "pod tolerating 5 s evicted", func() error {
		if _, ok := evictedAt("five"); !ok {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	if at, _ := evictedAt("five"); at.Sub(noExecuteAt) < 3*time.Second || at.Sub(noExecuteAt) > 9*time.Second {
		t.Errorf("pod tolerating 5 s evicted %v after the NoExecute taint, want about 5 s", at.Sub(noExecuteAt))
	}
	if _, ok := evictedAt("forever"); ok {
		t.Errorf("pod tolerating unreachable forever was evicted")
	}

	agents["f2"].start()
	eventually(t, 30*time.Second, "f2 Ready again without taints", func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, "f2", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if condition(n, corev1.NodeReady).Status != corev1.ConditionTrue || len(n.Spec.Taints) != 0 {
			return fmt.Errorf("ready %s taints %v", condition(n, corev1.NodeReady).Status, n.Spec.Taints)
		}
		return nil
	})
	eventually(t, 15*time.Second, "pending eviction of the 60 s pod cancelled", func() error {
		evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=sixty"})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == "TaintManagerEviction" && strings.HasPrefix(e.Message, "Cancelling deletion") {
				return nil
			}
		}
		return fmt.Errorf("no cancellation event")
	})
	for _, name := range []string{"forever", "sixty"} {
		if _, ok := evictedAt(name); ok {
			t.Errorf("pod %s was evicted", name)
		}
	}
	evs, _ := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=f2"})
	seen := map[string]bool{}
	for _, e := range evs.Items {
		seen[e.Source.Component+"/"+e.Reason] = true
	}
	for _, want := range []string{"node-controller/RegisteredNode", "node-controller/NodeNotReady", "kubelet/NodeReady"} {
		if !seen[want] {
			t.Errorf("no %s event on f2 (have %v)", want, seen)
		}
	}
	for _, name := range []string{"forever", "sixty"} {
		_ = cs.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{})
	}
}

func ptrInt64(v int64) *int64 { return &v }
