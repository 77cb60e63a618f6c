package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestFailoverKeepsPendingEvictions (SPEC P3-3): two servers share one etcd
// cluster; the leader has tainted a silent node and a pod's eviction is
// pending when the leader dies. The new leader gives every node a fresh
// grace period (no healthy node flaps) and evicts the pod once, at the time
// the old leader had scheduled — from the taint's timeAdded — not later and
// not twice.
func TestFailoverKeepsPendingEvictions(t *testing.T) {
	ctx := context.Background()
	cluster := startEtcdCluster(t, 1, newEtcdPKI(t))
	args := append(append([]string{}, shortLifecycle...), cluster.serverArgs()...)
	args = append(args, "--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s")
	a := startServer(t, serverOptions{args: args})
	eventually(t, 20*time.Second, "server A leading", func() error {
		if !strings.Contains(a.logs(), "leading: starting controllers") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	b := startServer(t, serverOptions{args: args})
	cs := b.client()

	// The nodes talk to B only, so they keep heartbeating when A dies.
	sim := exec.Command(binary, "sim", "--server", b.restConfig().Host, "--token-file", filepath.Join(b.dataDir, "node-token"),
		"--nodes", "3", "--zones", "a,b,c", "--control", "127.0.0.1:0", "--node-lease-duration", "4s",
		"--node-status-update-frequency", "1s", "--report-interval", "0", "--stdin=false")
	out, err := sim.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Process.Signal(syscall.SIGTERM); _ = sim.Wait() })
	lines := bufio.NewScanner(out)
	control := ""
	for lines.Scan() {
		if u, ok := strings.CutPrefix(lines.Text(), "control endpoint: "); ok {
			control = strings.TrimSuffix(u, "/status")
		}
		if strings.Contains(lines.Text(), "nodes registered") {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	eventually(t, 30*time.Second, "3 Ready untainted nodes", func() error {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, n := range nodes.Items {
			if condition(&n, corev1.NodeReady).Status != corev1.ConditionTrue || len(n.Spec.Taints) != 0 {
				return fmt.Errorf("%s not ready/untainted", n.Name)
			}
		}
		if len(nodes.Items) != 3 {
			return fmt.Errorf("%d nodes", len(nodes.Items))
		}
		return nil
	})
	twenty := int64(20)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pending"}, Spec: corev1.PodSpec{NodeName: "sim-0",
		Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &twenty}},
		Containers: []corev1.Container{{Name: "c", Image: "sleep"}}}}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodPhase(t, cs, "pending", corev1.PodRunning)

	resp, err := http.Post(control+"/pause?node=sim-0", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var taintedAt time.Time
	eventually(t, 30*time.Second, "sim-0 NoExecute-tainted by A", func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, "sim-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, tn := range n.Spec.Taints {
			if tn.Key == "node.kubernetes.io/unreachable" && tn.Effect == corev1.TaintEffectNoExecute && tn.TimeAdded != nil {
				taintedAt = tn.TimeAdded.Time
				return nil
			}
		}
		return fmt.Errorf("taints %v", n.Spec.Taints)
	})
	// Leader A holds the eviction for 5 s of the pod's 20 s toleration
	// before it dies (the kill moment is the scenario); meanwhile the pod
	// must not be marked for deletion.
	never(t, 5*time.Second, "the pod marked for deletion within its toleration", func() error {
		if n := markedCount(ctx, cs); n > 0 {
			return fmt.Errorf("marked %d times", n)
		}
		return nil
	})
	a.kill9()
	killedAt := time.Now()
	eventually(t, 30*time.Second, "server B leading", func() error {
		if !strings.Contains(b.logs(), "leading: starting controllers") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	t.Logf("taint at %s, leader killed %v later", taintedAt.Format(time.TimeOnly), killedAt.Sub(taintedAt).Round(time.Second))

	var marked []time.Time
	eventually(t, 40*time.Second, "pod evicted by the new leader", func() error {
		evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=pending"})
		if err != nil {
			return err
		}
		marked = nil
		for _, e := range evs.Items {
			if e.Reason == "TaintManagerEviction" && strings.HasPrefix(e.Message, "Marking for deletion") {
				for range e.Count {
					marked = append(marked, e.FirstTimestamp.Time)
				}
			}
		}
		if len(marked) == 0 {
			return fmt.Errorf("no eviction yet")
		}
		return nil
	})
	never(t, 3*time.Second, "the pod marked for deletion more than once", func() error {
		if n := markedCount(ctx, cs); n != 1 {
			return fmt.Errorf("pod marked for deletion %d times, want once", n)
		}
		return nil
	})
	if d := marked[0].Sub(taintedAt); d < 18*time.Second || d > 24*time.Second {
		t.Errorf("evicted %v after the taint was added, want about 20 s (the old leader's deadline)", d)
	}
	for _, name := range []string{"sim-1", "sim-2"} {
		evs, _ := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		for _, e := range evs.Items {
			if e.Reason == "NodeNotReady" {
				t.Errorf("healthy node %s flapped across the failover: %s", name, e.Message)
			}
		}
	}
}

// markedCount counts the "Marking for deletion" eviction events of the pod
// "pending"; a failed list counts as none seen.
func markedCount(ctx context.Context, cs kubernetes.Interface) int {
	evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=pending"})
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range evs.Items {
		if e.Reason == "TaintManagerEviction" && strings.HasPrefix(e.Message, "Marking for deletion") {
			n += int(e.Count)
		}
	}
	return n
}
