package tainteviction_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeplane/nodeplane/internal/controller/tainteviction"
)

func node(name string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: taints}}
}

func added(t corev1.Taint, at time.Time) corev1.Taint {
	at2 := metav1.NewTime(at)
	t.TimeAdded = &at2
	return t
}

func pod(name, nodeName string, tols ...corev1.Toleration) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Spec:       corev1.PodSpec{NodeName: nodeName, Tolerations: tols},
	}
}

func terminating(p *corev1.Pod, at time.Time) *corev1.Pod {
	p = p.DeepCopy()
	ts := metav1.NewTime(at)
	p.DeletionTimestamp = &ts
	return p
}

func messages(events []tainteviction.Event) []string {
	var out []string
	for _, e := range events {
		if e.Type != corev1.EventTypeNormal || e.Reason != "TaintManagerEviction" {
			out = append(out, fmt.Sprintf("unexpected %s/%s: %s", e.Type, e.Reason, e.Message))
			continue
		}
		out = append(out, e.Message)
	}
	return out
}

func evicted(evs []tainteviction.Eviction) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Pod.String())
	}
	return out
}

func pendingAt(c *tainteviction.Core) map[string]time.Time {
	out := map[string]time.Time{}
	for _, p := range c.Pending() {
		out[p.Pod.String()] = p.At
	}
	return out
}

func wantStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: got %q, want %q", what, got, want)
	}
}

func TestUntoleratedTaintEvictsAtOnceWithEventAndCondition(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	c := tainteviction.New()
	n := node("n1", added(outOfService, t0))
	web := pod("web", "n1", defaultTolerations(300)...)
	if ev := c.ObserveNode(clk.Now(), n, []*corev1.Pod{web}); len(ev) != 0 {
		t.Fatalf("got events %q, want none", messages(ev))
	}
	due := c.Due(clk.Now())
	if len(due) != 1 {
		t.Fatalf("got %d evictions, want 1", len(due))
	}
	e := due[0]
	if e.Pod.UID != "uid-web" || e.Pod.NodeName != "n1" || !e.At.Equal(t0) || e.Taint.Key != corev1.TaintNodeOutOfService {
		t.Errorf("got %+v at %v for taint %q", e.Pod, e.At, e.Taint.Key)
	}
	wantStrings(t, "event", messages([]tainteviction.Event{e.Event}), []string{"Marking for deletion Pod default/web"})
	if e.Condition.Type != corev1.DisruptionTarget || e.Condition.Status != corev1.ConditionTrue ||
		e.Condition.Reason != "DeletionByTaintManager" || e.Condition.Message != "Taint manager: deleting due to NoExecute taint" {
		t.Errorf("got condition %+v", e.Condition)
	}
	if again := c.Due(clk.Now()); len(again) != 0 {
		t.Errorf("got %q evicted again, want nothing", evicted(again))
	}
}

// step is one observation in a scripted scenario.
type step struct {
	after      time.Duration // advance the fake clock first
	node       *corev1.Node  // ObserveNode with pods
	pods       []*corev1.Pod
	pod        *corev1.Pod // ObservePod
	forgetPod  types.UID   // ForgetPod
	forgetNode string      // ForgetNode
	restart    bool        // replace the Core with a new one (new leader)

	wantEvents  []string
	wantEvicted []string
	wantPending map[string]time.Duration // pod → deadline as offset from t0
}

func runScript(t *testing.T, steps []step) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	c := tainteviction.New()
	for i, s := range steps {
		clk.Step(s.after)
		now := clk.Now()
		var events []tainteviction.Event
		switch {
		case s.restart:
			c = tainteviction.New()
			if s.node != nil {
				events = c.ObserveNode(now, s.node, s.pods)
			}
		case s.node != nil:
			events = c.ObserveNode(now, s.node, s.pods)
		case s.pod != nil:
			events = c.ObservePod(now, s.pod)
		case s.forgetPod != "":
			events = c.ForgetPod(s.forgetPod)
		case s.forgetNode != "":
			c.ForgetNode(s.forgetNode)
		}
		due := c.Due(now)
		t.Run(fmt.Sprintf("step %d at +%v", i, now.Sub(t0)), func(t *testing.T) {
			wantStrings(t, "events", messages(events), s.wantEvents)
			wantStrings(t, "evicted", evicted(due), s.wantEvicted)
			if s.wantPending != nil {
				want := map[string]time.Time{}
				for k, v := range s.wantPending {
					want[k] = t0.Add(v)
				}
				if got := pendingAt(c); !reflect.DeepEqual(got, want) {
					t.Errorf("pending: got %v, want %v", got, want)
				}
			}
		})
	}
}

func TestScenarios(t *testing.T) {
	web := pod("web", "n1", defaultTolerations(300)...)
	db := pod("db", "n1", tolerate(corev1.TaintNodeUnreachable, nil), tolerate(corev1.TaintNodeNotReady, nil))
	short := pod("short", "n1", tolerate(corev1.TaintNodeUnreachable, secs(5)))
	bare := pod("bare", "n1")
	unreachableAt0 := added(unreachable, t0)
	none := map[string]time.Duration{}

	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "a pending eviction is cancelled with the event when the taint goes",
			steps: []step{
				{node: node("n1", unreachableAt0), pods: []*corev1.Pod{web, db}, wantPending: map[string]time.Duration{"default/web": 300 * time.Second}},
				{after: 100 * time.Second, node: node("n1"), pods: []*corev1.Pod{web, db},
					wantEvents: []string{"Cancelling deletion of Pod default/web"}, wantPending: none},
				{after: 300 * time.Second, node: node("n1"), pods: []*corev1.Pod{web, db}, wantPending: none},
			},
		},
		{
			name: "observing the same node again changes nothing",
			steps: []step{
				{node: node("n1", unreachableAt0), pods: []*corev1.Pod{web, db}, wantPending: map[string]time.Duration{"default/web": 300 * time.Second}},
				{after: time.Second, node: node("n1", unreachableAt0), pods: []*corev1.Pod{web, db}, wantPending: map[string]time.Duration{"default/web": 300 * time.Second}},
				{after: time.Second, pod: web, wantPending: map[string]time.Duration{"default/web": 300 * time.Second}},
			},
		},
		{
			name: "the pending eviction fires once at its deadline and not before",
			steps: []step{
				{node: node("n1", unreachableAt0), pods: []*corev1.Pod{web, short}},
				{after: 4 * time.Second, node: node("n1", unreachableAt0), pods: []*corev1.Pod{web, short}},
				{after: time.Second, wantEvicted: []string{"default/short"}},
				{after: 294 * time.Second, wantPending: map[string]time.Duration{"default/web": 300 * time.Second}},
				{after: time.Second, wantEvicted: []string{"default/web"}, wantPending: none},
				{after: time.Second, node: node("n1", unreachableAt0), pods: []*corev1.Pod{web, short}, wantPending: none},
			},
		},
		{
			// timeAdded t0 (as read, whole seconds): the taint went on within
			// [t0, t0+1s), so a controller that did not see it being added
			// counts from t0+1s — every time, so a restart keeps the deadline.
			name: "a restarted controller rebuilds the same deadline from the end of the timeAdded second and deletes once",
			steps: []step{
				{after: 10 * time.Second, node: node("n1", unreachableAt0), pods: []*corev1.Pod{web}, wantPending: map[string]time.Duration{"default/web": 301 * time.Second}},
				{after: 110 * time.Second, restart: true, node: node("n1", unreachableAt0), pods: []*corev1.Pod{web},
					wantPending: map[string]time.Duration{"default/web": 301 * time.Second}},
				{after: 180 * time.Second, wantPending: map[string]time.Duration{"default/web": 301 * time.Second}},
				{after: time.Second, wantEvicted: []string{"default/web"}},
				// The deletion is graceful; the dead node's pod stays Terminating.
				{after: time.Second, pod: terminating(web, t0.Add(300*time.Second)), wantPending: none},
			},
		},
		{
			name: "a new leader does not delete again a pod the old one already deleted",
			steps: []step{
				{node: node("n1", unreachableAt0), pods: []*corev1.Pod{web}},
				{after: 300 * time.Second, wantEvicted: []string{"default/web"}},
				{after: 5 * time.Second, restart: true, node: node("n1", unreachableAt0), pods: []*corev1.Pod{terminating(web, t0.Add(300*time.Second))}, wantPending: none},
			},
		},
		{
			name: "a leader that restarts after the deadline passed evicts at once",
			steps: []step{
				{after: 10 * time.Second, node: node("n1", unreachableAt0), pods: []*corev1.Pod{web}},
				{after: 400 * time.Second, restart: true, node: node("n1", unreachableAt0), pods: []*corev1.Pod{web}, wantEvicted: []string{"default/web"}},
			},
		},
		{
			name: "a taint without timeAdded counts from when this controller first saw it",
			steps: []step{
				{after: 20 * time.Second, node: node("n1", unreachable), pods: []*corev1.Pod{db}, wantPending: none},
				{after: 50 * time.Second, node: node("n1", unreachable), pods: []*corev1.Pod{db, web},
					wantPending: map[string]time.Duration{"default/web": 320 * time.Second}},
			},
		},
		{
			name: "a fired eviction is not repeated while the cache still shows the pod running",
			steps: []step{
				{node: node("n1", unreachableAt0), pods: []*corev1.Pod{bare}, wantEvicted: []string{"default/bare"}},
				{after: time.Second, node: node("n1", unreachableAt0, added(notReady, t0)), pods: []*corev1.Pod{bare}},
				{after: time.Second, pod: bare},
				{after: time.Second, pod: terminating(bare, t0)},
				{after: time.Second, forgetPod: "uid-bare"},
			},
		},
		{
			name: "a later shorter toleration does not bring the deadline forward (upstream quirk kept)",
			steps: []step{
				{node: node("n1", unreachableAt0), pods: []*corev1.Pod{web}, wantPending: map[string]time.Duration{"default/web": 300 * time.Second}},
				{after: 10 * time.Second, pod: pod("web", "n1", tolerate(corev1.TaintNodeUnreachable, secs(30)), tolerate(corev1.TaintNodeNotReady, secs(300))),
					wantPending: map[string]time.Duration{"default/web": 300 * time.Second}},
			},
		},
		{
			name: "swapping not-ready for unreachable keeps the deadline of the first taint",
			steps: []step{
				{node: node("n1", added(notReady, t0)), pods: []*corev1.Pod{web}, wantPending: map[string]time.Duration{"default/web": 300 * time.Second}},
				{after: 60 * time.Second, node: node("n1", added(unreachable, t0.Add(60*time.Second))), pods: []*corev1.Pod{web},
					wantPending: map[string]time.Duration{"default/web": 300 * time.Second}},
			},
		},
		{
			name: "a new untolerated taint brings a pending eviction forward without a cancel event",
			steps: []step{
				{node: node("n1", unreachableAt0), pods: []*corev1.Pod{web}},
				{after: 30 * time.Second, node: node("n1", unreachableAt0, outOfService), pods: []*corev1.Pod{web}, wantEvicted: []string{"default/web"}},
			},
		},
		{
			name: "a pod that comes to tolerate the taint for ever is cancelled with the event",
			steps: []step{
				{node: node("n1", unreachableAt0), pods: []*corev1.Pod{web}},
				{after: 30 * time.Second, pod: pod("web", "n1", tolerate(corev1.TaintNodeUnreachable, nil)),
					wantEvents: []string{"Cancelling deletion of Pod default/web"}, wantPending: none},
				{after: 300 * time.Second, wantPending: none},
			},
		},
		{
			name: "deleting a pod with a pending eviction cancels it with the event, without one it is silent",
			steps: []step{
				{node: node("n1", unreachableAt0), pods: []*corev1.Pod{web, db}},
				{after: time.Second, forgetPod: "uid-web", wantEvents: []string{"Cancelling deletion of Pod default/web"}, wantPending: none},
				{after: time.Second, forgetPod: "uid-db"},
				{after: time.Second, forgetPod: "uid-web"},
			},
		},
		{
			name: "a pod gone from the node's pod list loses its pending eviction with the event",
			steps: []step{
				{node: node("n1", unreachableAt0), pods: []*corev1.Pod{web, db}},
				{after: time.Second, node: node("n1", unreachableAt0), pods: []*corev1.Pod{db},
					wantEvents: []string{"Cancelling deletion of Pod default/web"}, wantPending: none},
			},
		},
		{
			name: "a pod that starts terminating drops its pending eviction silently",
			steps: []step{
				{node: node("n1", unreachableAt0), pods: []*corev1.Pod{web}},
				{after: time.Second, pod: terminating(web, t0), wantPending: none},
				{after: 300 * time.Second},
			},
		},
		{
			name: "NoSchedule and PreferNoSchedule taints are ignored",
			steps: []step{
				{node: node("n1",
					corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
					corev1.Taint{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}),
					pods: []*corev1.Pod{bare}, wantPending: none},
			},
		},
		{
			name: "a user taint and the out-of-service taint evict like any other NoExecute taint",
			steps: []step{
				{node: node("n1", added(dedicated, t0)), pods: []*corev1.Pod{web, pod("dbpod", "n1", tolerate("dedicated", secs(60)))},
					wantEvicted: []string{"default/web"}, wantPending: map[string]time.Duration{"default/dbpod": 60 * time.Second}},
				{node: node("n2", outOfService), pods: []*corev1.Pod{pod("other", "n2", defaultTolerations(300)...)}, wantEvicted: []string{"default/other"}},
			},
		},
		{
			name: "a pod bound to a tainted node later counts from its binding",
			steps: []step{
				{node: node("n1", unreachableAt0), pods: []*corev1.Pod{db}},
				{after: time.Hour, pod: scheduledAt(pod("late", "n1", defaultTolerations(300)...), t0.Add(time.Hour)),
					wantPending: map[string]time.Duration{"default/late": time.Hour + 300*time.Second}},
			},
		},
		{
			name: "a pod of a node never seen tainted is left alone",
			steps: []step{
				{pod: bare, wantPending: none},
				{node: node("n1"), pods: []*corev1.Pod{bare}, wantPending: none},
				{pod: bare, wantPending: none},
			},
		},
		{
			name: "deleting the node keeps its pods' pending evictions, as upstream",
			steps: []step{
				{node: node("n1", unreachableAt0), pods: []*corev1.Pod{web}},
				{after: time.Second, forgetNode: "n1", wantPending: map[string]time.Duration{"default/web": 300 * time.Second}},
				{after: time.Second, pod: web, wantPending: map[string]time.Duration{"default/web": 300 * time.Second}},
				{after: 298 * time.Second, wantEvicted: []string{"default/web"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runScript(t, tt.steps) })
	}
}

func TestFailedEvictionIsRetriedAtTheGivenTime(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	c := tainteviction.New()
	bare := pod("bare", "n1")
	c.ObserveNode(clk.Now(), node("n1", unreachable), []*corev1.Pod{bare})
	if got := evicted(c.Due(clk.Now())); len(got) != 1 {
		t.Fatalf("got %q, want one eviction", got)
	}
	c.Failed("uid-bare", clk.Now().Add(10*time.Second))
	if at, ok := c.NextDue(); !ok || !at.Equal(t0.Add(10*time.Second)) {
		t.Errorf("next due: got %v %v, want %v", at, ok, t0.Add(10*time.Second))
	}
	clk.Step(9 * time.Second)
	if got := c.Due(clk.Now()); len(got) != 0 {
		t.Errorf("got %q before the retry time, want nothing", evicted(got))
	}
	clk.Step(time.Second)
	if got := evicted(c.Due(clk.Now())); !reflect.DeepEqual(got, []string{"default/bare"}) {
		t.Errorf("got %q at the retry time, want [default/bare]", got)
	}
	c.Failed("uid-unknown", clk.Now()) // not tracked: nothing happens
	if _, ok := c.NextDue(); ok {
		t.Error("got a next due time, want none")
	}
}

func TestFailedEvictionOfAPodNoLongerToBeEvictedIsNotRetried(t *testing.T) {
	c := tainteviction.New()
	bare := pod("bare", "n1")
	c.ObserveNode(t0, node("n1", unreachable), []*corev1.Pod{bare})
	if got := evicted(c.Due(t0)); len(got) != 1 {
		t.Fatalf("got %q, want one eviction", got)
	}
	if ev := c.ObserveNode(t0.Add(time.Second), node("n1"), []*corev1.Pod{bare}); len(ev) != 0 {
		t.Errorf("got events %q after the eviction fired, want none", messages(ev))
	}
	c.Failed("uid-bare", t0.Add(2*time.Second))
	if at, ok := c.NextDue(); ok {
		t.Errorf("got a retry at %v, want none", at)
	}
}

func TestDueOrdersByDeadlineThenName(t *testing.T) {
	c := tainteviction.New()
	pods := []*corev1.Pod{
		pod("c", "n1", tolerate(corev1.TaintNodeUnreachable, secs(20))),
		pod("b", "n1", tolerate(corev1.TaintNodeUnreachable, secs(10))),
		pod("a", "n1", tolerate(corev1.TaintNodeUnreachable, secs(20))),
	}
	c.ObserveNode(t0, node("n1", added(unreachable, t0)), pods)
	if at, ok := c.NextDue(); !ok || !at.Equal(t0.Add(10*time.Second)) {
		t.Errorf("next due: got %v %v, want %v", at, ok, t0.Add(10*time.Second))
	}
	got := evicted(c.Due(t0.Add(time.Minute)))
	if want := []string{"default/b", "default/a", "default/c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestManyPendingEvictions checks the heap against a simple model: random
// deadlines and cancellations, every pod due exactly once and in order.
func TestManyPendingEvictions(t *testing.T) {
	c := tainteviction.New()
	const n = 500
	var pods []*corev1.Pod
	for i := range n {
		pods = append(pods, pod(fmt.Sprintf("p%03d", i), "n1", tolerate(corev1.TaintNodeUnreachable, secs(int64((i*7919)%997)))))
	}
	c.ObserveNode(t0, node("n1", added(unreachable, t0)), pods)
	cancelled := 0
	for i := 0; i < n; i += 3 {
		if len(c.ForgetPod(pods[i].UID)) != 1 {
			t.Fatalf("pod %s: got no cancel event", pods[i].Name)
		}
		cancelled++
	}
	var last time.Time
	seen := map[string]bool{}
	for s := range 1000 {
		now := t0.Add(time.Duration(s) * time.Second)
		for _, e := range c.Due(now) {
			if e.At.Before(last) || e.At.After(now) {
				t.Fatalf("%s due at %v, out of order (last %v, now %v)", e.Pod, e.At, last, now)
			}
			last = e.At
			if seen[e.Pod.Name] {
				t.Fatalf("%s evicted twice", e.Pod)
			}
			seen[e.Pod.Name] = true
		}
	}
	if len(seen) != n-cancelled {
		t.Errorf("got %d evictions, want %d", len(seen), n-cancelled)
	}
}

// TestEvictionNeverComesBeforeTheTolerationAsClientsReadIt: timeAdded is
// read with one-second resolution, so a taint stamped 12:00:00 went on
// somewhere in [12:00:00, 12:00:01). A pod tolerating it for 30 s must not go
// before 30 s after the real moment, which a client can only bound by
// timeAdded + 1 s + 30 s — unless the controller saw the taint being added,
// which is itself after the real moment.
func TestEvictionNeverComesBeforeTheTolerationAsClientsReadIt(t *testing.T) {
	real := t0.Add(600 * time.Millisecond)                                          // the taint really went on
	stamped := added(unreachable, real)                                             // written with nanoseconds...
	stamped.TimeAdded = &metav1.Time{Time: stamped.TimeAdded.Truncate(time.Second)} // ...read as 12:00:00
	p := pod("p", "n1", tolerate(corev1.TaintNodeUnreachable, secs(30)))
	tests := []struct {
		name      string
		firstSeen time.Time // when this controller first observes the taint
		deadline  time.Time
	}{
		{"a taint seen as it is added counts from the controller's own sighting",
			real.Add(40 * time.Millisecond), real.Add(40*time.Millisecond + 30*time.Second)},
		{"a taint found after a restart counts from the end of its timeAdded second",
			t0.Add(12 * time.Second), t0.Add(31 * time.Second)},
		{"a taint seen late in its second still counts from the sighting, the earlier safe start",
			t0.Add(999 * time.Millisecond), t0.Add(999*time.Millisecond + 30*time.Second)},
		{"a timeAdded ahead of the controller's clock (skew) counts from the sighting",
			t0.Add(-5 * time.Second), t0.Add(25 * time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(tt.firstSeen)
			c := tainteviction.New()
			c.ObserveNode(clk.Now(), node("n1", stamped), []*corev1.Pod{p})
			if at := pendingAt(c)["default/p"]; !at.Equal(tt.deadline) {
				t.Fatalf("pending eviction at %v, want %v", at.Format(time.StampMilli), tt.deadline.Format(time.StampMilli))
			}
			if tt.deadline.Before(tt.firstSeen.Add(30*time.Second)) && tt.deadline.Before(stamped.TimeAdded.Add(31*time.Second)) {
				t.Fatalf("deadline %v is before both safe bounds", tt.deadline)
			}
			clk.SetTime(tt.deadline.Add(-time.Millisecond))
			if got := c.Due(clk.Now()); len(got) != 0 {
				t.Fatalf("evicted %v at deadline-1ms", evicted(got))
			}
			clk.SetTime(tt.deadline)
			if got := evicted(c.Due(clk.Now())); len(got) != 1 {
				t.Fatalf("evicted %v at the deadline, want default/p", got)
			}
		})
	}
}
