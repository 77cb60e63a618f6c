package nodelifecycle

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// shellSteps runs the shell's loops on the fake clock until until (from
// t0): every 100 ms the check for due nodes and the tainting step, every
// 5 s (on the period's boundaries) a monitor pass; the nodes in alive renew
// their leases every 10 s. It returns when each node was first marked
// Unknown, and by what ("due" or "pass").
func (cl *cluster) shellSteps(until time.Duration, alive ...string) map[string]mark {
	marks := map[string]mark{}
	record := func(res PassResult, by string) {
		for _, u := range res.StatusUpdates {
			if _, ok := marks[u.Node.Name]; ok {
				cl.t.Errorf("%s marked Unknown a second time (%s at %v)", u.Node.Name, by, cl.now.Sub(t0))
				continue
			}
			marks[u.Node.Name] = mark{at: cl.now.Sub(t0), by: by}
		}
	}
	for cl.now.Before(t0.Add(until)) {
		cl.step(100 * time.Millisecond)
		since := cl.now.Sub(t0)
		if since%(10*time.Second) == 0 {
			for _, name := range alive {
				cl.renew(name)
			}
		}
		res, _ := cl.due()
		record(res, "due")
		if since%cl.core.cfg.NodeMonitorPeriod == 0 {
			record(cl.monitor(), "pass")
		}
		cl.taint()
	}
	return marks
}

type mark struct {
	at time.Duration
	by string
}

func TestANodeIsMarkedWhenItsGraceEndsNotAtTheNextPass(t *testing.T) {
	tests := []struct {
		name string
		// lastRenewal is when the silent node last renewed its lease,
		// from t0 (when it joined); its grace ends 50 s later.
		lastRenewal time.Duration
		// want is when it is marked: the first 100 ms step after its
		// grace ended (a pass only every 5 s would mark it at the first
		// pass strictly after: 55 s, 60 s, 55 s).
		want time.Duration
	}{
		{"a node whose grace ends on a pass is marked 100 ms later, not a period later", 5 * time.Second, 55*time.Second + 100*time.Millisecond},
		{"a node whose grace ends between passes is marked within 100 ms", 2300 * time.Millisecond, 52*time.Second + 400*time.Millisecond},
		{"a node silent since it joined is marked 100 ms after its grace", 0, 50*time.Second + 100*time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := healthyPair(t)
			cl.leaseSeen = true
			if tt.lastRenewal > 0 {
				cl.shellSteps(tt.lastRenewal, "live")
				cl.renew("n")
			}
			marks := cl.shellSteps(70*time.Second, "live")
			got, ok := marks["n"]
			if !ok {
				t.Fatalf("n never marked Unknown (marks %v)", marks)
			}
			if got.at != tt.want || got.by != "due" {
				t.Errorf("n marked at %v by the %s, want at %v by the check between passes", got.at, got.by, tt.want)
			}
			if _, ok := marks["live"]; ok {
				t.Errorf("live marked Unknown: %v", marks["live"])
			}
			if cl.ready("n") != corev1.ConditionUnknown {
				t.Errorf("n is %q, want Unknown", cl.ready("n"))
			}
			if got := cl.noExecute("n"); got != corev1.TaintNodeUnreachable {
				t.Errorf("n's NoExecute taint = %q, want unreachable", got)
			}
			if first := cl.taints[0]; first.Node != "n" || first.Add[0].TimeAdded.Sub(t0) != tt.want {
				t.Errorf("first taint %+v, want n's in the step that marked it", first)
			}
		})
	}
}

func TestARenewalAfterThePassKeepsANodeFromBeingMarked(t *testing.T) {
	cl := healthyPair(t)
	cl.leaseSeen = true
	// n renewed last when it joined: its grace ends at 50 s, as the
	// passes at 40 and 45 s planned. It renews again at 50 s, after the
	// pass; the check at 50.1 s must see that renewal, not the plan.
	cl.shellSteps(49*time.Second+900*time.Millisecond, "live")
	if d := cl.core.DueNodes(t0.Add(51 * time.Second)); fmt.Sprint(d) != "[n]" {
		t.Fatalf("DueNodes at 51 s = %v, want [n] planned", d)
	}
	cl.step(100 * time.Millisecond)
	cl.renew("n")
	cl.step(100 * time.Millisecond)
	res, judged := cl.due()
	if fmt.Sprint(judged) != "[n]" {
		t.Fatalf("judged %v, want [n]", judged)
	}
	if len(res.StatusUpdates) != 0 {
		t.Fatalf("n marked Unknown although it renewed before the check: %+v", res.StatusUpdates[0].Node.Status.Conditions)
	}
	if d := cl.core.DueNodes(cl.now.Add(10 * time.Second)); len(d) != 0 {
		t.Errorf("DueNodes = %v after the check, want the plan empty until the next pass", d)
	}
	if marks := cl.shellSteps(99*time.Second, "live"); len(marks) != 0 {
		t.Errorf("marked %v, want n alive until 100 s", marks)
	}
}

func TestNothingIsMarkedBetweenPassesOnAStaleView(t *testing.T) {
	cl := healthyPair(t)
	cl.shellSteps(50*time.Second, "live")
	cl.fresh = false
	cl.step(100 * time.Millisecond)
	res, judged := cl.due()
	if len(judged) != 1 || len(res.StatusUpdates) != 0 || len(res.TaintUpdates) != 0 {
		t.Fatalf("stale view: judged %v, wrote %+v and %+v, want n due and nothing written", judged, res.StatusUpdates, res.TaintUpdates)
	}
	if d := cl.core.DueNodes(cl.now); fmt.Sprint(d) != "[n]" {
		t.Fatalf("DueNodes after a check on a stale view = %v, want [n] kept", d)
	}
	// Fresh again before the next pass: judged then.
	cl.fresh = true
	cl.step(100 * time.Millisecond)
	if res, _ := cl.due(); len(res.StatusUpdates) != 1 {
		t.Fatalf("fresh again: wrote %+v, want n marked", res.StatusUpdates)
	}

	// A stale last pass holds the check back, even once the shell reports
	// fresh again: the next pass gives a fresh grace first.
	cl = healthyPair(t)
	cl.shellSteps(50*time.Second, "live")
	cl.fresh = false
	cl.step(5 * time.Second)
	cl.renew("live")
	cl.monitor() // stale, at 55 s
	cl.fresh = true
	cl.step(100 * time.Millisecond)
	if d := cl.core.DueNodes(cl.now); len(d) != 0 {
		t.Errorf("DueNodes after a stale pass = %v, want nothing planned", d)
	}
	if res, _ := cl.due(); len(res.StatusUpdates) != 0 {
		t.Errorf("marked %v after a stale pass", res.StatusUpdates[0].Node.Name)
	}
}

func TestNodesMarkedBetweenPassesTurnTheirZone(t *testing.T) {
	tests := []struct {
		name      string
		size      int // nodes in zone a
		silent    int // of them going silent together
		wantState ZoneState
		wantTaint bool // a zone-a node tainted within a second of the marks
	}{
		{"a zone losing most of its nodes between passes is partially disrupted at once and taints nothing", 4, 3, StatePartialDisruption, false},
		{"a zone losing all its nodes between passes is fully disrupted and taints its first node at once", 3, 3, StateFullDisruption, true},
		{"a zone losing one node of ten between passes stays normal and taints it at once", 10, 1, StateNormal, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := newCluster(t, DefaultConfig())
			var alive, silent []string
			for i := 0; i < tt.size; i++ {
				name := fmt.Sprintf("a%d", i)
				cl.join(name, inZone("r", "a"))
				if i < tt.silent {
					silent = append(silent, name)
				} else {
					alive = append(alive, name)
				}
			}
			cl.join("b0", inZone("r", "b"))
			alive = append(alive, "b0")
			cl.monitor()
			cl.leaseSeen = true
			// The silent nodes renew last at 2 s: their grace ends at
			// 52 s, between the passes at 50 and 55 s.
			cl.shellSteps(2*time.Second, alive...)
			for _, name := range silent {
				cl.renew(name)
			}
			marks := cl.shellSteps(52*time.Second+100*time.Millisecond, alive...)
			for _, name := range silent {
				if m, ok := marks[name]; !ok || m.by != "due" || m.at != 52*time.Second+100*time.Millisecond {
					t.Errorf("%s: mark %+v, want by the check at 52.1 s", name, m)
				}
			}
			z := cl.zone(zk("r", "a"))
			if z.State != tt.wantState {
				t.Errorf("zone a is %s right after the marks, want %s", z.State, tt.wantState)
			}
			if z.Unhealthy != tt.silent {
				t.Errorf("zone a counts %d unhealthy, want %d", z.Unhealthy, tt.silent)
			}
			cl.shellSteps(53*time.Second, alive...)
			tainted := 0
			for _, name := range silent {
				if cl.noExecute(name) != "" {
					tainted++
				}
			}
			if got := tainted > 0; got != tt.wantTaint {
				t.Errorf("%d of zone a's silent nodes tainted within 1 s of the marks, want any: %v", tainted, tt.wantTaint)
			}
			if tainted > 1 {
				t.Errorf("%d nodes tainted at once, want at most the limiter's one token", tainted)
			}
			// The next pass agrees and writes nothing again.
			if marks := cl.shellSteps(61*time.Second, alive...); len(marks) != 0 {
				t.Errorf("marked again after the check: %v", marks)
			}
			if z := cl.zone(zk("r", "a")); z.State != tt.wantState || z.Unhealthy != tt.silent {
				t.Errorf("after the next pass zone a is %s with %d unhealthy, want %s with %d", z.State, z.Unhealthy, tt.wantState, tt.silent)
			}
		})
	}
}
