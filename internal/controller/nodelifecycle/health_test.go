package nodelifecycle

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// firstUnknown runs monitor passes every 5 s for span, calling beat before
// each, and returns when the node was first seen Unknown (relative to t0),
// or -1.
func firstUnknown(cl *cluster, name string, span time.Duration, beat func(elapsed time.Duration)) time.Duration {
	for d := time.Duration(0); d <= span; d += 5 * time.Second {
		cl.now = t0.Add(d)
		if beat != nil {
			beat(d)
		}
		cl.monitor()
		if cl.ready(name) == corev1.ConditionUnknown {
			return d
		}
	}
	return -1
}

func TestHealthTransitions(t *testing.T) {
	tests := []struct {
		name  string
		setup func(cl *cluster)
		beat  func(cl *cluster, elapsed time.Duration)
		want  time.Duration // first pass with Ready Unknown; -1 never (within 3 min)
	}{
		{"a node silent from the start is Unknown after the grace period, not before",
			func(cl *cluster) { cl.join("n") }, nil, 55 * time.Second},
		{"a node renewing its lease stays alive without posting status",
			func(cl *cluster) { cl.join("n") },
			func(cl *cluster, d time.Duration) {
				if d%(10*time.Second) == 0 {
					cl.renew("n")
				}
			}, -1},
		{"a node posting heartbeats without a lease stays alive",
			func(cl *cluster) { cl.join("n"); delete(cl.leases, "n") },
			func(cl *cluster, d time.Duration) { cl.post("n", corev1.ConditionTrue) }, -1},
		{"a node that stops renewing at 30 s is Unknown 50 s after the controller last saw it",
			func(cl *cluster) { cl.join("n") },
			func(cl *cluster, d time.Duration) {
				if d <= 30*time.Second {
					cl.renew("n")
				}
			}, 85 * time.Second},
		{"a lease renewTime that goes back is no sign of life",
			func(cl *cluster) { cl.join("n") },
			func(cl *cluster, d time.Duration) { cl.renewAt("n", t0.Add(-d)) }, 55 * time.Second},
		{"a lease renewTime that stays equal is no sign of life",
			func(cl *cluster) { cl.join("n") },
			func(cl *cluster, d time.Duration) { cl.renewAt("n", t0) }, 55 * time.Second},
		{"agent clocks far off do not matter, only changes do",
			func(cl *cluster) { cl.add("n"); cl.postAt("n", corev1.ConditionTrue, t0.AddDate(-3, 0, 0)) },
			func(cl *cluster, d time.Duration) {
				cl.postAt("n", corev1.ConditionTrue, t0.AddDate(-3, 0, 0).Add(d))
			}, -1},
		{"a node that never posted Ready gets the startup grace period",
			func(cl *cluster) { cl.add("n") }, nil, 65 * time.Second},
		{"a node renewing its lease but never posting status is left alone",
			func(cl *cluster) { cl.add("n") },
			func(cl *cluster, d time.Duration) { cl.renew("n") }, -1},
		{"a node whose agent posts Ready=False is still marked Unknown when it goes silent",
			func(cl *cluster) { cl.join("n"); cl.post("n", corev1.ConditionFalse) }, nil, 55 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := newCluster(t, DefaultConfig())
			tt.setup(cl)
			var beat func(time.Duration)
			if tt.beat != nil {
				beat = func(d time.Duration) { tt.beat(cl, d) }
			}
			if got := firstUnknown(cl, "n", 3*time.Minute, beat); got != tt.want {
				t.Errorf("first Unknown at %v, want %v", got, tt.want)
			}
		})
	}
}

func TestUnknownConditionsAreWrittenAsUpstream(t *testing.T) {
	cl := newCluster(t, DefaultConfig())
	cl.join("n")
	n := cl.nodes["n"].DeepCopy()
	hb := metav1.NewTime(t0)
	old := metav1.NewTime(t0.Add(-time.Hour))
	n.Status.Conditions = append(n.Status.Conditions,
		corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: hb, LastTransitionTime: old},
		corev1.NodeCondition{Type: corev1.NodeDiskPressure, Status: corev1.ConditionUnknown, Reason: "Earlier", LastHeartbeatTime: hb, LastTransitionTime: old},
		corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: "RouteCreated", LastHeartbeatTime: hb, LastTransitionTime: old},
	)
	cl.nodes["n"] = n
	cl.monitor()
	cl.now = t0.Add(55 * time.Second)
	res := cl.monitor()
	if len(res.StatusUpdates) != 1 || !res.StatusUpdates[0].NotReady {
		t.Fatalf("StatusUpdates = %+v, want one with NotReady", res.StatusUpdates)
	}
	got := map[corev1.NodeConditionType]corev1.NodeCondition{}
	for _, c := range cl.nodes["n"].Status.Conditions {
		got[c.Type] = c
	}
	now := metav1.NewTime(cl.now)
	creation := cl.nodes["n"].CreationTimestamp
	want := map[corev1.NodeConditionType]corev1.NodeCondition{
		corev1.NodeReady:              {Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: ReasonStatusUnknown, Message: MessageStatusUnknown, LastHeartbeatTime: hb, LastTransitionTime: now},
		corev1.NodeMemoryPressure:     {Type: corev1.NodeMemoryPressure, Status: corev1.ConditionUnknown, Reason: ReasonStatusUnknown, Message: MessageStatusUnknown, LastHeartbeatTime: hb, LastTransitionTime: now},
		corev1.NodeDiskPressure:       {Type: corev1.NodeDiskPressure, Status: corev1.ConditionUnknown, Reason: "Earlier", LastHeartbeatTime: hb, LastTransitionTime: old},
		corev1.NodeNetworkUnavailable: {Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: "RouteCreated", LastHeartbeatTime: hb, LastTransitionTime: old},
		corev1.NodePIDPressure:        {Type: corev1.NodePIDPressure, Status: corev1.ConditionUnknown, Reason: ReasonStatusNeverUpdated, Message: MessageStatusNeverUpdated, LastHeartbeatTime: creation, LastTransitionTime: now},
	}
	for typ, w := range want {
		g := got[typ]
		if g.Status != w.Status || g.Reason != w.Reason || g.Message != w.Message ||
			!g.LastHeartbeatTime.Equal(&w.LastHeartbeatTime) || !g.LastTransitionTime.Equal(&w.LastTransitionTime) {
			t.Errorf("%s = %+v, want %+v", typ, g, w)
		}
	}
	if len(got) != 5 {
		t.Errorf("%d conditions, want 5 (PIDPressure appended, nothing else)", len(got))
	}
	if want := []string{ReasonRegisteredNode + " n", ReasonNodeNotReady + " n"}; len(cl.events) != 2 || cl.events[1] != want[1] {
		t.Errorf("events = %v, want %v", cl.events, want)
	}
	if len(cl.podMarks) != 1 {
		t.Errorf("pods marked for %v, want once for n", cl.podMarks)
	}

	// Already Unknown: nothing more is written, nor any event.
	for i := 0; i < 5; i++ {
		cl.step(5 * time.Second)
		if res := cl.monitor(); len(res.StatusUpdates) != 0 {
			t.Fatalf("written again: %+v", res.StatusUpdates)
		}
	}
	if len(cl.events) != 2 || len(cl.podMarks) != 1 {
		t.Errorf("events %v, pod marks %v after more passes; want no more", cl.events, cl.podMarks)
	}
}

func TestNeverPostedNodeGetsNeverUpdatedConditions(t *testing.T) {
	cl := newCluster(t, DefaultConfig())
	cl.add("manual")
	// A live node elsewhere keeps the cluster out of master disruption
	// mode, which would hold back every NoExecute taint.
	cl.join("live", inZone("r", "b"))
	live := func(time.Duration) { cl.renew("live") }
	if got := firstUnknown(cl, "manual", 2*time.Minute, live); got != 65*time.Second {
		t.Fatalf("first Unknown at %v, want 65s", got)
	}
	n := cl.nodes["manual"]
	if len(n.Status.Conditions) != 4 {
		t.Fatalf("conditions = %+v, want Ready and the three pressures", n.Status.Conditions)
	}
	for _, c := range n.Status.Conditions {
		if c.Status != corev1.ConditionUnknown || c.Reason != ReasonStatusNeverUpdated || c.Message != MessageStatusNeverUpdated ||
			!c.LastHeartbeatTime.Equal(&n.CreationTimestamp) {
			t.Errorf("%s = %+v, want Unknown/NeverUpdated with the creation time as heartbeat", c.Type, c)
		}
	}
	if len(cl.statusUpdates) != 1 || cl.statusUpdates[0].NotReady {
		t.Errorf("status updates %+v: want one, without NodeNotReady (it never was Ready)", cl.statusUpdates)
	}
	// The manual node is kept and tainted unreachable like any silent node.
	cl.taint()
	if cl.noExecute("manual") != corev1.TaintNodeUnreachable {
		t.Errorf("NoExecute = %q, want unreachable", cl.noExecute("manual"))
	}
	// An agent with that name appears: it posts Ready and renews.
	cl.step(5 * time.Second)
	cl.post("manual", corev1.ConditionTrue)
	cl.renew("manual")
	cl.renew("live")
	cl.monitor()
	if cl.noExecute("manual") != "" || cl.ready("manual") != corev1.ConditionTrue {
		t.Errorf("after the agent appeared: Ready %q, NoExecute %q; want True and none", cl.ready("manual"), cl.noExecute("manual"))
	}
	for i := 0; i < 8; i++ {
		cl.step(5 * time.Second)
		cl.renew("manual")
		cl.renew("live")
		cl.monitor()
	}
	if cl.ready("manual") != corev1.ConditionTrue {
		t.Errorf("a node with a live agent went %q", cl.ready("manual"))
	}
}

func TestAgentPostingFalseGivesNoNodeNotReadyEvent(t *testing.T) {
	cl := newCluster(t, DefaultConfig())
	cl.join("n")
	cl.monitor()
	cl.step(5 * time.Second)
	cl.post("n", corev1.ConditionFalse)
	cl.renew("n")
	cl.monitor()
	for _, e := range cl.events {
		if e == ReasonNodeNotReady+" n" {
			t.Errorf("NodeNotReady emitted for an agent-posted False")
		}
	}
	if len(cl.podMarks) != 0 {
		t.Errorf("pods marked %v for an agent-posted False", cl.podMarks)
	}
	if !cl.core.PodsShouldBeNotReady("n") {
		t.Error("a pod newly bound to a NotReady node must be marked NotReady")
	}
	if cl.core.PodsShouldBeNotReady("nope") {
		t.Error("an unknown node's pods must be left alone")
	}
}

func TestPodMarkingIsRetriedWhileTheNodeIsNotReady(t *testing.T) {
	cl := newCluster(t, DefaultConfig())
	cl.join("n")
	cl.monitor()
	cl.failPods["n"] = true
	cl.now = t0.Add(55 * time.Second)
	cl.monitor()
	if len(cl.podMarks) != 0 {
		t.Fatalf("pod marks %v, want the first attempt to fail", cl.podMarks)
	}
	cl.step(5 * time.Second)
	res := cl.monitor()
	if len(res.MarkPodsNotReady) != 1 || len(cl.podMarks) != 1 {
		t.Errorf("MarkPodsNotReady = %v, pod marks %v; want one retry", res.MarkPodsNotReady, cl.podMarks)
	}
	cl.step(5 * time.Second)
	if res := cl.monitor(); len(res.MarkPodsNotReady) != 0 {
		t.Errorf("retried again after success: %v", res.MarkPodsNotReady)
	}
}

func TestFailedStatusUpdateIsRetriedAndTakesBackItsTaint(t *testing.T) {
	cl := newCluster(t, DefaultConfig())
	cl.join("n")
	cl.monitor()
	cl.failStatus["n"] = true
	cl.now = t0.Add(55 * time.Second)
	cl.monitor()
	if got := cl.taint(); len(got) != 0 {
		t.Errorf("tainted %v although the Unknown write failed", adds(got))
	}
	if cl.ready("n") != corev1.ConditionTrue {
		t.Fatalf("Ready = %q, want still True", cl.ready("n"))
	}
	cl.step(5 * time.Second)
	cl.monitor()
	if cl.ready("n") != corev1.ConditionUnknown {
		t.Errorf("Ready = %q after the next pass, want Unknown", cl.ready("n"))
	}
}

// TestNeverPostedNodeCountsFromItsCreation: a Node that never posted status
// has no heartbeat a (new) controller could have missed, so its startup
// grace period runs from its creation, as upstream's does — across a start,
// a failover (Reset) and the view turning fresh again — while a node that
// has posted gets a fresh grace period from the new leader's first sight
// (SPEC P3-3).
func TestNeverPostedNodeCountsFromItsCreation(t *testing.T) {
	tests := []struct {
		name    string
		created time.Duration // before t0
		// before runs before the first pass at t0 (a failover, a stall).
		before func(cl *cluster)
		lease  bool
		want   time.Duration // first pass with Ready Unknown
	}{
		{"a node made by hand longer ago than the startup grace period is marked on the controller's first pass",
			2 * time.Minute, nil, false, 0},
		{"one made 50 s before the controller started is marked at the first pass after its 60 s have run",
			50 * time.Second, nil, false, 15 * time.Second},
		{"one made just now gets the whole startup grace period", 0, nil, false, 65 * time.Second},
		{"after a failover an old never-posted node is marked on the new leader's first pass",
			2 * time.Minute, func(cl *cluster) {
				cl.now = t0.Add(-30 * time.Second)
				cl.monitor()
				cl.core.Reset()
				cl.now = t0
			}, false, 0},
		{"the view turning fresh again gives it no new grace period",
			2 * time.Minute, func(cl *cluster) {
				cl.now = t0.Add(-30 * time.Second)
				cl.fresh = false
				cl.monitor()
				cl.fresh = true
				cl.now = t0
			}, false, 0},
		{"a never-posted node with a lease counts from the lease, like any sign of life",
			2 * time.Minute, nil, true, 65 * time.Second},
		{"a creation time in the future (clock skew) counts as the first sight",
			-time.Hour, nil, false, 65 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := newCluster(t, DefaultConfig())
			cl.add("manual", createdAgo(tt.created))
			if tt.lease {
				cl.renew("manual")
			}
			cl.join("live", inZone("r", "b"))
			if tt.before != nil {
				tt.before(cl)
			}
			got := firstUnknown(cl, "manual", 2*time.Minute, func(time.Duration) { cl.renew("live") })
			if got != tt.want {
				t.Fatalf("first Unknown at %v, want %v", got, tt.want)
			}
			r := readyCondition(cl.nodes["manual"])
			if r.Reason != ReasonStatusNeverUpdated {
				t.Errorf("Ready reason %q, want %s", r.Reason, ReasonStatusNeverUpdated)
			}
			if cl.ready("live") != corev1.ConditionTrue {
				t.Errorf("the live node went %q", cl.ready("live"))
			}
		})
	}
}

func TestNodeThatPostedGetsAFreshGraceAfterFailover(t *testing.T) {
	cl := newCluster(t, DefaultConfig())
	// Posted once an hour ago, silent since: the old leader would have
	// marked it, but a new leader cannot know how long it has been silent
	// by its own clock, so it waits a whole grace period (SPEC P3-3).
	cl.add("old", createdAgo(time.Hour))
	cl.postAt("old", corev1.ConditionTrue, t0.Add(-time.Hour))
	cl.join("live", inZone("r", "b"))
	got := firstUnknown(cl, "old", 2*time.Minute, func(time.Duration) { cl.renew("live") })
	if got != 55*time.Second {
		t.Errorf("first Unknown at %v, want 55s (a fresh grace period from the first pass)", got)
	}
}
