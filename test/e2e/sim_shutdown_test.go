package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestSimZoneGracefulShutdown rehearses a maintenance of one zone with
// `nodeplane sim`: POST /shutdown?zone=a marks zone a's nodes NotReady "node
// is shutting down", ends their pods Failed/Terminated with DisruptionTarget,
// and stops their heartbeats (the lifecycle controller then marks them
// Unknown) while zone b stays Ready; POST /boot?zone=a brings them back.
func TestSimZoneGracefulShutdown(t *testing.T) {
	s := startServer(t, serverOptions{args: shortLifecycle})
	cs := s.client()
	ctx := context.Background()
	control := startSim(t, s, "--nodes", "4", "--zones", "a,b", "--node-lease-duration", "4s",
		"--node-status-update-frequency", "1s", "--shutdown-grace-period=4s", "--shutdown-grace-period-critical-pods=2s")
	ready := func(names ...string) func() error {
		return func() error {
			for _, name := range names {
				n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if c := condition(n, corev1.NodeReady); c.Status != corev1.ConditionTrue {
					return fmt.Errorf("%s: Ready = %+v", name, c)
				}
			}
			return nil
		}
	}
	eventually(t, 60*time.Second, "4 Ready sim nodes", ready("sim-0", "sim-1", "sim-2", "sim-3"))
	// sim-0 and sim-2 are zone a; sim-1 zone b.
	for _, p := range []struct{ name, node string }{{"a-pod", "sim-0"}, {"b-pod", "sim-1"}} {
		_, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: p.name},
			Spec: corev1.PodSpec{NodeName: p.node, TerminationGracePeriodSeconds: ptr.To[int64](30),
				Containers: []corev1.Container{{Name: "c", Image: "sim"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 20*time.Second, "both pods Running", func() error {
		for _, name := range []string{"a-pod", "b-pod"} {
			p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil || p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("%s: %v %v", name, err, p.Status.Phase)
			}
		}
		return nil
	})

	post(t, control+"/shutdown?zone=a")
	eventually(t, 20*time.Second, "zone a's pod stopped by the shutdown", func() error {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "a-pod", metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("a-pod: %v %v", err, p.Status.Phase)
		}
		return nil
	})
	checkShutdownStatus(t, cs, "a-pod")
	for _, name := range []string{"sim-0", "sim-2"} {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := condition(n, corev1.NodeReady)
		// NotReady from the shutdown, or already Unknown from the lifecycle controller.
		if c.Status == corev1.ConditionTrue || (c.Status == corev1.ConditionFalse && !strings.Contains(c.Message, "node is shutting down")) {
			t.Errorf("%s: Ready = %+v after its shutdown, want False \"node is shutting down\"", name, c)
		}
	}
	eventually(t, 30*time.Second, "zone a's nodes Unknown once their leases lapse", func() error {
		for _, name := range []string{"sim-0", "sim-2"} {
			n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if c := condition(n, corev1.NodeReady); c.Status != corev1.ConditionUnknown {
				return fmt.Errorf("%s: Ready = %s %q", name, c.Status, c.Message)
			}
		}
		return nil
	})
	if err := ready("sim-1", "sim-3")(); err != nil {
		t.Errorf("zone b after zone a's shutdown: %v", err)
	}
	if p, err := cs.CoreV1().Pods("default").Get(ctx, "b-pod", metav1.GetOptions{}); err != nil || p.Status.Phase != corev1.PodRunning {
		t.Errorf("b-pod: %v %v, want Running", err, p.Status.Phase)
	}
	var st struct {
		Down int `json:"down"`
	}
	getJSON(t, control+"/status", &st)
	if st.Down != 2 {
		t.Errorf("sim status: %d nodes down, want 2", st.Down)
	}

	post(t, control+"/boot?zone=a")
	eventually(t, 30*time.Second, "zone a Ready after boot", ready("sim-0", "sim-2"))
}
