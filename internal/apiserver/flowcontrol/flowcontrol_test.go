package flowcontrol

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

var (
	nodeGroups   = []string{"system:nodes", "system:authenticated"}
	masterGroups = []string{"system:masters", "system:authenticated"}
	plainGroups  = []string{"system:authenticated"}
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		req  Request
		want Level
	}{
		{"the controllers' leader election lease is exempt",
			Request{"system:kube-controller-manager", nil, "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager"}, Exempt},
		{"the scheduler's leader election lease is exempt",
			Request{"system:kube-scheduler", nil, "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler"}, Exempt},
		{"other controller requests are system",
			Request{"system:kube-controller-manager", nil, "/api/v1/nodes/n1/status"}, System},
		{"a controller's lease in another namespace is system",
			Request{"system:kube-controller-manager", nil, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"}, System},
		{"a node renewing its lease is a heartbeat",
			Request{"system:node:n1", nodeGroups, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"}, NodeHeartbeat},
		{"a node creating its lease is a heartbeat",
			Request{"system:node:n1", nodeGroups, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"}, NodeHeartbeat},
		{"a node patching its status is a heartbeat",
			Request{"system:node:n1", nodeGroups, "/api/v1/nodes/n1/status"}, NodeHeartbeat},
		{"a node reading its Node is node",
			Request{"system:node:n1", nodeGroups, "/api/v1/nodes/n1"}, Node},
		{"a node writing a pod status is node",
			Request{"system:node:n1", nodeGroups, "/api/v1/namespaces/default/pods/p/status"}, Node},
		{"a node writing a lease in kube-system is node",
			Request{"system:node:n1", nodeGroups, "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x"}, Node},
		{"a namespace merely starting with kube-node-lease is not a heartbeat",
			Request{"system:node:n1", nodeGroups, "/apis/coordination.k8s.io/v1/namespaces/kube-node-leasex/leases/n1"}, Node},
		{"the nodes group without a node user name is workload",
			Request{"mallory", nodeGroups, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"}, Workload},
		{"a node user name without the nodes group is workload",
			Request{"system:node:n1", plainGroups, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"}, Workload},
		{"an administrator is admin",
			Request{"kubernetes-admin", masterGroups, "/api/v1/namespaces/default/configmaps"}, Admin},
		{"an administrator writing a node lease is still admin",
			Request{"kubernetes-admin", masterGroups, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"}, Admin},
		{"anyone else is workload",
			Request{"alice", plainGroups, "/api/v1/namespaces/default/pods"}, Workload},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.req); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestIsLongRunning(t *testing.T) {
	tests := []struct {
		name                   string
		method, path, rawQuery string
		want                   bool
	}{
		{"a watch parameter", "GET", "/api/v1/pods", "watch=true", true},
		{"a watch=1 parameter after others", "GET", "/api/v1/pods", "labelSelector=a&watch=1", true},
		{"a watch=false parameter", "GET", "/api/v1/pods", "watch=false", false},
		{"a watch=FALSE parameter, as the handler reads booleans", "GET", "/api/v1/pods", "watch=FALSE", false},
		{"a watch=0 parameter", "GET", "/api/v1/pods", "watch=0", false},
		{"a watch=yes parameter, which the handler serves as a watch", "GET", "/api/v1/pods", "watch=yes", true},
		{"a watch path", "GET", "/api/v1/watch/pods", "", true},
		{"a pod log", "GET", "/api/v1/namespaces/d/pods/p/log", "follow=true", true},
		{"a list", "GET", "/api/v1/pods", "limit=500", false},
		{"a parameter merely containing watch", "GET", "/api/v1/pods", "labelSelector=watch%3Dtrue", false},
		{"a write with a watch parameter", "POST", "/api/v1/pods", "watch=true", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsLongRunning(tt.method, tt.path, tt.rawQuery); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIsHeartbeat(t *testing.T) {
	tests := []struct {
		name string
		path string
		want bool
	}{
		{"a node's Lease", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", true},
		{"a Node's status", "/api/v1/nodes/n1/status", true},
		{"the list of every node's Lease", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", false},
		{"the list with a trailing slash", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/", false},
		{"a path below a Lease", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1/x", false},
		{"a Lease in another namespace", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/n1", false},
		{"a namespace that only starts like kube-node-lease", "/apis/coordination.k8s.io/v1/namespaces/kube-node-leasex/leases/n1", false},
		{"a Node", "/api/v1/nodes/n1", false},
		{"the list of Nodes", "/api/v1/nodes", false},
		{"a pod", "/api/v1/namespaces/default/pods/p", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsHeartbeat(tt.path); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDefaultSplit(t *testing.T) {
	c := mustNew(t, Config{Seats: 600})
	want := map[Level][2]int{ // seats, seats per identity
		Exempt: {0, 0}, System: {120, 120}, NodeHeartbeat: {120, 6}, Node: {120, 12}, Admin: {180, 180}, Workload: {60, 15},
	}
	for lv, w := range want {
		st := c.Stats(lv)
		if st.Seats != w[0] || st.FlowSeats != w[1] {
			t.Errorf("%s: got %d seats, %d per identity; want %d, %d", lv, st.Seats, st.FlowSeats, w[0], w[1])
		}
		wantQueue := 0
		if lv == System {
			wantQueue = 480
		}
		if st.QueueSeats != wantQueue {
			t.Errorf("%s: queue of %d, want %d", lv, st.QueueSeats, wantQueue)
		}
	}
}

func TestAdmit(t *testing.T) {
	// 100 seats: heartbeat 20 (one node at most 1), node 20 (2), admin 30.
	tests := []struct {
		name string
		// held are the seats taken (and kept) before the request.
		held []struct {
			lv   Level
			flow string
		}
		lv         Level
		flow       string
		wantReason Reason
	}{
		{name: "an idle level admits", lv: NodeHeartbeat, flow: "n1", wantReason: Admitted},
		{name: "a node past its share is refused",
			held: []struct {
				lv   Level
				flow string
			}{{NodeHeartbeat, "n1"}},
			lv: NodeHeartbeat, flow: "n1", wantReason: FlowFull},
		{name: "another node is admitted beside a node at its share",
			held: []struct {
				lv   Level
				flow string
			}{{NodeHeartbeat, "n1"}},
			lv: NodeHeartbeat, flow: "n2", wantReason: Admitted},
		{name: "a node at its share in one level is admitted in another",
			held: []struct {
				lv   Level
				flow string
			}{{NodeHeartbeat, "n1"}},
			lv: Node, flow: "n1", wantReason: Admitted},
		{name: "a full level refuses a new identity", held: heldBy(NodeHeartbeat, 20), lv: NodeHeartbeat, flow: "late", wantReason: LevelFull},
		{name: "a full heartbeat level does not touch the admin level", held: heldBy(NodeHeartbeat, 20), lv: Admin, flow: "admin", wantReason: Admitted},
		{name: "one administrator may use the whole admin level", held: heldByOne(Admin, "admin", 29), lv: Admin, flow: "admin", wantReason: Admitted},
		{name: "but not more", held: heldByOne(Admin, "admin", 30), lv: Admin, flow: "admin", wantReason: LevelFull},
		{name: "the exempt level has no limit", held: heldByOne(Exempt, "kcm", 10000), lv: Exempt, flow: "kcm", wantReason: Admitted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustNew(t, Config{Seats: 100})
			for i, h := range tt.held {
				// Distinct nodes may share both counters of the sketch
				// (a random seed per Controller, so now and then): such a
				// node is refused as if it were the first. The held seats
				// stand for distinct identities; another name stands in.
				flow, r := h.flow, c.tryHold(h.lv, h.flow)
				for j := 0; r == FlowFull && h.flow != tt.held[0].flow && j < 100; j++ {
					flow = fmt.Sprintf("%s-%d", h.flow, j)
					r = c.tryHold(h.lv, flow)
				}
				if r != Admitted {
					t.Fatalf("setup seat %d (%s %s): %s", i, h.lv, flow, r)
				}
			}
			flow := tt.flow
			if tt.wantReason != FlowFull {
				flow = c.unfilledFlow(tt.lv, flow)
			}
			seat, r := c.Admit(tt.lv, flow)
			if r != tt.wantReason {
				t.Fatalf("got %s, want %s", r, tt.wantReason)
			}
			st := c.Stats(tt.lv)
			if r != Admitted {
				if st.Rejected[r] != 1 {
					t.Errorf("rejected[%s] = %d, want 1", r, st.Rejected[r])
				}
				return
			}
			before := st.Executing
			seat.Release()
			if got := c.Stats(tt.lv).Executing; got != before-1 {
				t.Errorf("executing after release %d, want %d", got, before-1)
			}
		})
	}
}

// unfilledFlow returns flow, or a name standing in for it when the held
// seats of other identities fill both of flow's counters (which the test
// does not mean to check).
func (c *Controller) unfilledFlow(lv Level, flow string) string {
	l := &c.levels[lv]
	if l.flows == nil {
		return flow
	}
	name := flow
	for j := 0; j < 100; j++ {
		b := c.buckets(name)
		if min(l.flows[b[0]].Load(), l.flows[b[1]].Load()) < l.flowCap {
			return name
		}
		name = fmt.Sprintf("%s-%d", flow, j)
	}
	return flow
}

// tryHold takes a seat for a test's setup without counting a refusal.
func (c *Controller) tryHold(lv Level, flow string) Reason {
	_, r := c.tryAdmit(lv, flow, 1)
	return r
}

func heldBy(lv Level, n int) []struct {
	lv   Level
	flow string
} {
	out := make([]struct {
		lv   Level
		flow string
	}, n)
	for i := range out {
		out[i].lv, out[i].flow = lv, fmt.Sprintf("node-%d", i)
	}
	return out
}

func heldByOne(lv Level, flow string, n int) []struct {
	lv   Level
	flow string
} {
	out := heldBy(lv, n)
	for i := range out {
		out[i].flow = flow
	}
	return out
}

func TestReleaseGivesTheSeatBack(t *testing.T) {
	c := mustNew(t, Config{Seats: 100})
	seat, r := c.Admit(NodeHeartbeat, "n1")
	if r != Admitted {
		t.Fatal(r)
	}
	if _, r := c.Admit(NodeHeartbeat, "n1"); r != FlowFull {
		t.Fatalf("second seat: got %s, want %s", r, FlowFull)
	}
	seat.Release()
	if _, r := c.Admit(NodeHeartbeat, "n1"); r != Admitted {
		t.Fatalf("after release: got %s, want admitted", r)
	}
	Seat{}.Release() // the zero seat is a no-op
}

func TestNoSeatsMeansNoLimit(t *testing.T) {
	c := mustNew(t, Config{Seats: 0})
	for i := range 10000 {
		if _, r := c.Admit(NodeHeartbeat, "n1"); r != Admitted {
			t.Fatalf("request %d: %s", i, r)
		}
	}
}

// An identity that shares one of its two counters with a greedy identity
// is still admitted: only both counters full refuses it.
func TestSharedCounterDoesNotRefuseAnInnocentIdentity(t *testing.T) {
	c := mustNew(t, Config{Seats: 1000}) // heartbeat: 200 seats, 10 per node
	b := func(flow string) (uint16, uint16) {
		b := c.buckets(flow)
		return b[0], b[1]
	}
	a0, a1 := b("attacker")
	innocent := ""
	for i := 0; innocent == "" && i < 1_000_000; i++ {
		name := fmt.Sprintf("node-%d", i)
		n0, n1 := b(name)
		if (n0 == a0 || n0 == a1 || n1 == a0 || n1 == a1) && !(n0 == a0 && n1 == a1) && !(n0 == a1 && n1 == a0) {
			innocent = name
		}
	}
	if innocent == "" {
		t.Fatal("no identity sharing exactly one counter found")
	}
	for {
		if _, r := c.Admit(NodeHeartbeat, "attacker"); r != Admitted {
			break
		}
	}
	if _, r := c.Admit(NodeHeartbeat, innocent); r != Admitted {
		t.Errorf("%s, sharing one counter with the attacker: got %s, want admitted", innocent, r)
	}
}

func TestConcurrentAdmitNeverExceedsTheLimits(t *testing.T) {
	c := mustNew(t, Config{Seats: 50}) // heartbeat: 10 seats, 1 per node
	var wg sync.WaitGroup
	var executing, peak atomic.Int32
	perFlow := make([]atomic.Int32, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			flow := fmt.Sprintf("node-%d", g)
			for range 2000 {
				seat, r := c.Admit(NodeHeartbeat, flow)
				if r != Admitted {
					continue
				}
				n := executing.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				if f := perFlow[g].Add(1); f > 1 {
					t.Errorf("%s holds %d seats, share is 1", flow, f)
				}
				perFlow[g].Add(-1)
				executing.Add(-1)
				seat.Release()
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > 10 {
		t.Errorf("peak %d executing, limit 10", p)
	}
	if st := c.Stats(NodeHeartbeat); st.Executing != 0 {
		t.Errorf("executing %d after every release, want 0", st.Executing)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	bad := DefaultShares()
	bad[Node].PerFlow = 2
	queuedFlows := DefaultShares()
	queuedFlows[Node].Queue = 1 // its identities are capped
	negativeQueue := DefaultShares()
	negativeQueue[System].Queue = -1
	for _, cfg := range []Config{{Seats: -1}, {Seats: 10, Shares: &bad}, {Seats: 10, Shares: &queuedFlows}, {Seats: 10, Shares: &negativeQueue}, {Seats: 10, QueueWait: -time.Second}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v): no error", cfg)
		}
	}
}

// waitAsync starts c.Wait on a goroutine and returns where its outcome
// arrives.
func waitAsync(ctx context.Context, c *Controller, lv Level, width int) <-chan Seat {
	out := make(chan Seat, 1)
	go func() {
		seat, r := c.Wait(ctx, lv, "system:kube-controller-manager", width)
		if r != Admitted {
			seat = Seat{}
		}
		out <- seat
	}()
	return out
}

func TestWaitQueuesForASeatFirstComeFirstServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := mustNew(t, Config{Seats: 10}) // system: 2 seats, 8 may wait
		ctx := t.Context()
		a, _ := c.Wait(ctx, System, "cm", 1)
		b, r := c.Wait(ctx, System, "cm", 1)
		if r != Admitted {
			t.Fatalf("second seat of two: %s", r)
		}
		first := waitAsync(ctx, c, System, 1)
		synctest.Wait()
		second := waitAsync(ctx, c, System, 1)
		synctest.Wait()
		if st := c.Stats(System); st.Waiting != 2 || st.Executing != 2 {
			t.Fatalf("two waiting behind two seats: got %d waiting, %d executing", st.Waiting, st.Executing)
		}
		// The released seat goes to the first waiter, not the second.
		a.Release()
		synctest.Wait()
		select {
		case s := <-first:
			if s.l == nil {
				t.Fatal("first waiter refused")
			}
			defer s.Release()
		default:
			t.Fatal("the released seat did not go to the first waiter")
		}
		select {
		case <-second:
			t.Fatal("the second waiter got a seat while only one was freed")
		default:
		}
		b.Release()
		synctest.Wait()
		if s := <-second; s.l == nil {
			t.Fatal("second waiter refused")
		} else {
			s.Release()
		}
		if st := c.Stats(System); st.Waiting != 0 || st.Rejected != [numReasons]uint64{} {
			t.Errorf("after both were served: %d waiting, rejected %v", st.Waiting, st.Rejected)
		}
	})
}

func TestWaitRefuses(t *testing.T) {
	tests := []struct {
		name string
		// wait runs one Wait against a full system level (2 seats, queue
		// of 8 with 8 waiting when full is set) and returns its reason.
		full bool
		wait func(t *testing.T, c *Controller) Reason
		want Reason
	}{
		{name: "a request past the queue's length at once", full: true, want: QueueFull,
			wait: func(t *testing.T, c *Controller) Reason {
				_, r := c.Wait(t.Context(), System, "cm", 1)
				return r
			}},
		{name: "a request that waited the longest a queue lets it", want: TimedOut,
			wait: func(t *testing.T, c *Controller) Reason {
				start := time.Now()
				_, r := c.Wait(t.Context(), System, "cm", 1)
				if waited := time.Since(start); waited != time.Minute {
					t.Errorf("waited %v, want the queue wait of 1m", waited)
				}
				return r
			}},
		{name: "a request whose client went away while it waited", want: Cancelled,
			wait: func(t *testing.T, c *Controller) Reason {
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				_, r := c.Wait(ctx, System, "cm", 1)
				return r
			}},
		{name: "a level without a queue at once, as AdmitWidth", want: LevelFull,
			wait: func(t *testing.T, c *Controller) Reason {
				for range 2 {
					c.Admit(Admin, "admin")
				}
				for range 10 { // 3 admin seats
					if _, r := c.Wait(t.Context(), Admin, "admin", 1); r != Admitted {
						return r
					}
				}
				return Admitted
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := mustNew(t, Config{Seats: 10, QueueWait: time.Minute})
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				for range 2 {
					c.Admit(System, "cm")
				}
				if tt.full {
					for range 8 {
						waitAsync(ctx, c, System, 1)
					}
					synctest.Wait()
				}
				if got := tt.wait(t, c); got != tt.want {
					t.Fatalf("got %s, want %s", got, tt.want)
				}
				lv := System
				if tt.want == LevelFull {
					lv = Admin
				}
				if got := c.Stats(lv).Rejected[tt.want]; got != 1 {
					t.Errorf("rejected[%s] = %d, want 1", tt.want, got)
				}
				if got, want := c.Stats(System).Waiting, map[bool]int{true: 8, false: 0}[tt.full]; got != want {
					t.Errorf("%d waiting after it, want %d (a refused waiter leaves the queue)", got, want)
				}
				cancel()
				synctest.Wait()
			})
		})
	}
}

// A wide request at the head of the queue waits until its whole width is
// free; a seat freed as a waiter gives up goes on to the next one.
func TestWaitHandsSeatsOnInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := mustNew(t, Config{Seats: 50}) // system: 10 seats
		ctx := t.Context()
		held := make([]Seat, 10)
		for i := range held {
			held[i], _ = c.Wait(ctx, System, "cm", 1)
		}
		wide := waitAsync(ctx, c, System, MaxWidth)
		synctest.Wait()
		narrow := waitAsync(ctx, c, System, 1)
		synctest.Wait()
		for i := range 9 {
			held[i].Release()
		}
		synctest.Wait()
		select {
		case <-wide:
			t.Fatal("a list of 10 seats admitted with 9 free")
		case <-narrow:
			t.Fatal("a one-seat request overtook the list at the head of the queue")
		default:
		}
		held[9].Release()
		synctest.Wait()
		w := <-wide
		if w.l == nil || c.Stats(System).Executing != MaxWidth {
			t.Fatalf("list not admitted with all 10 seats free: executing %d", c.Stats(System).Executing)
		}
		w.Release()
		synctest.Wait()
		if n := <-narrow; n.l == nil {
			t.Fatal("the one-seat request was refused")
		}
	})
}

func TestConcurrentWaitNeverExceedsTheSeatsAndServesEveryone(t *testing.T) {
	c := mustNew(t, Config{Seats: 50}) // system: 10 seats, 40 may wait
	var wg sync.WaitGroup
	var executing, peak, refused atomic.Int32
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				seat, r := c.Wait(t.Context(), System, "cm", 1)
				if r != Admitted {
					refused.Add(1)
					continue
				}
				n := executing.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				executing.Add(-1)
				seat.Release()
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > 10 {
		t.Errorf("peak %d executing, limit 10", p)
	}
	if n := refused.Load(); n != 0 {
		t.Errorf("%d requests refused; 40 clients fit in 10 seats and a queue of 40", n)
	}
	if st := c.Stats(System); st.Executing != 0 || st.Waiting != 0 {
		t.Errorf("after every release: %d executing, %d waiting", st.Executing, st.Waiting)
	}
}

func mustNew(t testing.TB, cfg Config) *Controller {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// BenchmarkAdmit is the per-request cost of a lease renewal: classify,
// admit, release.
func BenchmarkAdmit(b *testing.B) {
	c := mustNew(b, Config{Seats: 600})
	req := Request{User: "system:node:sim-0042", Groups: nodeGroups, Path: "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/sim-0042"}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			seat, r := c.Admit(Classify(req), req.User)
			if r != Admitted {
				b.Fatal(r)
			}
			seat.Release()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		var id atomic.Int32
		b.RunParallel(func(pb *testing.PB) {
			n := id.Add(1)
			r := req
			r.User = fmt.Sprintf("system:node:sim-%04d", n)
			r.Path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/" + r.User
			for pb.Next() {
				seat, reason := c.Admit(Classify(r), r.User)
				if reason != Admitted {
					b.Error(reason)
					return
				}
				seat.Release()
			}
		})
	})
}

func TestWidth(t *testing.T) {
	tests := []struct {
		name                   string
		method, path, rawQuery string
		want                   int
	}{
		{"a lease renewal takes one seat", "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", "", 1},
		{"a GET of one Node takes one seat", "GET", "/api/v1/nodes/n1", "", 1},
		{"a GET of a Node's status takes one seat", "GET", "/api/v1/nodes/n1/status", "", 1},
		{"a GET of one namespace takes one seat", "GET", "/api/v1/namespaces/default", "", 1},
		{"a GET of a namespace's status takes one seat", "GET", "/api/v1/namespaces/default/status", "", 1},
		{"a GET of one pod takes one seat", "GET", "/api/v1/namespaces/default/pods/p", "", 1},
		{"discovery takes one seat", "GET", "/apis/apps/v1", "", 1},
		{"a non-resource path takes one seat", "GET", "/metrics", "", 1},
		{"a full LIST of Nodes takes the most", "GET", "/api/v1/nodes", "", MaxWidth},
		{"a full LIST with a trailing slash takes the most", "GET", "/api/v1/nodes/", "", MaxWidth},
		{"a full LIST of namespaces takes the most", "GET", "/api/v1/namespaces", "", MaxWidth},
		{"a LIST of pods in a namespace takes the most", "GET", "/api/v1/namespaces/default/pods", "fieldSelector=spec.nodeName%3Dn1", MaxWidth},
		{"a LIST of a group's resource takes the most", "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", "", MaxWidth},
		{"a page of 500 takes five seats", "GET", "/api/v1/nodes", "limit=500", 5},
		{"a page of 1 takes one seat", "GET", "/api/v1/nodes", "limit=1", 1},
		{"a page of 101 takes two seats", "GET", "/api/v1/nodes", "limit=101", 2},
		{"a page of 5000 takes the most", "GET", "/api/v1/nodes", "limit=5000", MaxWidth},
		{"limit=0 is unpaginated", "GET", "/api/v1/nodes", "limit=0", MaxWidth},
		{"a garbage limit is unpaginated", "GET", "/api/v1/nodes", "limit=x", MaxWidth},
		{"a limit on a watch-cache LIST is ignored by the handler", "GET", "/api/v1/nodes", "limit=500&resourceVersion=0", MaxWidth},
		{"a continued page is paginated", "GET", "/api/v1/nodes", "limit=500&resourceVersion=0&continue=abc", 5},
		{"an exact-version page is paginated", "GET", "/api/v1/nodes", "limit=200&resourceVersion=7&resourceVersionMatch=Exact", 2},
		{"a DELETE of a collection takes one seat", "DELETE", "/api/v1/namespaces/default/pods", "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Width(tt.method, tt.path, tt.rawQuery); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

func TestAdmitWidth(t *testing.T) {
	// 100 seats: admin 30 (no per-identity cap), workload 10 (3 per user).
	c := mustNew(t, Config{Seats: 100})
	var lists []Seat
	for i := range 3 {
		s, r := c.AdmitWidth(Admin, "admin", MaxWidth)
		if r != Admitted {
			t.Fatalf("list %d: got %s, want admitted", i, r)
		}
		lists = append(lists, s)
	}
	if _, r := c.AdmitWidth(Admin, "admin", MaxWidth); r != LevelFull {
		t.Fatalf("fourth list of 10 seats in 30: got %s, want %s", r, LevelFull)
	}
	if _, r := c.Admit(Admin, "admin"); r != LevelFull {
		t.Fatalf("a one-seat request beside three full lists: got %s, want %s", r, LevelFull)
	}
	lists[0].Release()
	if got := c.Stats(Admin).Executing; got != 20 {
		t.Fatalf("executing after releasing one list: got %d, want 20", got)
	}
	for i := range 10 {
		if _, r := c.Admit(Admin, "admin"); r != Admitted {
			t.Fatalf("one-seat request %d in the freed list's seats: got %s", i, r)
		}
	}

	// A user's share is 3 seats: its LIST is cut to 3 and runs alone;
	// a second request of the same user waits for it.
	list, r := c.AdmitWidth(Workload, "alice", MaxWidth)
	if r != Admitted {
		t.Fatalf("alice's list: got %s, want admitted (cut to her share)", r)
	}
	if _, r := c.Admit(Workload, "alice"); r != FlowFull {
		t.Fatalf("alice beside her list: got %s, want %s", r, FlowFull)
	}
	if _, r := c.Admit(Workload, "bob"); r != Admitted {
		t.Fatalf("bob beside alice's list: got %s, want admitted", r)
	}
	list.Release()
	if got := c.Stats(Workload).Executing; got != 1 {
		t.Fatalf("workload executing after alice's list: got %d, want 1 (bob's)", got)
	}
	if _, r := c.Admit(Workload, "alice"); r != Admitted {
		t.Fatalf("alice after her list: got %s, want admitted", r)
	}
}
