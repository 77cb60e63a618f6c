package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// burstWriter is one goroutine of the durability burst. Leases live in the
// in-memory lease store (docs/differences.md) and everything else in the
// fsynced etcd member, so it writes to both: each round creates a Node
// and a Lease named d-<id>-<n> and renews its heartbeat lease hb-<id>,
// recording what the server acknowledged.
type burstWriter struct {
	id int
	// nodes and leases are the acknowledged creates, as the server returned them.
	nodes  []*corev1.Node
	leases []*coordinationv1.Lease
	// attempted counts rounds started (a round's creates may be unacknowledged).
	attempted int
	// heartbeat is the last acknowledged state of hb-<id>.
	heartbeat *coordinationv1.Lease
	// renewals counts acknowledged heartbeat updates.
	renewals int
	// errBeforeKill is the first error seen before the kill (a failure).
	errBeforeKill error
}

const durabilityNamespace = "durability"

func (w *burstWriter) run(cs kubernetes.Interface, killing *atomic.Bool) {
	leases := cs.CoordinationV1().Leases(durabilityNamespace)
	fail := func(err error) {
		if !killing.Load() && w.errBeforeKill == nil {
			w.errBeforeKill = err
		}
	}
	for n := 0; !killing.Load(); n++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		name := fmt.Sprintf("d-%d-%d", w.id, n)
		labels := map[string]string{"writer": strconv.Itoa(w.id), "seq": strconv.Itoa(n)}
		w.attempted++
		node, err := cs.CoreV1().Nodes().Create(ctx, testNode(name, labels), metav1.CreateOptions{})
		if err != nil {
			cancel()
			fail(fmt.Errorf("create node %s: %w", name, err))
			return
		}
		w.nodes = append(w.nodes, node)
		lease, err := leases.Create(ctx, testLease(durabilityNamespace, name, labels), metav1.CreateOptions{})
		if err != nil {
			cancel()
			fail(fmt.Errorf("create lease %s: %w", name, err))
			return
		}
		w.leases = append(w.leases, lease)

		hb := w.heartbeat.DeepCopy()
		hb.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
		renewed, err := leases.Update(ctx, hb, metav1.UpdateOptions{})
		cancel()
		if err != nil {
			fail(fmt.Errorf("renew %s: %w", hb.Name, err))
			return
		}
		w.heartbeat = renewed
		w.renewals++
	}
}

// TestDurabilityKill9 kills the server with SIGKILL in the middle of a
// burst of writes from 8 clients and checks, after a restart on the same
// data dir, that every acknowledged node create survived (fsynced member),
// and for leases (soft state, docs/differences.md) that an acknowledged
// lease is either gone or exactly as acknowledged, that an update at an
// acknowledged resourceVersion the lease no longer has is refused, and that
// a renewal after the restart gets a resourceVersion above every one
// acknowledged before the kill.
// NODEPLANE_E2E_SEED replays a kill moment.
func TestDurabilityKill9(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("NODEPLANE_E2E_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("NODEPLANE_E2E_SEED: %v", err)
		}
	}
	t.Logf("seed %d (rerun with NODEPLANE_E2E_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	killAfter := 500*time.Millisecond + time.Duration(rng.Int64N(int64(time.Second)))

	s := startServer(t, serverOptions{apiOnly: true})
	cs := s.client()
	ctx := context.Background()
	createNamespace(t, cs, durabilityNamespace)

	const writers = 8
	ws := make([]*burstWriter, writers)
	for i := range ws {
		hb, err := cs.CoordinationV1().Leases(durabilityNamespace).Create(ctx, testLease(durabilityNamespace, fmt.Sprintf("hb-%d", i), nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ws[i] = &burstWriter{id: i, heartbeat: hb}
	}

	var killing atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(cs, &killing)
		}()
	}
	time.Sleep(killAfter) // the kill moment is the point of the test, not a wait for a condition
	killing.Store(true)
	s.kill9()
	t.Logf("SIGKILL %v into the burst", time.Since(start).Round(time.Millisecond))
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("writers did not notice the kill within 15s")
	}

	ackedNodes, ackedLeases, renewals := 0, 0, 0
	for _, w := range ws {
		if w.errBeforeKill != nil {
			t.Errorf("writer %d failed before the kill: %v", w.id, w.errBeforeKill)
		}
		ackedNodes += len(w.nodes)
		ackedLeases += len(w.leases)
		renewals += w.renewals
	}
	t.Logf("acknowledged before the kill: %d node creates, %d lease creates, %d lease renewals", ackedNodes, ackedLeases, renewals)
	if ackedNodes < writers || ackedLeases < writers {
		t.Fatalf("only %d node and %d lease creates acknowledged before the kill: the burst did not run", ackedNodes, ackedLeases)
	}

	s.start()
	leases := cs.CoordinationV1().Leases(durabilityNamespace)
	for _, w := range ws {
		for _, want := range w.nodes {
			got, err := cs.CoreV1().Nodes().Get(ctx, want.Name, metav1.GetOptions{})
			if err != nil {
				t.Errorf("acknowledged node %s after restart: %v", want.Name, err)
				continue
			}
			if !apiequality.Semantic.DeepEqual(got.ObjectMeta, want.ObjectMeta) || !apiequality.Semantic.DeepEqual(got.Spec, want.Spec) {
				t.Errorf("node %s after restart differs:\ngot  %+v %+v\nwant %+v %+v", want.Name, got.ObjectMeta, got.Spec, want.ObjectMeta, want.Spec)
			}
		}
		for _, want := range w.leases {
			got, err := leases.Get(ctx, want.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue // written after the last snapshot: allowed to be lost
			}
			if err != nil {
				t.Errorf("acknowledged lease %s after restart: %v", want.Name, err)
				continue
			}
			if !apiequality.Semantic.DeepEqual(got.ObjectMeta, want.ObjectMeta) || !apiequality.Semantic.DeepEqual(got.Spec, want.Spec) {
				t.Errorf("lease %s after restart differs:\ngot  %+v %+v\nwant %+v %+v", want.Name, got.ObjectMeta, got.Spec, want.ObjectMeta, want.Spec)
			}
		}
		ackRV, _ := strconv.ParseInt(w.heartbeat.ResourceVersion, 10, 64)
		hb, err := leases.Get(ctx, w.heartbeat.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			// Lost with the renewals since the last snapshot: its holder
			// creates it again, above every revision handed out before.
			created, err := leases.Create(ctx, testLease(durabilityNamespace, w.heartbeat.Name, nil), metav1.CreateOptions{})
			if err != nil {
				t.Errorf("re-create %s after restart: %v", w.heartbeat.Name, err)
				continue
			}
			if gotRV, _ := strconv.ParseInt(created.ResourceVersion, 10, 64); gotRV <= ackRV {
				t.Errorf("%s re-created after restart at resourceVersion %d, not above the acknowledged %d", created.Name, gotRV, ackRV)
			}
			if _, err := leases.Update(ctx, w.heartbeat, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
				t.Errorf("%s: update at the acknowledged resourceVersion %s of the lost copy = %v, want a conflict", created.Name, w.heartbeat.ResourceVersion, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("heartbeat lease %s after restart: %v", w.heartbeat.Name, err)
			continue
		}
		renew := w.heartbeat.DeepCopy()
		renew.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
		if hb.ResourceVersion != w.heartbeat.ResourceVersion {
			// A stale copy: the acknowledged resourceVersion must not match it.
			if _, err := leases.Update(ctx, renew, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
				t.Errorf("%s: update at the acknowledged resourceVersion %s (stored %s) = %v, want a conflict", hb.Name, w.heartbeat.ResourceVersion, hb.ResourceVersion, err)
			}
			renew = hb.DeepCopy()
			renew.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
		}
		renewed, err := leases.Update(ctx, renew, metav1.UpdateOptions{})
		if err != nil {
			t.Errorf("renew %s after restart: %v", hb.Name, err)
			continue
		}
		if gotRV, _ := strconv.ParseInt(renewed.ResourceVersion, 10, 64); gotRV <= ackRV {
			t.Errorf("%s renewed after restart at resourceVersion %d, not above the acknowledged %d", hb.Name, gotRV, ackRV)
		}
	}

	// Nothing that was never sent exists: beyond the acknowledged creates,
	// at most the round each writer had in flight at the kill.
	sent := map[string]bool{}
	for _, w := range ws {
		sent[w.heartbeat.Name] = true
		for n := range w.attempted {
			sent[fmt.Sprintf("d-%d-%d", w.id, n)] = true
		}
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if !sent[n.Name] {
			t.Errorf("node %s exists but was never sent", n.Name)
		}
	}
	all, err := leases.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range all.Items {
		if !sent[l.Name] {
			t.Errorf("lease %s exists but was never sent", l.Name)
		}
	}
	t.Logf("after restart: %d nodes, %d leases (%d heartbeats)", len(nodes.Items), len(all.Items), writers)
}
