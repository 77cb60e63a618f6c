package flowcontrol

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Share is how a level's seats are sized.
type Share struct {
	// Seats is the level's fraction of the server's total seats (0–1);
	// every limited level gets at least one seat. Ignored for Exempt.
	Seats float64
	// PerFlow is the fraction of the level's seats one identity may hold
	// at once (0–1, at least one seat); 1 turns per-identity accounting
	// off for the level.
	PerFlow float64
	// Queue is how many requests may wait for a seat of the level, as a
	// multiple of its seats (rounded up); 0 refuses a request at once when
	// the level is full. Only a level whose identities are not capped
	// (PerFlow 1) may queue: its waiters are served first come, first
	// served.
	Queue float64
}

// DefaultShares split the total seats (--max-requests-inflight +
// --max-mutating-requests-inflight, 600 by default) as:
//
//	level           seats   one identity at most   at 600 seats
//	exempt          no limit                         —
//	system          20 %    all of the level          120, 480 more may wait
//	node-heartbeat  20 %    5 % of the level          120, 6 per node
//	node            20 %    10 % of the level         120, 12 per node
//	admin           30 %    all of the level          180
//	workload        10 %    25 % of the level          60, 15 per user
//
// Only the system level queues: the server's own controllers write in
// bursts (a zone going dark is thousands of Node writes, taints and
// events at once), and a 429 would send each refused write to sleep a
// whole second (client-go's Retry-After) while a seat frees in
// milliseconds. Every other level is refused at once: a node or a user
// past its share retries, and a queue would only turn overload into
// time-outs.
//
// A node renews its Lease and patches its status one request at a time,
// so 6 heartbeat seats is several times what an honest node needs; 120
// seats at a few milliseconds per renewal is tens of thousands of
// renewals per second. Administrators and the controllers each share one
// identity, so per-identity shares would only cap them against themselves.
func DefaultShares() [NumLevels]Share {
	return [NumLevels]Share{
		Exempt:        {},
		System:        {Seats: 0.20, PerFlow: 1, Queue: 4},
		NodeHeartbeat: {Seats: 0.20, PerFlow: 0.05},
		Node:          {Seats: 0.20, PerFlow: 0.10},
		Admin:         {Seats: 0.30, PerFlow: 1},
		Workload:      {Seats: 0.10, PerFlow: 0.25},
	}
}

// Config configures a Controller.
type Config struct {
	// Seats is the server's total budget of requests executing at once,
	// Exempt not counted. 0 means no limit at all (no level is limited
	// and no identity is capped).
	Seats int
	// Shares sizes each level; the zero value means DefaultShares().
	Shares *[NumLevels]Share
	// QueueWait is the longest a request waits in a level's queue before
	// it is refused (TimedOut); 0 means DefaultQueueWait.
	QueueWait time.Duration
}

// DefaultQueueWait is how long a queued request waits for a seat at most:
// a quarter of kube-apiserver's default --request-timeout, as its queues.
const DefaultQueueWait = 15 * time.Second

// Reason says why Admit refused a request.
type Reason uint8

// Admission outcomes.
const (
	// Admitted: the request holds a seat until Seat.Release.
	Admitted Reason = iota
	// LevelFull: every seat of the level is taken.
	LevelFull
	// FlowFull: this identity already holds its share of the level.
	FlowFull
	// QueueFull: the level is full and so is its queue.
	QueueFull
	// TimedOut: the request waited QueueWait in the queue without a seat.
	TimedOut
	// Cancelled: the request's context ended while it waited.
	Cancelled

	numReasons = int(Cancelled) + 1
)

// Reasons are the ways a request is refused, in the order of their index
// in LevelStats.Rejected.
var Reasons = [...]Reason{LevelFull, FlowFull, QueueFull, TimedOut, Cancelled}

// String returns the reason label of apiserver_flowcontrol_rejected_requests_total,
// upstream's names: "concurrency-limit" (LevelFull: a level without a
// queue is full), "queue-full" (FlowFull, upstream's name for a flow that
// used its share, and QueueFull), "time-out" (TimedOut) and "cancelled".
func (r Reason) String() string {
	switch r {
	case Admitted:
		return "admitted"
	case LevelFull:
		return "concurrency-limit"
	case FlowFull, QueueFull:
		return "queue-full"
	case TimedOut:
		return "time-out"
	case Cancelled:
		return "cancelled"
	}
	return "unknown"
}

// flowBuckets is the width of each level's count-min sketch.
const flowBuckets = 1024

// Controller admits requests into seats. It is safe for concurrent use and
// lock-free until a request waits: a level is a handful of atomic counters,
// and a queue behind a mutex that a Release takes only when someone waits.
type Controller struct {
	seed      maphash.Seed
	queueWait time.Duration
	levels    [NumLevels]level
}

type level struct {
	// seats is the level's limit; 0 means none.
	seats int32
	// flowCap is the most seats one identity may hold; flows is nil when
	// there is no per-identity limit.
	flowCap    int32
	flows      *[flowBuckets]atomic.Int32
	executing  atomic.Int32 // seats held
	requests   atomic.Int32 // requests holding them
	dispatched atomic.Uint64
	rejected   [numReasons]atomic.Uint64
	// queueCap is how many requests may wait (0: the level has no
	// queue); waiting counts them, so that a Release looks at the queue
	// only when someone waits.
	queueCap int32
	waiting  atomic.Int32
	qmu      sync.Mutex
	queue    []*waiter // first come first
	_        [64]byte  // keep levels' hot counters on separate cache lines
}

// waiter is a queued request; ready is closed (under qmu) when a Release
// gave it its seats.
type waiter struct {
	width int32
	ready chan struct{}
}

// New returns a Controller with the seats of cfg.
func New(cfg Config) (*Controller, error) {
	if cfg.Seats < 0 {
		return nil, fmt.Errorf("seats must be >= 0, got %d", cfg.Seats)
	}
	shares := DefaultShares()
	if cfg.Shares != nil {
		shares = *cfg.Shares
	}
	if cfg.QueueWait < 0 {
		return nil, fmt.Errorf("queue wait must be >= 0, got %v", cfg.QueueWait)
	}
	c := &Controller{seed: maphash.MakeSeed(), queueWait: cfg.QueueWait}
	if c.queueWait == 0 {
		c.queueWait = DefaultQueueWait
	}
	for i, sh := range shares {
		if sh.Seats < 0 || sh.Seats > 1 || sh.PerFlow < 0 || sh.PerFlow > 1 {
			return nil, fmt.Errorf("level %s: shares must be in [0, 1], got seats %v per flow %v", Level(i), sh.Seats, sh.PerFlow)
		}
		if sh.Queue < 0 || (sh.Queue > 0 && sh.PerFlow != 1) {
			return nil, fmt.Errorf("level %s: a queue must be >= 0 and only a level with per flow 1 may have one, got queue %v per flow %v", Level(i), sh.Queue, sh.PerFlow)
		}
		if Level(i) == Exempt || cfg.Seats == 0 {
			continue
		}
		l := &c.levels[i]
		l.seats = int32(max(1, math.Round(float64(cfg.Seats)*sh.Seats)))
		l.flowCap = int32(max(1, math.Ceil(float64(l.seats)*sh.PerFlow)))
		if l.flowCap < l.seats {
			l.flows = new([flowBuckets]atomic.Int32)
		}
		l.queueCap = int32(math.Ceil(float64(l.seats) * sh.Queue))
	}
	return c, nil
}

// Seat is an admitted request's place (one or more seats of its level:
// its width); Release it when the request ends.
type Seat struct {
	l       *level
	width   int32
	buckets [2]uint16
}

// Admit takes one seat in level lv for identity flow, or says why not. It
// never blocks and does not allocate.
func (c *Controller) Admit(lv Level, flow string) (Seat, Reason) {
	return c.AdmitWidth(lv, flow, 1)
}

// AdmitWidth takes width seats (see Width) in level lv for identity flow,
// or says why not. A width larger than the level's seats, or than one
// identity's share, is cut down to it: a wide request can always run alone.
// It never blocks and does not allocate; a level's queue is Wait's.
func (c *Controller) AdmitWidth(lv Level, flow string, width int) (Seat, Reason) {
	s, r := c.tryAdmit(lv, flow, width)
	if r != Admitted {
		c.levels[lv].rejected[r].Add(1)
	}
	return s, r
}

// Wait is AdmitWidth, except that in a level with a queue a request that
// finds every seat taken waits for one, first come first served: until a
// seat is free (Admitted), the queue is full (QueueFull, at once), it
// waited Config.QueueWait (TimedOut) or ctx ends (Cancelled). It does not
// allocate unless it waits.
func (c *Controller) Wait(ctx context.Context, lv Level, flow string, width int) (Seat, Reason) {
	l := &c.levels[lv]
	if l.queueCap == 0 {
		return c.AdmitWidth(lv, flow, width)
	}
	// Nobody waits: take a free seat if there is one. Otherwise join the
	// back of the queue (a newcomer never overtakes a waiter).
	if l.waiting.Load() == 0 {
		if s, r := c.tryAdmit(lv, flow, width); r == Admitted {
			return s, r
		}
	}
	w := &waiter{width: c.width(l, width), ready: make(chan struct{})}
	l.qmu.Lock()
	if int32(len(l.queue)) >= l.queueCap {
		l.qmu.Unlock()
		l.rejected[QueueFull].Add(1)
		return Seat{}, QueueFull
	}
	l.queue = append(l.queue, w)
	l.waiting.Add(1)
	// Seats freed since the try above went to nobody: hand them out.
	l.dispatch()
	l.qmu.Unlock()

	timer := time.NewTimer(c.queueWait)
	defer timer.Stop()
	reason := TimedOut
	select {
	case <-w.ready:
		return Seat{l: l, width: w.width}, Admitted
	case <-timer.C:
	case <-ctx.Done():
		reason = Cancelled
	}
	l.qmu.Lock()
	select {
	case <-w.ready:
		// A seat came as the wait ended: give it to the next waiter.
		l.qmu.Unlock()
		Seat{l: l, width: w.width}.Release()
	default:
		l.remove(w)
		l.qmu.Unlock()
	}
	l.rejected[reason].Add(1)
	return Seat{}, reason
}

// width is the seats a request of the given width takes in l.
func (c *Controller) width(l *level, width int) int32 {
	w := int32(max(1, width))
	if l.seats > 0 {
		w = min(w, l.seats)
	}
	if l.flows != nil {
		w = min(w, l.flowCap)
	}
	return w
}

// tryAdmit is AdmitWidth without counting a refusal.
func (c *Controller) tryAdmit(lv Level, flow string, width int) (Seat, Reason) {
	l := &c.levels[lv]
	w := c.width(l, width)
	s := Seat{l: l, width: w}
	if l.flows != nil {
		s.buckets = c.buckets(flow)
		b0, b1 := s.buckets[0], s.buckets[1]
		n0, n1 := l.flows[b0].Add(w), l.flows[b1].Add(w)
		if min(n0, n1) > l.flowCap {
			l.flows[b0].Add(-w)
			l.flows[b1].Add(-w)
			return Seat{}, FlowFull
		}
	}
	if n := l.executing.Add(w); l.seats > 0 && n > l.seats {
		l.executing.Add(-w)
		if l.flows != nil {
			l.flows[s.buckets[0]].Add(-w)
			l.flows[s.buckets[1]].Add(-w)
		}
		if l.waiting.Load() > 0 {
			// A Release that looked while this try held seats it then
			// gave back may have left a waiter without one.
			l.qmu.Lock()
			l.dispatch()
			l.qmu.Unlock()
		}
		return Seat{}, LevelFull
	}
	l.requests.Add(1)
	l.dispatched.Add(1)
	return s, Admitted
}

// buckets are flow's two counters of the sketch: distinct ones.
func (c *Controller) buckets(flow string) [2]uint16 {
	h := maphash.String(c.seed, flow)
	b0, b1 := uint16(h%flowBuckets), uint16((h>>32)%flowBuckets)
	if b1 == b0 {
		b1 = (b0 + 1) % flowBuckets
	}
	return [2]uint16{b0, b1}
}

// dispatch gives free seats to the waiters at the head of the queue, in
// order, while the head's width fits. Called with qmu held.
func (l *level) dispatch() {
	n := 0
	for _, w := range l.queue {
		if e := l.executing.Add(w.width); e > l.seats {
			l.executing.Add(-w.width)
			break
		}
		l.requests.Add(1)
		l.dispatched.Add(1)
		close(w.ready)
		n++
	}
	if n == 0 {
		return
	}
	clear(l.queue[:n])
	l.queue = l.queue[n:]
	l.waiting.Add(int32(-n))
}

// remove takes w, which was not admitted, out of the queue. Called with
// qmu held.
func (l *level) remove(w *waiter) {
	for i, q := range l.queue {
		if q == w {
			l.queue = append(l.queue[:i], l.queue[i+1:]...)
			l.waiting.Add(-1)
			return
		}
	}
}

// Release gives the seats back. Releasing the zero Seat does nothing.
func (s Seat) Release() {
	if s.l == nil {
		return
	}
	s.l.executing.Add(-s.width)
	s.l.requests.Add(-1)
	if s.l.flows != nil {
		s.l.flows[s.buckets[0]].Add(-s.width)
		s.l.flows[s.buckets[1]].Add(-s.width)
	}
	if s.l.waiting.Load() > 0 {
		s.l.qmu.Lock()
		s.l.dispatch()
		s.l.qmu.Unlock()
	}
}

// LevelStats is a snapshot of one level.
type LevelStats struct {
	// Seats is the level's limit (0: none); FlowSeats the most one
	// identity may hold (equal to Seats when identities are not capped).
	Seats, FlowSeats int
	// Executing is the seats held now (a wide request holds several);
	// Requests the requests holding them.
	Executing, Requests int
	// Dispatched counts admitted requests; Rejected refused ones by
	// Reason (index LevelFull, FlowFull, ...: see Reasons).
	Dispatched uint64
	Rejected   [numReasons]uint64
	// QueueSeats is how many requests may wait (0: no queue); Waiting
	// how many wait now.
	QueueSeats, Waiting int
}

// Stats returns a snapshot of level lv.
func (c *Controller) Stats(lv Level) LevelStats {
	l := &c.levels[lv]
	st := LevelStats{
		Seats: int(l.seats), FlowSeats: int(l.seats), Executing: int(l.executing.Load()), Requests: int(l.requests.Load()),
		Dispatched: l.dispatched.Load(), QueueSeats: int(l.queueCap), Waiting: int(l.waiting.Load()),
	}
	if l.flows != nil {
		st.FlowSeats = int(l.flowCap)
	}
	for i := range st.Rejected {
		st.Rejected[i] = l.rejected[i].Load()
	}
	return st
}
