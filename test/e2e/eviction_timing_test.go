package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestTaintEvictionOnTimeAcrossARestartUnderLoad: a pod tolerating
// `unreachable` for 30 s sits on a silent node, beside 300 pods on three
// other silent nodes that tolerate it for 29 s; 10 s after the taint the server is
// restarted while other nodes go silent and come back and pods come and go
// on them. The eviction must land no earlier than the taint's
// timeAdded + 30 s (as a client reads them) and no later than that plus the
// one-second resolution of timeAdded, a monitor period and a little slack —
// whatever the load (issue 12: it came 76 s after the restart under load).
func TestTaintEvictionOnTimeAcrossARestartUnderLoad(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{args: shortLifecycle})
	cs := s.client()
	control := startSim(t, s, "--nodes", "24", "--zones", "a,b,c", "--node-lease-duration", "4s",
		"--node-status-update-frequency", "1s")
	const victimNode = "sim-00"                         // zone a
	bulkNodes := []string{"sim-01", "sim-02", "sim-04"} // zones b and c
	var churnNodes []string                             // the rest of zones b and c
	for i := 5; i < 24; i++ {
		if i%3 != 0 {
			churnNodes = append(churnNodes, fmt.Sprintf("sim-%02d", i))
		}
	}
	eventually(t, 60*time.Second, "24 Ready nodes", func() error {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ready := 0
		for _, n := range nodes.Items {
			if condition(&n, corev1.NodeReady).Status == corev1.ConditionTrue {
				ready++
			}
		}
		if ready != 24 {
			return fmt.Errorf("%d of %d Ready", ready, len(nodes.Items))
		}
		return nil
	})

	thirty := int64(30)
	victim := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "victim"}, Spec: corev1.PodSpec{NodeName: victimNode,
		Tolerations: []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &thirty}},
		Containers: []corev1.Container{{Name: "c", Image: "sleep"}}}}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, victim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodPhase(t, cs, "victim", corev1.PodRunning)
	// Work for the taint eviction controller falling due just before the
	// victim's deadline: 300 pods on three nodes going silent with it, each
	// tolerating `unreachable` for 29 s.
	twentyNine := int64(29)
	for i := 0; i < 300; i++ {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bulk-%03d", i)}, Spec: corev1.PodSpec{
			NodeName:                      bulkNodes[i%3],
			TerminationGracePeriodSeconds: ptrInt64(0),
			Tolerations: []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &twentyNine}},
			Containers: []corev1.Container{{Name: "c", Image: "sleep"}}}}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// Load: nodes of zones b and c go silent and come back, pods without
	// tolerations come and go on them (so the taint eviction controller has
	// evictions of its own to do), for the rest of the test.
	startChurn(t, ctx, control, churnNodes, 700*time.Millisecond, s.restConfig())

	for _, n := range append([]string{victimNode}, bulkNodes...) {
		post(t, control+"/pause?node="+n)
	}
	timeAdded := unreachableTaintAdded(t, ctx, cs, victimNode, 40*time.Second)
	deadline := timeAdded.Add(30 * time.Second)

	// Restart the server 10 s into the toleration.
	for time.Now().Before(timeAdded.Add(10 * time.Second)) {
		time.Sleep(50 * time.Millisecond)
	}
	restartAt := time.Now()
	if err := s.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	s.start()
	t.Logf("timeAdded %s; restarted at +%v, ready at +%v", timeAdded.Format(time.TimeOnly),
		restartAt.Sub(timeAdded).Round(10*time.Millisecond), time.Since(timeAdded).Round(10*time.Millisecond))
	cs = s.client()

	seen, serverAt := waitEvicted(t, ctx, cs, "default", "victim", 90*time.Second)
	t.Logf("evicted %v after timeAdded+30s as seen by the test, %v after the restart", seen.Sub(deadline).Round(10*time.Millisecond),
		seen.Sub(restartAt).Round(10*time.Millisecond))
	if !serverAt.IsZero() {
		t.Logf("the server's deletion time: %v after timeAdded+30s", serverAt.Sub(deadline))
	}
	if !serverAt.IsZero() && serverAt.Before(deadline) {
		t.Errorf("deleted at %s, before timeAdded + tolerationSeconds = %s", serverAt.Format(time.TimeOnly), deadline.Format(time.TimeOnly))
	}
	// timeAdded's resolution (1 s) + a monitor period (1 s) + slack for
	// polling and a loaded machine.
	if late := seen.Sub(deadline); late > 2500*time.Millisecond {
		t.Errorf("evicted %v after timeAdded + tolerationSeconds; want at most 1 s (timeAdded resolution) + 1 s (monitor period) + 0.5 s slack\n%s",
			late, tail(s.logs(), 60))
	}
}

// churnPods creates pods bound to the given nodes and deletes them again,
// a few per second, until ctx ends; errors (the server restarting) are
// ignored.
func churnPods(ctx context.Context, cs kubernetes.Interface, nodes []string) {
	rng := rand.New(rand.NewPCG(3, 4))
	var live []string
	for i := 0; ctx.Err() == nil; i++ {
		name := fmt.Sprintf("churn-%d", i)
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			NodeName:                      nodes[rng.IntN(len(nodes))],
			TerminationGracePeriodSeconds: ptrInt64(0),
			Containers:                    []corev1.Container{{Name: "c", Image: "sleep"}}}}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err == nil {
			live = append(live, name)
		}
		if len(live) > 40 {
			_ = cs.CoreV1().Pods("default").Delete(ctx, live[0], metav1.DeleteOptions{})
			live = live[1:]
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// startChurn keeps the test's cluster busy until the test ends: every
// interval one of nodes (simulated, on the sim's control endpoint) goes
// silent or comes back, and pods without tolerations come and go on them
// (churnPods), so the taint eviction controller has evictions of its own.
// It goes on across server restarts: the sim keeps its state, and failed
// requests are simply tried again on the next tick.
func startChurn(t *testing.T, ctx context.Context, control string, nodes []string, interval time.Duration, cfg *rest.Config) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	churnCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })
	wg.Add(2)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(1, 2))
		paused := map[string]bool{}
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-churnCtx.Done():
				return
			case <-tick.C:
			}
			n := nodes[rng.IntN(len(nodes))]
			verb := "pause"
			if paused[n] {
				verb = "resume"
			}
			paused[n] = !paused[n]
			if resp, err := http.Post(control+"/"+verb+"?node="+n, "", nil); err == nil {
				resp.Body.Close()
			}
		}
	}()
	go func() {
		defer wg.Done()
		churnPods(churnCtx, cs, nodes)
	}()
}

// unreachableTaintAdded waits for node's unreachable NoExecute taint and
// returns its timeAdded.
func unreachableTaintAdded(t *testing.T, ctx context.Context, cs kubernetes.Interface, node string, timeout time.Duration) time.Time {
	t.Helper()
	var added time.Time
	eventually(t, timeout, node+" NoExecute-tainted", func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, tn := range n.Spec.Taints {
			if tn.Key == corev1.TaintNodeUnreachable && tn.Effect == corev1.TaintEffectNoExecute && tn.TimeAdded != nil {
				added = tn.TimeAdded.Time
				return nil
			}
		}
		return fmt.Errorf("taints %v", n.Spec.Taints)
	})
	return added
}

// waitEvicted waits until the pod shows up terminating or gone, and returns
// when the test first saw that and the server's own deletion time
// (deletionTimestamp less the grace period, one-second resolution; zero if
// the pod was already gone).
func waitEvicted(t *testing.T, ctx context.Context, cs kubernetes.Interface, namespace, name string, timeout time.Duration) (seen, serverAt time.Time) {
	t.Helper()
	eventually(t, timeout, name+" evicted", func() error {
		p, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			seen = time.Now()
			return nil
		}
		if err != nil {
			return err
		}
		if p.DeletionTimestamp == nil {
			return fmt.Errorf("not yet")
		}
		seen = time.Now()
		serverAt = p.DeletionTimestamp.Add(-time.Duration(*p.DeletionGracePeriodSeconds) * time.Second)
		return nil
	})
	return seen, serverAt
}
