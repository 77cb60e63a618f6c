package e2e

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// TestLeasesAcrossServerRestarts restarts a server with two agents connected,
// first cleanly (SIGTERM) then with SIGKILL. Leases live in the in-memory
// lease store (docs/differences.md): a clean restart keeps every lease (same
// UID); a crash may lose renewals since the last snapshot, which the agents
// rebuild. Either way no resourceVersion is handed out twice: every lease
// written after a restart has a resourceVersion above all those seen before
// it, a watch from a resourceVersion of before the restart gives 410 or
// newer events only, and an update at a pre-crash resourceVersion that is
// not the lease's current one is refused. The nodes never leave Ready.
func TestLeasesAcrossServerRestarts(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{args: shortLifecycle})
	cs := s.client()
	nodes := []string{"r1", "r2"}
	for _, name := range nodes {
		startAgent(t, s, agentOptions{name: name, config: agentTestConfig})
	}
	ready := readyTransitions(t, cs, nodes)

	for _, how := range []string{"SIGTERM", "SIGKILL"} {
		before := nodeLeases(t, cs, nodes)
		maxBefore := maxRV(t, before)
		probe := writeProbeLease(t, cs, how)
		maxBefore = max(maxBefore, rvOf(t, probe.ResourceVersion))
		oldest := minRV(t, before)

		if how == "SIGTERM" {
			if err := s.stop(); err != nil {
				t.Fatal(err)
			}
		} else {
			s.kill9()
		}
		s.start()
		cs = s.client()

		if how == "SIGTERM" {
			after := nodeLeases(t, cs, nodes)
			for _, name := range nodes {
				if after[name].UID != before[name].UID {
					t.Errorf("%s: lease %s has UID %s after a clean restart, want %s (it was re-created)", how, name, after[name].UID, before[name].UID)
				}
			}
			got, err := cs.CoordinationV1().Leases("default").Get(ctx, probe.Name, metav1.GetOptions{})
			if err != nil || got.ResourceVersion != probe.ResourceVersion {
				t.Errorf("%s: probe lease after a clean restart = %v, %v; want resourceVersion %s", how, got, err, probe.ResourceVersion)
			}
		} else {
			// The acknowledged probe may be lost or stale; an update at its
			// resourceVersion must not match another state.
			got, err := cs.CoordinationV1().Leases("default").Get(ctx, probe.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				t.Logf("%s: probe lease lost in the crash (allowed)", how)
			case err != nil:
				t.Fatal(err)
			case got.ResourceVersion == probe.ResourceVersion:
				t.Logf("%s: probe lease at its acknowledged resourceVersion (snapshotted)", how)
			default:
				_, err := cs.CoordinationV1().Leases("default").Update(ctx, probe, metav1.UpdateOptions{})
				if !apierrors.IsConflict(err) {
					t.Errorf("%s: update at pre-crash resourceVersion %s (stored %s) = %v, want a conflict", how, probe.ResourceVersion, got.ResourceVersion, err)
				}
			}
		}

		// Every lease renewed after the restart is above everything before.
		eventually(t, 30*time.Second, how+": both leases renewed after the restart", func() error {
			for name, l := range nodeLeases(t, cs, nodes) {
				if rv := rvOf(t, l.ResourceVersion); rv <= maxBefore {
					return fmt.Errorf("lease %s at resourceVersion %d, not yet renewed above %d", name, rv, maxBefore)
				}
			}
			return nil
		})
		checkWatchFromOldRV(t, cs, oldest, maxBefore, how)

		never(t, 10*time.Second, how+": a node left Ready after the restart", func() error {
			now := readyTransitions(t, cs, nodes)
			for name, tr := range ready {
				if got := now[name]; !got.Equal(&tr) {
					return fmt.Errorf("node %s Ready transitioned at %v, was %v before the restart", name, now[name], tr)
				}
			}
			return nil
		})
	}
}

// readyTransitions waits until every node is Ready and returns the last
// transition time of each Ready condition.
func readyTransitions(t *testing.T, cs kubernetes.Interface, nodes []string) map[string]metav1.Time {
	t.Helper()
	out := map[string]metav1.Time{}
	eventually(t, 60*time.Second, "nodes Ready", func() error {
		for _, name := range nodes {
			n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			var readyCond *corev1.NodeCondition
			for i := range n.Status.Conditions {
				if n.Status.Conditions[i].Type == corev1.NodeReady {
					readyCond = &n.Status.Conditions[i]
				}
			}
			if readyCond == nil || readyCond.Status != corev1.ConditionTrue {
				return fmt.Errorf("node %s Ready = %+v", name, readyCond)
			}
			out[name] = readyCond.LastTransitionTime
		}
		return nil
	})
	return out
}

func nodeLeases(t *testing.T, cs kubernetes.Interface, nodes []string) map[string]*coordinationv1.Lease {
	t.Helper()
	out := map[string]*coordinationv1.Lease{}
	eventually(t, 30*time.Second, "node leases", func() error {
		for _, name := range nodes {
			l, err := cs.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			out[name] = l
		}
		return nil
	})
	return out
}

// writeProbeLease creates a lease and updates it a few times, returning the
// last acknowledged state.
func writeProbeLease(t *testing.T, cs kubernetes.Interface, suffix string) *coordinationv1.Lease {
	t.Helper()
	leases := cs.CoordinationV1().Leases("default")
	l, err := leases.Create(context.Background(), testLease("default", "probe-"+strings.ToLower(suffix), nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		if l, err = leases.Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// checkWatchFromOldRV watches leases from a resourceVersion of before the
// restart: the server must answer 410 Gone, or deliver only events newer
// than everything seen before the restart.
func checkWatchFromOldRV(t *testing.T, cs kubernetes.Interface, from, maxBefore int64, how string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	w, err := cs.CoordinationV1().Leases("kube-node-lease").Watch(ctx, metav1.ListOptions{ResourceVersion: strconv.FormatInt(from, 10)})
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return
	}
	if err != nil {
		t.Fatalf("%s: watch from %d: %v", how, from, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return // the window ended without a reused resourceVersion
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			if ev.Type == watch.Error {
				if err := apierrors.FromObject(ev.Object); apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					return
				}
				t.Fatalf("%s: watch from %d: error event %v", how, from, apierrors.FromObject(ev.Object))
			}
			l, ok := ev.Object.(*coordinationv1.Lease)
			if !ok {
				t.Fatalf("%s: watch event %T", how, ev.Object)
			}
			if rv := rvOf(t, l.ResourceVersion); rv <= maxBefore {
				t.Errorf("%s: watch from %d after the restart delivered %s %s at resourceVersion %d <= %d (seen before the restart)", how, from, ev.Type, l.Name, rv, maxBefore)
			}
		}
	}
}

func rvOf(t *testing.T, rv string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		t.Fatal(errors.New("resourceVersion " + rv + " is not a number"))
	}
	return n
}

func maxRV(t *testing.T, leases map[string]*coordinationv1.Lease) int64 {
	var m int64
	for _, l := range leases {
		m = max(m, rvOf(t, l.ResourceVersion))
	}
	return m
}

func minRV(t *testing.T, leases map[string]*coordinationv1.Lease) int64 {
	m := int64(-1)
	for _, l := range leases {
		if rv := rvOf(t, l.ResourceVersion); m < 0 || rv < m {
			m = rv
		}
	}
	return m
}
