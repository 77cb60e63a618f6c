package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
)

// TestNodeMarkedUnknownWhenItsGraceEnds runs the server with a long monitor
// period (10 s) and a 12 s grace, and three nodes whose leases stop being
// renewed a third of a period apart: each must be marked Unknown within 2 s
// of its grace's end. Marking only at monitor passes would leave each node
// overdue by its own share of the period (0–10 s, a third of a period apart
// from the others), so at least two of the three would be late; a fourth
// node that keeps renewing must never be marked.
func TestNodeMarkedUnknownWhenItsGraceEnds(t *testing.T) {
	const grace = 12 * time.Second
	s := startServer(t, serverOptions{args: []string{
		"--node-monitor-period=10s", "--node-monitor-grace-period=12s", "--node-startup-grace-period=12s",
	}})
	cs := s.client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	names := []string{"silent-0", "silent-1", "silent-2", "steady"}
	leases := map[string]*coordinationv1.Lease{}
	for _, name := range names {
		if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The controllers may write the new Node (labels, taints) before
		// its status is posted: read it again on a conflict.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			now := metav1.Now()
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}}
			_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		renew := metav1.NewMicroTime(time.Now())
		l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &name, LeaseDurationSeconds: new(int32(40)),
				RenewTime: &renew}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		leases[name] = l
	}
	w, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// Each lease is renewed every 500 ms until its stop time; the last
	// renewal's answer time is kept. The first stops 12 s in, after a
	// monitor pass has seen every node Ready: the pass that first sees a
	// Ready condition starts the node's grace from itself, not from its
	// lease (SPEC NLC-6), and that is not what this test measures.
	start := time.Now()
	var mu sync.Mutex
	lastRenewal := map[string]time.Time{}
	var wg sync.WaitGroup
	for i, name := range names {
		stopAt := start.Add(12*time.Second + time.Duration(i)*10*time.Second/3)
		if name == "steady" {
			stopAt = start.Add(time.Hour)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := leases[name]
			tick := time.NewTicker(500 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				if time.Now().After(stopAt) {
					return
				}
				renew := metav1.NewMicroTime(time.Now())
				l.Spec.RenewTime = &renew
				got, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Update(ctx, l, metav1.UpdateOptions{})
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("renew %s: %v", name, err)
					}
					return
				}
				l = got
				mu.Lock()
				lastRenewal[name] = time.Now()
				mu.Unlock()
			}
		}()
	}
	defer func() {
		cancel()
		wg.Wait()
	}()

	unknownAt := map[string]time.Time{}
	deadline := time.After(12*time.Second + 10*time.Second + grace + 10*time.Second)
	for len(unknownAt) < 3 {
		select {
		case <-deadline:
			t.Fatalf("after %v only %v marked Unknown", time.Since(start).Round(time.Second), unknownAt)
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("node watch ended")
			}
			n, isNode := ev.Object.(*corev1.Node)
			if ev.Type != watch.Modified || !isNode || condition(n, corev1.NodeReady).Status != corev1.ConditionUnknown {
				continue
			}
			if n.Name == "steady" {
				t.Fatalf("steady, renewing every 500 ms, marked Unknown %v after the start", time.Since(start).Round(time.Millisecond))
			}
			if _, seen := unknownAt[n.Name]; !seen {
				unknownAt[n.Name] = time.Now()
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range names[:3] {
		overdue := unknownAt[name].Sub(lastRenewal[name]) - grace
		t.Logf("%s: Unknown %v after its grace ended", name, overdue.Round(time.Millisecond))
		// The controller counts a renewal from when its watch delivers
		// it, which can precede the client's reading of the answer by a
		// little; a pass-only controller would be up to 10 s late.
		if overdue < -250*time.Millisecond || overdue > 2*time.Second {
			t.Errorf("%s marked Unknown %v after its grace ended, want within 2 s (and not before)", name, overdue.Round(time.Millisecond))
		}
	}
}
