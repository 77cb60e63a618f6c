package nodelifecycle

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// healthyPair is a cluster with a silent node "n" in zone a and a node
// "live" in zone b whose agent keeps renewing, so the cluster never enters
// master disruption mode.
func healthyPair(t *testing.T) *cluster {
	cl := newCluster(t, DefaultConfig())
	cl.join("n", inZone("r", "a"))
	cl.join("live", inZone("r", "b"))
	cl.monitor()
	return cl
}

// passes runs monitor passes every 5 s (tainting every 100 ms in between)
// until until, with "live" renewing.
func (cl *cluster) passes(until time.Duration) {
	for cl.now.Before(t0.Add(until)) {
		for i := 0; i < 50; i++ {
			cl.step(100 * time.Millisecond)
			cl.taint()
		}
		if _, ok := cl.nodes["live"]; ok {
			cl.renew("live")
		}
		cl.monitor()
	}
}

func TestNodeMarkedUnknownIsTaintedWithoutWaitingAPeriod(t *testing.T) {
	cl := healthyPair(t)
	cl.now = t0.Add(55 * time.Second)
	cl.renew("live")
	res := cl.monitor()
	if len(res.StatusUpdates) != 1 {
		t.Fatalf("StatusUpdates = %+v, want n marked Unknown", res.StatusUpdates)
	}
	if q := cl.zone(zk("r", "a")).Queued; fmt.Sprint(q) != "[n]" {
		t.Errorf("queued = %v, want n queued in the pass that marked it", q)
	}
	got := cl.taint()
	if len(got) != 1 || got[0].Node != "n" || got[0].Add[0].Key != corev1.TaintNodeUnreachable || !got[0].Eviction {
		t.Fatalf("Taint = %+v, want n tainted unreachable at once", got)
	}
	if ta := got[0].Add[0].TimeAdded; ta == nil || !ta.Time.Equal(cl.now) {
		t.Errorf("timeAdded = %v, want now", ta)
	}
}

func TestUnknownWritesGoLongestOverdueFirst(t *testing.T) {
	cl := newCluster(t, DefaultConfig())
	for _, name := range []string{"n1", "n2", "n3"} {
		cl.join(name, inZone("r", "a"))
	}
	cl.join("live", inZone("r", "b"))
	cl.monitor()
	// Last signs of life: n1 at t0, n3 at t0+5s, n2 at t0+10s.
	for _, name := range []string{"n3", "n2"} {
		cl.step(5 * time.Second)
		cl.renew(name)
		cl.renew("live")
		cl.monitor()
	}
	cl.now = t0.Add(61 * time.Second)
	cl.renew("live")
	res := cl.monitor()
	var order []string
	for _, u := range res.StatusUpdates {
		order = append(order, u.Node.Name)
	}
	if got := strings.Join(order, " "); got != "n1 n3 n2" {
		t.Errorf("Unknown writes in the order %q, want the longest overdue first: \"n1 n3 n2\"", got)
	}
}

func TestALaggingViewDoesNotMarkANodeTwice(t *testing.T) {
	tests := []struct {
		name string
		// lag is how long the view keeps showing the node as it was
		// before the controller's Unknown write.
		lag        time.Duration
		wantWrites int
	}{
		{"a write the view shows a pass later is written once", 5 * time.Second, 1},
		{"a write the view shows after three passes is written once", 15 * time.Second, 1},
		{"a write the view has not shown for a whole grace period is written again", 55 * time.Second, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := healthyPair(t)
			cl.now = t0.Add(55 * time.Second)
			stale := cl.observations()
			writes, notReady := 0, 0
			for start := cl.now; !cl.now.After(start.Add(tt.lag)); cl.step(5 * time.Second) {
				cl.renew("live")
				obs := cl.observations()
				for i := range obs {
					if obs[i].Node.Name == "n" {
						obs[i] = stale[i]
					}
				}
				// The shell wrote every update (nothing failed), but the
				// view still shows n as before.
				for _, u := range cl.core.Monitor(cl.now, true, obs).StatusUpdates {
					writes++
					if u.NotReady {
						notReady++
					}
				}
				if got := cl.zone(zk("r", "a")).Unhealthy; got != 1 {
					t.Fatalf("at +%v zone a has %d unhealthy nodes, want n counted unhealthy", cl.now.Sub(start), got)
				}
			}
			if writes != tt.wantWrites || notReady != tt.wantWrites {
				t.Errorf("n marked Unknown %d times (%d with NodeNotReady), want %d", writes, notReady, tt.wantWrites)
			}
		})
	}
}

func TestNoExecuteTaintsFollowReady(t *testing.T) {
	tests := []struct {
		name       string
		taints     []corev1.Taint
		ready      corev1.ConditionStatus
		wantUpdate string // "add+remove" summary of the immediate update, "" none
		wantQueued bool
	}{
		{"a Ready node loses both NoExecute taints",
			[]corev1.Taint{noExecuteTaint(corev1.TaintNodeNotReady, t0), noExecuteTaint(corev1.TaintNodeUnreachable, t0)},
			corev1.ConditionTrue, "-not-ready -unreachable", false},
		{"an unreachable node that posts False is swapped to not-ready at once",
			[]corev1.Taint{noExecuteTaint(corev1.TaintNodeUnreachable, t0)},
			corev1.ConditionFalse, "+not-ready -unreachable", false},
		{"a not-ready node without a taint is queued", nil, corev1.ConditionFalse, "", true},
		{"a not-ready node with its taint is left alone",
			[]corev1.Taint{noExecuteTaint(corev1.TaintNodeNotReady, t0)}, corev1.ConditionFalse, "", false},
		{"a node with both taints and Ready=False only loses unreachable",
			[]corev1.Taint{noExecuteTaint(corev1.TaintNodeNotReady, t0), noExecuteTaint(corev1.TaintNodeUnreachable, t0)},
			corev1.ConditionFalse, "-unreachable", false},
		{"a user's NoExecute taint is not ours to remove",
			[]corev1.Taint{{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoExecute}},
			corev1.ConditionTrue, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := newCluster(t, DefaultConfig())
			cl.join("live", inZone("r", "b"))
			cl.join("n", inZone("r", "a"), withTaints(tt.taints...))
			cl.join("m", inZone("r", "a"))
			cl.post("n", tt.ready)
			res := cl.monitor()
			var summary []string
			for _, u := range res.TaintUpdates {
				for _, a := range u.Add {
					summary = append(summary, "+"+strings.TrimPrefix(a.Key, "node.kubernetes.io/"))
				}
				for _, r := range u.Remove {
					summary = append(summary, "-"+strings.TrimPrefix(r.Key, "node.kubernetes.io/"))
				}
			}
			if got := strings.Join(summary, " "); got != tt.wantUpdate {
				t.Errorf("immediate update %q, want %q", got, tt.wantUpdate)
			}
			for _, u := range res.TaintUpdates {
				if u.Eviction {
					t.Errorf("an immediate change counted as an eviction: %+v", u)
				}
			}
			if got := cl.zone(zk("r", "a")).Queued; (len(got) == 1) != tt.wantQueued {
				t.Errorf("queued = %v, want queued %v", got, tt.wantQueued)
			}
		})
	}
}

func TestStaleViewMarksNothingAndAddsNoTaint(t *testing.T) {
	cl := healthyPair(t)
	cl.join("sick", inZone("r", "a"))
	cl.post("sick", corev1.ConditionFalse)
	cl.join("swap", inZone("r", "a"), withTaints(noExecuteTaint(corev1.TaintNodeUnreachable, t0)))
	cl.post("swap", corev1.ConditionFalse)
	cl.join("back", inZone("r", "a"), withTaints(noExecuteTaint(corev1.TaintNodeUnreachable, t0)))
	// Storage stalls: the view is stale for 60 s while every agent is
	// healthy but none of it is seen.
	cl.fresh = false
	frozen := cl.observations()
	for cl.now.Before(t0.Add(60 * time.Second)) {
		for i := 0; i < 50; i++ {
			cl.step(100 * time.Millisecond)
			if got := cl.taint(); len(got) != 0 {
				t.Fatalf("tainted %v on a stale view", adds(got))
			}
		}
		res := cl.monitorWith(frozen)
		if len(res.StatusUpdates) != 0 {
			t.Fatalf("marked %s Unknown on a stale view at +%v", res.StatusUpdates[0].Node.Name, cl.now.Sub(t0))
		}
		for _, u := range res.TaintUpdates {
			if len(u.Add) > 0 {
				t.Fatalf("added %v on a stale view", u.Add)
			}
		}
	}
	if cl.noExecute("back") != "" {
		t.Errorf("a Ready node kept its NoExecute taint on a stale view; removals are allowed")
	}
	if cl.noExecute("swap") != corev1.TaintNodeUnreachable {
		t.Errorf("swap's taint = %q, want unchanged while stale", cl.noExecute("swap"))
	}
	// The view is fresh again: everyone gets a new grace period.
	cl.fresh = true
	cl.renew("live")
	res := cl.monitor()
	if !res.FreshGrace {
		t.Error("FreshGrace = false on the first fresh pass")
	}
	if cl.noExecute("swap") != corev1.TaintNodeNotReady {
		t.Errorf("swap's taint = %q, want not-ready once fresh", cl.noExecute("swap"))
	}
	if got := cl.taint(); fmt.Sprint(adds(got)) != "[sick]" {
		t.Errorf("tainted %v once fresh, want [sick]", adds(got))
	}
	// n has been silent since t0 but its grace period restarted at +60 s.
	cl.passes(110 * time.Second)
	if cl.ready("n") != corev1.ConditionTrue {
		t.Errorf("n Ready = %q at +110s, want True (grace restarted at +60s)", cl.ready("n"))
	}
	cl.passes(115 * time.Second)
	if cl.ready("n") != corev1.ConditionUnknown {
		t.Errorf("n Ready = %q at +115s, want Unknown", cl.ready("n"))
	}
}

func TestTaintIsHeldBackWhileTheCallerSaysStale(t *testing.T) {
	cl := healthyPair(t)
	cl.join("sick", inZone("r", "a"))
	cl.post("sick", corev1.ConditionFalse)
	cl.monitor()
	if got := cl.core.Taint(cl.now, false); len(got) != 0 {
		t.Errorf("Taint(stale) = %v, want nothing", adds(got))
	}
	if got := cl.core.Taint(cl.now, true); fmt.Sprint(adds(got)) != "[sick]" {
		t.Errorf("Taint(fresh) = %v, want [sick]", adds(got))
	}
}

func TestFailoverKeepsTaintsAndPace(t *testing.T) {
	cfg := DefaultConfig()
	cl := newCluster(t, cfg)
	cl.join("live", inZone("r", "b"))
	for i := 0; i < 4; i++ {
		cl.join(fmt.Sprintf("a%d", i), inZone("r", "a"))
	}
	cl.join("a-ok", inZone("r", "a"))
	for i := 0; i < 10; i++ {
		cl.join(fmt.Sprintf("a-ok%d", i), inZone("r", "a"))
	}
	keep := []string{"live", "a-ok"}
	for i := 0; i < 10; i++ {
		keep = append(keep, fmt.Sprintf("a-ok%d", i))
	}
	// a0..a3 die at t0; the old leader marks them Unknown at +55 s and
	// taints a0 at once, a1 10 s later.
	cl.monitor()
	for cl.now.Before(t0.Add(66 * time.Second)) {
		cl.step(100 * time.Millisecond)
		if cl.now.Sub(t0)%(5*time.Second) == 0 {
			cl.keepAlive(keep)
			cl.monitor()
		}
		cl.taint()
	}
	before := adds(cl.taints)
	if fmt.Sprint(before) != "[a0 a1]" {
		t.Fatalf("old leader tainted %v, want [a0 a1]", before)
	}
	// Leadership moves at +66 s (a1 was tainted at +65 s). The new leader
	// starts from scratch.
	newCore, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cl.core = newCore
	cl.events = nil
	cl.taints = nil
	cl.keepAlive(keep)
	res := cl.monitor()
	if len(res.Registered) != len(cl.nodes) {
		t.Errorf("Registered %d nodes, want all %d", len(res.Registered), len(cl.nodes))
	}
	if len(res.TaintUpdates) != 0 {
		t.Errorf("the new leader changed taints at once: %+v", res.TaintUpdates)
	}
	if q := cl.zone(zk("r", "a")).Queued; fmt.Sprint(q) != "[a2 a3]" {
		t.Errorf("rebuilt queue = %v, want [a2 a3]", q)
	}
	var got []string
	var at []time.Duration
	for cl.now.Before(t0.Add(100 * time.Second)) {
		cl.step(100 * time.Millisecond)
		if cl.now.Sub(t0)%(5*time.Second) == 0 {
			cl.keepAlive(keep)
			cl.monitor()
		}
		for _, u := range cl.taint() {
			got = append(got, u.Node)
			at = append(at, cl.now.Sub(t0))
		}
	}
	// a2 comes 10 s after a1 (+75 s), not at the failover; a3 10 s later.
	if fmt.Sprint(got) != "[a2 a3]" || fmt.Sprint(at) != "[1m15s 1m25s]" {
		t.Errorf("new leader tainted %v at %v, want [a2 a3] at [1m15s 1m25s]", got, at)
	}
	if !cl.taintTimeAdded("a0", t0.Add(55*time.Second)) {
		t.Errorf("a0's taint was re-added: %+v", cl.nodes["a0"].Spec.Taints)
	}
}

func (cl *cluster) taintTimeAdded(name string, want time.Time) bool {
	for _, tn := range cl.nodes[name].Spec.Taints {
		if tn.Effect == corev1.TaintEffectNoExecute && tn.TimeAdded != nil {
			return tn.TimeAdded.Time.Equal(want)
		}
	}
	return false
}

func TestResetGivesEveryNodeAFreshGracePeriod(t *testing.T) {
	cl := healthyPair(t)
	cl.passes(45 * time.Second)
	cl.core.Reset()
	// The next pass, at +50 s, sees every node anew.
	cl.passes(100 * time.Second)
	if cl.ready("n") != corev1.ConditionTrue {
		t.Errorf("n Ready = %q at +100s, want True: the grace period restarted at +50s", cl.ready("n"))
	}
	cl.passes(105 * time.Second)
	if cl.ready("n") != corev1.ConditionUnknown {
		t.Errorf("n Ready = %q at +105s, want Unknown", cl.ready("n"))
	}
}

func TestFailedTaintWriteIsRetriedFirst(t *testing.T) {
	cl := healthyPair(t)
	for _, n := range []string{"s1", "s2"} {
		cl.join(n, inZone("r", "a"))
		cl.post(n, corev1.ConditionFalse)
	}
	cl.monitor()
	cl.failTaint["s1"] = true
	if got := cl.taint(); len(got) != 0 {
		t.Fatalf("applied %v, want the write to fail", adds(got))
	}
	if z := cl.zone(zk("r", "a")); fmt.Sprint(z.Queued) != "[s1 s2]" || z.Evictions != 0 {
		t.Errorf("after a failed write: queue %v, evictions %d; want [s1 s2] and 0", z.Queued, z.Evictions)
	}
	cl.step(10 * time.Second)
	if got := cl.taint(); fmt.Sprint(adds(got)) != "[s1]" {
		t.Errorf("next token went to %v, want s1", adds(got))
	}
}

func TestTaintSkippedBecauseTheNodeRecoveredIsDecidedAgain(t *testing.T) {
	cl := healthyPair(t)
	cl.join("s", inZone("r", "a"))
	cl.post("s", corev1.ConditionFalse)
	cl.monitor()
	cl.step(time.Second)
	cl.post("s", corev1.ConditionTrue) // recovered between passes
	if got := cl.taint(); len(got) != 0 {
		t.Fatalf("tainted %v, want the shell to skip a node Ready again", adds(got))
	}
	if cl.zone(zk("r", "a")).Evictions != 0 {
		t.Error("a skipped taint counted as an eviction")
	}
	cl.step(4 * time.Second)
	cl.monitor()
	if q := cl.zone(zk("r", "a")).Queued; len(q) != 0 {
		t.Errorf("queue = %v, want empty for a Ready node", q)
	}
}

func TestUnconfirmedTaintIsDecidedAgainAfterTwoPeriods(t *testing.T) {
	cl := healthyPair(t)
	cl.join("s", inZone("r", "a"))
	cl.post("s", corev1.ConditionFalse)
	cl.monitor()
	// The core hands out the taint but the write is lost without an error.
	got := cl.core.Taint(cl.now, true)
	if len(got) != 1 {
		t.Fatalf("Taint = %v, want s", adds(got))
	}
	cl.step(5 * time.Second)
	cl.monitor()
	if q := cl.zone(zk("r", "a")).Queued; len(q) != 0 {
		t.Errorf("queued %v one period after the write: it may still be on its way", q)
	}
	cl.step(6 * time.Second)
	cl.monitor()
	if q := cl.zone(zk("r", "a")).Queued; fmt.Sprint(q) != "[s]" {
		t.Errorf("queue = %v more than two periods after a lost write, want [s]", q)
	}
}

func TestNodeMovingZoneLeavesTheOldQueue(t *testing.T) {
	cl := healthyPair(t)
	cl.join("s", inZone("r", "a"))
	cl.join("a-ok", inZone("r", "a"))
	cl.post("s", corev1.ConditionFalse)
	cl.core.zones[zk("r", "a")].bucket.setRate(0, cl.now) // hold the queue
	cl.monitor()
	if q := cl.zone(zk("r", "a")).Queued; fmt.Sprint(q) != "[s]" {
		t.Fatalf("queue = %v, want [s]", q)
	}
	n := cl.nodes["s"].DeepCopy()
	n.Labels[corev1.LabelTopologyZone] = "c"
	cl.nodes["s"] = n
	cl.step(5 * time.Second)
	cl.keepAlive([]string{"live", "a-ok"})
	cl.monitor()
	if q := cl.zone(zk("r", "a")).Queued; len(q) != 0 {
		t.Errorf("old zone queue = %v, want empty", q)
	}
	if got := cl.taint(); fmt.Sprint(adds(got)) != "[s]" || got[0].Zone != zk("r", "c") {
		t.Errorf("Taint = %+v, want s tainted through zone c", got)
	}
}

func TestViewShowsZonesAndNodes(t *testing.T) {
	cl := healthyPair(t)
	cl.join("s", inZone("r", "a"))
	cl.join("t", inZone("r", "a"))
	cl.post("s", corev1.ConditionFalse)
	cl.post("t", corev1.ConditionFalse)
	cl.monitor()
	cl.taint()
	cl.step(7 * time.Second)
	v := cl.core.View(cl.now)
	if !v.Fresh || v.AllZonesDisrupted || len(v.Zones) != 2 {
		t.Fatalf("view = %+v", v)
	}
	a := v.Zones[0]
	if a.Name != "r/a" || a.State != StateNormal || a.Size != 3 || a.Unhealthy != 2 || a.TaintRate != 0.1 ||
		fmt.Sprint(a.Queued) != "[t]" || a.Evictions != 1 || len(a.Nodes) != 3 {
		t.Errorf("zone a = %+v", a)
	}
	var s NodeView
	for _, n := range a.Nodes {
		if n.Name == "s" {
			s = n
		}
	}
	if s.Ready != corev1.ConditionFalse || s.NoExecute != corev1.TaintNodeNotReady || s.Queued || s.SinceHeartbeatSeconds != 7 {
		t.Errorf("node s = %+v", s)
	}
	if _, err := json.Marshal(v); err != nil {
		t.Errorf("view does not encode: %v", err)
	}
}

// TestZoneTaintPacing follows NoExecute taints through the shell's real
// interleaving: passes every 5 s, a tainting step every 100 ms, and one
// tainting step running while each pass's Unknown writes are still on their
// way (the cache does not show them yet, so the shell skips that taint).
// Upstream's limiter holds one token while unused, so a zone's first taint
// comes at once and the next 1/rate (10 s) apart; a skipped taint must not
// use the token up.
func TestZoneTaintPacing(t *testing.T) {
	tests := []struct {
		name string
		// zone a: silent nodes stop at t0, live ones keep beating; zone b
		// is always live.
		silent, live []string
		// recover lists silent nodes whose agents come back at 70 s.
		recover []string
		// want: the time each taint lands, from t0 (nodes go Unknown at
		// the 55 s pass: last beat at 0, grace 50 s).
		want []time.Duration
	}{
		{"in a zone of 3 where 2 go silent together the first is tainted on the pass that marks it and the second 10 s later",
			[]string{"s1", "s2"}, []string{"l1"}, nil,
			[]time.Duration{55 * time.Second, 65 * time.Second}},
		{"a whole zone going down while another stays healthy is tainted at once, then every 10 s",
			[]string{"s1", "s2", "s3"}, nil, nil,
			[]time.Duration{55 * time.Second, 65 * time.Second, 75 * time.Second}},
		{"leaving rate 0 starts empty: a small zone back from partial disruption waits one interval",
			[]string{"s1", "s2", "s3", "s4"}, []string{"l1", "l2"}, []string{"s1", "s2"},
			[]time.Duration{80 * time.Second, 90 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := newCluster(t, DefaultConfig())
			var beating []string
			for _, n := range tt.silent {
				cl.join(n, inZone("r", "a"))
			}
			for _, n := range tt.live {
				cl.join(n, inZone("r", "a"))
				beating = append(beating, n)
			}
			cl.join("b1", inZone("r", "b"))
			beating = append(beating, "b1")
			var got []time.Duration
			taint := func() {
				for _, u := range cl.taint() {
					if u.Zone == zk("r", "a") {
						got = append(got, cl.now.Sub(t0))
					}
				}
			}
			cl.duringWrites = taint
			for step := 0; step <= 1200; step++ { // 120 s in 100 ms steps
				if cl.now.Equal(t0.Add(70 * time.Second)) {
					for _, n := range tt.recover {
						cl.post(n, corev1.ConditionTrue)
						beating = append(beating, n)
					}
				}
				if step%50 == 0 {
					for _, n := range beating {
						cl.renew(n)
					}
					cl.monitor()
				}
				taint()
				cl.step(100 * time.Millisecond)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("zone a tainted at %v, want %v", got, tt.want)
			}
		})
	}
}
