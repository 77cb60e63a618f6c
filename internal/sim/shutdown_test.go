package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/nodeplane/nodeplane/internal/agent"
	"github.com/nodeplane/nodeplane/internal/agent/podstatus"
	"github.com/nodeplane/nodeplane/internal/agent/shutdown"
)

// TestGracefulShutdownOfASimulatedNode shuts one simulated node down (in a
// synctest bubble, over a fake clientset): Ready=False "node is shutting
// down" is written before any pod's final status, pods end Failed/Terminated
// with DisruptionTarget lowest priority first, a pod bound afterwards is
// rejected with NodeShutdown, the lease is no longer renewed once the node
// is down, and boot brings it back to Ready.
func TestGracefulShutdownOfASimulatedNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cs := fake.NewClientset()
		var (
			mu      sync.Mutex
			written []string // what reached the API, in order
		)
		note := func(s string) { mu.Lock(); written = append(written, s); mu.Unlock() }
		cs.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if p := a.(k8stesting.PatchAction); a.GetSubresource() == "status" && strings.Contains(string(p.GetPatch()), shutdown.NotReadyMessage) {
				note("node NotReady")
			}
			return false, nil, nil
		})
		cs.PrependReactor("create", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
			a.(k8stesting.CreateAction).GetObject().(*corev1.Node).UID = "node-uid" // as the API server assigns
			return false, nil, nil
		})
		cs.PrependReactor("update", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if p := a.(k8stesting.UpdateAction).GetObject().(*corev1.Pod); p.Status.Phase == corev1.PodFailed {
				note("pod " + p.Name + " " + p.Status.Reason)
			}
			return false, nil, nil
		})

		s, err := New(Config{Server: "https://sim.invalid", Token: "t", Nodes: 1, LeaseDuration: 8 * time.Second,
			StatusUpdateFrequency: time.Second, ShutdownGracePeriod: 20 * time.Second, ShutdownGracePeriodCriticalPods: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		s.ctx = ctx
		n := &node{name: s.Name(0)}
		if err := s.build(ctx, n, agent.API{Core: cs.CoreV1(), Coordination: cs.CoordinationV1()}, rand.New(rand.NewPCG(1, 2))); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		wg.Add(2)
		go func() { defer wg.Done(); s.sched.run(ctx, 2) }()
		// The fake clientset's watch feeds the node's pods (the informer's
		// streaming list is not faked).
		w, err := cs.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer wg.Done()
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case ev := <-w.ResultChan():
					if p, ok := ev.Object.(*corev1.Pod); ok {
						n.manager.Upsert(p)
					}
				}
			}
		}()
		s.schedule(ctx, n, 0, 0, &wg)

		for i, p := range []struct {
			name     string
			priority *int32
		}{{"critical", ptr.To(shutdown.CriticalPriority)}, {"plain", nil}, {"low", ptr.To[int32](-10)}} {
			createPod(ctx, t, cs, n.name, p.name, p.priority, i)
		}
		waitFor(t, "three pods Running", func() error {
			for _, name := range []string{"critical", "plain", "low"} {
				if p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}); err != nil || p.Status.Phase != corev1.PodRunning {
					return fmt.Errorf("%s not Running", name)
				}
			}
			return nil
		})
		waitFor(t, "the lease created", func() error {
			_, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, n.name, metav1.GetOptions{})
			return err
		})
		leaseBefore := renewTime(ctx, t, cs, n.name)
		waitFor(t, "the lease renewed while the node runs", func() error {
			if now := renewTime(ctx, t, cs, n.name); !now.After(leaseBefore) {
				return fmt.Errorf("renewTime still %v", now)
			}
			return nil
		})

		if got := s.Shutdown(Selector{Node: n.name}); got != 1 {
			t.Fatalf("Shutdown started %d nodes, want 1", got)
		}
		if got := s.Shutdown(Selector{Node: n.name}); got != 0 {
			t.Errorf("a second Shutdown of the same node started %d, want 0", got)
		}
		waitFor(t, "the node down", func() error {
			if !n.down.Load() {
				return fmt.Errorf("not down")
			}
			return nil
		})
		mu.Lock()
		got := strings.Join(written, "; ")
		mu.Unlock()
		// Groups: {0: 10 s} (low, plain) then {critical: 10 s}.
		if !strings.HasPrefix(got, "node NotReady; ") || strings.Index(got, "pod critical") < strings.Index(got, "pod plain") ||
			strings.Index(got, "pod critical") < strings.Index(got, "pod low") || strings.Count(got, "Terminated") != 3 {
			t.Errorf("API writes: %s; want the node NotReady first, then low and plain, then critical, each Terminated", got)
		}
		for _, name := range []string{"critical", "plain", "low"} {
			p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var dt *corev1.PodCondition
			for i := range p.Status.Conditions {
				if p.Status.Conditions[i].Type == corev1.DisruptionTarget {
					dt = &p.Status.Conditions[i]
				}
			}
			if p.Status.Phase != corev1.PodFailed || p.Status.Reason != podstatus.ReasonTerminated || dt == nil || dt.Status != corev1.ConditionTrue || dt.Reason != "TerminationByKubelet" {
				t.Errorf("%s: phase %s reason %q DisruptionTarget %+v; want Failed, Terminated, True/TerminationByKubelet", name, p.Status.Phase, p.Status.Reason, dt)
			}
		}
		ready := readyCondition(ctx, t, cs, n.name)
		if ready.Status != corev1.ConditionFalse || ready.Reason != "KubeletNotReady" || !strings.Contains(ready.Message, "node is shutting down") {
			t.Errorf("Ready = %+v, want False KubeletNotReady \"node is shutting down\"", ready)
		}

		createPod(ctx, t, cs, n.name, "late", nil, 3)
		waitFor(t, "the late pod rejected", func() error {
			p, err := cs.CoreV1().Pods("default").Get(ctx, "late", metav1.GetOptions{})
			if err != nil || p.Status.Phase != corev1.PodFailed || p.Status.Reason != podstatus.ReasonNodeShutdown {
				return fmt.Errorf("late: %v %s %q", err, p.Status.Phase, p.Status.Reason)
			}
			return nil
		})
		if st := s.Status(); st.Down != 1 || st.ShuttingDown != 0 {
			t.Errorf("status: down %d, shutting down %d; want 1 and 0", st.Down, st.ShuttingDown)
		}

		// Down: three lease intervals (2 s each) pass without a renewal.
		after := renewTime(ctx, t, cs, n.name)
		time.Sleep(6 * time.Second) // bubble time
		synctest.Wait()
		if now := renewTime(ctx, t, cs, n.name); !now.Equal(after) {
			t.Errorf("the lease was renewed after the node went down: %v → %v", after, now)
		}

		if got := s.Boot(Selector{Node: n.name}); got != 1 {
			t.Fatalf("Boot booted %d, want 1", got)
		}
		waitFor(t, "Ready again after boot", func() error {
			if c := readyCondition(ctx, t, cs, n.name); c.Status != corev1.ConditionTrue {
				return fmt.Errorf("Ready = %+v", c)
			}
			return nil
		})
	})
}

// waitFor steps bubble time (100 ms at a time, up to 2 minutes) until check
// passes.
func waitFor(t *testing.T, what string, check func() error) {
	t.Helper()
	var err error
	for range 1200 {
		synctest.Wait()
		if err = check(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}

func createPod(ctx context.Context, t *testing.T, cs *fake.Clientset, node, name string, priority *int32, i int) {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(time.Now().Add(time.Duration(i) * time.Second))},
		Spec: corev1.PodSpec{NodeName: node, Priority: priority, TerminationGracePeriodSeconds: ptr.To[int64](60),
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func renewTime(ctx context.Context, t *testing.T, cs *fake.Clientset, node string) time.Time {
	t.Helper()
	l, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, node, metav1.GetOptions{})
	if err != nil || l.Spec.RenewTime == nil {
		t.Fatalf("lease of %s: %v", node, err)
	}
	return l.Spec.RenewTime.Time
}

func readyCondition(ctx context.Context, t *testing.T, cs *fake.Clientset, node string) corev1.NodeCondition {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c
		}
	}
	return corev1.NodeCondition{}
}
