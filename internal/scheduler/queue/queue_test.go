package queue_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
	ft "github.com/nodeplane/nodeplane/internal/scheduler/framework/frameworktest"
	"github.com/nodeplane/nodeplane/internal/scheduler/queue"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// pluginEvents mirrors two real plugins' registrations.
var pluginEvents = map[string][]framework.ClusterEvent{
	"NodeResourcesFit": {
		{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeAllocatable},
		{Resource: framework.Pod, ActionType: framework.Delete},
	},
	"TaintToleration": {{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeTaint}},
}

func newQueue(t *testing.T, mutate ...func(*queue.Config)) (*queue.Queue, *testingclock.FakeClock) {
	t.Helper()
	clk := testingclock.NewFakeClock(t0)
	cfg := queue.DefaultConfig()
	cfg.Clock = clk
	cfg.PluginEvents = pluginEvents
	cfg.PopFromBackoffQ = false
	for _, m := range mutate {
		m(&cfg)
	}
	q, err := queue.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return q, clk
}

// popNow pops a pod that must be ready.
func popNow(t *testing.T, q *queue.Queue) *queue.QueuedPodInfo {
	t.Helper()
	if s := q.Stats(); s.Active == 0 {
		t.Fatalf("nothing active to pop: %+v", s)
	}
	p, err := q.Pop(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fail ends the attempt of p as rejected by plugins (none: an error).
func fail(t *testing.T, q *queue.Queue, p *queue.QueuedPodInfo, plugins ...string) {
	t.Helper()
	cycle := q.SchedulingCycle()
	p.UnschedulablePlugins = sets.New(plugins...)
	if err := q.AddUnschedulable(p, cycle); err != nil {
		t.Fatal(err)
	}
}

func TestBackoffDoublesFromOneToTenSeconds(t *testing.T) {
	q, clk := newQueue(t)
	q.Add(ft.Pod("p"))
	want := []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for attempt, backoff := range want {
		p := popNow(t, q)
		if p.Attempts != attempt+1 {
			t.Fatalf("attempt %d popped with Attempts=%d", attempt+1, p.Attempts)
		}
		if got := q.BackoffDuration(p.Attempts); got != backoff {
			t.Errorf("attempt %d: BackoffDuration %v, want %v", attempt+1, got, backoff)
		}
		fail(t, q, p) // an internal error: straight to back-off
		clk.Step(backoff - time.Millisecond)
		if s := q.Stats(); s.Backoff != 1 || s.Active != 0 {
			t.Fatalf("attempt %d: %v after failing, still backing off: %+v", attempt+1, backoff-time.Millisecond, s)
		}
		clk.Step(time.Millisecond)
		if s := q.Stats(); s.Active != 1 {
			t.Fatalf("attempt %d: back-off of %v over but %+v", attempt+1, backoff, s)
		}
	}
}

func TestActiveOrderIsPriorityThenFIFO(t *testing.T) {
	q, clk := newQueue(t)
	q.Add(ft.Pod("low-old", ft.Priority(1)))
	clk.Step(time.Second)
	q.Add(ft.Pod("high", ft.Priority(10)))
	q.Add(ft.Pod("low-new", ft.Priority(1)))
	q.Add(ft.Pod("low-same-time", ft.Priority(1)))
	var order []string
	for range 4 {
		order = append(order, popNow(t, q).Pod.Name)
	}
	want := []string{"high", "low-old", "low-new", "low-same-time"}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}
}

func TestUnschedulablePodsMoveOnRelevantEvents(t *testing.T) {
	q, clk := newQueue(t)
	q.Add(ft.Pod("big"))
	q.Add(ft.Pod("tainted"))
	big, tainted := popNow(t, q), popNow(t, q)
	fail(t, q, big, "NodeResourcesFit")
	fail(t, q, tainted, "TaintToleration")
	if s := q.Stats(); s.Unschedulable != 2 {
		t.Fatalf("after rejections: %+v, want 2 unschedulable", s)
	}

	q.MoveAllToActiveOrBackoff(framework.ClusterEvent{Resource: framework.Node, ActionType: framework.UpdateNodeLabel})
	if s := q.Stats(); s.Unschedulable != 2 {
		t.Fatalf("a label change woke pods no plugin cares: %+v", s)
	}
	q.MoveAllToActiveOrBackoff(framework.ClusterEvent{Resource: framework.Node, ActionType: framework.UpdateNodeTaint})
	if s := q.Stats(); s.Unschedulable != 1 || s.Backoff != 1 {
		t.Fatalf("a taint change: %+v, want the tainted pod backing off", s)
	}
	clk.Step(2 * time.Second)
	q.MoveAllToActiveOrBackoff(framework.EventNodeAdd)
	if s := q.Stats(); s.Unschedulable != 0 || s.Active != 2 {
		t.Fatalf("a node add after the back-off: %+v, want both pods active", s)
	}
}

func TestPodsRejectedByUnknownPluginsMoveOnAnyEvent(t *testing.T) {
	q, _ := newQueue(t)
	q.Add(ft.Pod("p"))
	fail(t, q, popNow(t, q), "SomethingElse")
	q.MoveAllToActiveOrBackoff(framework.ClusterEvent{Resource: framework.Node, ActionType: framework.UpdateNodeAnnotation})
	if s := q.Stats(); s.Unschedulable != 0 {
		t.Errorf("%+v: a pod rejected by an unregistered plugin stayed put", s)
	}
}

func TestUnschedulablePodsAreFlushedAfterFiveMinutes(t *testing.T) {
	q, clk := newQueue(t)
	q.Add(ft.Pod("p"))
	fail(t, q, popNow(t, q), "NodeResourcesFit")
	clk.Step(5*time.Minute - time.Second)
	if s := q.Stats(); s.Unschedulable != 1 {
		t.Fatalf("before 5 min: %+v, want it still unschedulable", s)
	}
	clk.Step(time.Second)
	if s := q.Stats(); s.Active != 1 {
		t.Fatalf("at 5 min: %+v, want it active", s)
	}
}

func TestAnEventDuringTheAttemptSendsThePodToBackoff(t *testing.T) {
	q, _ := newQueue(t)
	q.Add(ft.Pod("p"))
	p := popNow(t, q)
	cycle := q.SchedulingCycle()
	q.MoveAllToActiveOrBackoff(framework.EventNodeAdd) // arrives while p is being scheduled
	p.UnschedulablePlugins = sets.New("NodeResourcesFit")
	if err := q.AddUnschedulable(p, cycle); err != nil {
		t.Fatal(err)
	}
	if s := q.Stats(); s.Backoff != 1 || s.Unschedulable != 0 {
		t.Errorf("%+v: the node added during the attempt may fit it, want back-off", s)
	}
}

func TestUpdatesAndDeletes(t *testing.T) {
	t.Run("an updated unschedulable pod is retried", func(t *testing.T) {
		q, clk := newQueue(t)
		old := ft.Pod("p")
		q.Add(old)
		fail(t, q, popNow(t, q), "NodeResourcesFit")
		clk.Step(time.Second)
		q.Update(old, ft.Pod("p", ft.Container("cpu", "100m")))
		if s := q.Stats(); s.Active != 1 {
			t.Errorf("%+v, want the updated pod active", s)
		}
	})
	t.Run("a status-only update leaves it waiting", func(t *testing.T) {
		q, _ := newQueue(t)
		old := ft.Pod("p")
		q.Add(old)
		fail(t, q, popNow(t, q), "NodeResourcesFit")
		cur := old.DeepCopy()
		cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse}}
		cur.ResourceVersion = "7"
		q.Update(old, cur)
		if s := q.Stats(); s.Unschedulable != 1 {
			t.Errorf("%+v, want it still unschedulable", s)
		}
	})
	t.Run("a pod deleted while being scheduled is dropped", func(t *testing.T) {
		q, _ := newQueue(t)
		pod := ft.Pod("p")
		q.Add(pod)
		p := popNow(t, q)
		q.Delete(pod)
		fail(t, q, p, "NodeResourcesFit")
		if s := q.Stats(); s != (queue.Stats{}) {
			t.Errorf("%+v, want an empty queue", s)
		}
	})
	t.Run("a pod updated while being scheduled goes to back-off in its new version", func(t *testing.T) {
		q, _ := newQueue(t)
		q.Add(ft.Pod("p"))
		p := popNow(t, q)
		q.Update(nil, ft.Pod("p", ft.Labels("v", "2")))
		fail(t, q, p, "NodeResourcesFit")
		if s := q.Stats(); s.Backoff != 1 {
			t.Fatalf("%+v, want back-off", s)
		}
		if got := q.PendingPods()[0].Labels["v"]; got != "2" {
			t.Errorf("queued version has v=%q, want 2", got)
		}
	})
	t.Run("a deleted pending pod is gone", func(t *testing.T) {
		q, _ := newQueue(t)
		pod := ft.Pod("p")
		q.Add(pod)
		q.Delete(pod)
		if s := q.Stats(); s.Active != 0 {
			t.Errorf("%+v, want nothing", s)
		}
	})
	t.Run("re-queueing a pod that is queued is refused", func(t *testing.T) {
		q, _ := newQueue(t)
		q.Add(ft.Pod("p"))
		p := popNow(t, q)
		q.Done(p.Pod)
		q.Add(ft.Pod("p"))
		p.UnschedulablePlugins = sets.New("NodeResourcesFit")
		if err := q.AddUnschedulable(p, q.SchedulingCycle()); !errors.Is(err, queue.ErrAlreadyQueued) {
			t.Errorf("got %v, want ErrAlreadyQueued", err)
		}
	})
}

func TestGatedPodsWaitForTheirGatesToGo(t *testing.T) {
	q, _ := newQueue(t)
	gated := ft.Pod("p", func(p *corev1.Pod) { p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}} })
	q.Add(gated)
	q.MoveAllToActiveOrBackoff(framework.EventUnschedulableTimeout)
	if s := q.Stats(); s.Gated != 1 || s.Active != 0 {
		t.Fatalf("%+v, want the pod gated", s)
	}
	q.Update(gated, ft.Pod("p"))
	if s := q.Stats(); s.Active != 1 || s.Gated != 0 {
		t.Errorf("%+v, want the ungated pod active", s)
	}
}

func TestPopFromBackoffWhenIdle(t *testing.T) {
	q, _ := newQueue(t, func(c *queue.Config) { c.PopFromBackoffQ = true })
	q.Add(ft.Pod("rejected"))
	q.Add(ft.Pod("broken"))
	rejected, broken := popNow(t, q), popNow(t, q)
	cycle := q.SchedulingCycle()
	q.MoveAllToActiveOrBackoff(framework.EventNodeAdd)
	rejected.UnschedulablePlugins = sets.New("NodeResourcesFit")
	if err := q.AddUnschedulable(rejected, cycle); err != nil {
		t.Fatal(err)
	}
	fail(t, q, broken) // an error: never popped early

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p, err := q.Pop(ctx)
	if err != nil || p.Pod.Name != "rejected" {
		t.Fatalf("Pop on an idle queue gave %v, %v; want the rejected pod still backing off", p, err)
	}
	if _, err := q.Pop(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("second Pop gave %v, want the context error: a pod that failed with an error must wait", err)
	}
}

func TestPopBlocksUntilTheBackoffEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, clk := newQueue(t)
		q.Add(ft.Pod("p"))
		fail(t, q, popNow(t, q))

		got := make(chan string, 1)
		go func() {
			p, err := q.Pop(context.Background())
			if err != nil {
				got <- err.Error()
				return
			}
			got <- p.Pod.Name
		}()
		synctest.Wait()
		select {
		case name := <-got:
			t.Fatalf("Pop returned %q during the back-off", name)
		default:
		}
		clk.Step(time.Second)
		synctest.Wait()
		select {
		case name := <-got:
			if name != "p" {
				t.Errorf("Pop returned %q, want p", name)
			}
		default:
			t.Fatal("Pop still blocked after the back-off ended")
		}
	})
}

func TestPopWakesOnAddAndStopsOnCloseOrCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, _ := newQueue(t)
		got := make(chan error, 1)
		go func() {
			_, err := q.Pop(context.Background())
			got <- err
		}()
		synctest.Wait()
		q.Add(ft.Pod("p"))
		synctest.Wait()
		if err := <-got; err != nil {
			t.Fatalf("Pop after Add: %v", err)
		}

		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			_, err := q.Pop(ctx)
			got <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-got; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Pop gave %v", err)
		}

		go func() {
			_, err := q.Pop(context.Background())
			got <- err
		}()
		synctest.Wait()
		q.Close()
		if err := <-got; !errors.Is(err, queue.ErrClosed) {
			t.Errorf("Pop after Close gave %v, want ErrClosed", err)
		}
	})
}
