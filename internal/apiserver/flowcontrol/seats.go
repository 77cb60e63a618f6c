package flowcontrol

import (
	"fmt"
	"hash/maphash"
	"math"
	"sync/atomic"
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
}

// DefaultShares split the total seats (--max-requests-inflight +
// --max-mutating-requests-inflight, 600 by default) as:
//
//	level           seats   one identity at most   at 600 seats
//	exempt          no limit                         —
//	system          20 %    all of the level          120
//	node-heartbeat  20 %    5 % of the level          120, 6 per node
//	node            20 %    10 % of the level         120, 12 per node
//	admin           30 %    all of the level          180
//	workload        10 %    25 % of the level          60, 15 per user
//
// A node renews its Lease and patches its status one request at a time,
// so 6 heartbeat seats is several times what an honest node needs; 120
// seats at a few milliseconds per renewal is tens of thousands of
// renewals per second. Administrators and the controllers each share one
// identity, so per-identity shares would only cap them against themselves.
func DefaultShares() [NumLevels]Share {
	return [NumLevels]Share{
		Exempt:        {},
		System:        {Seats: 0.20, PerFlow: 1},
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
}

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

	numReasons = int(FlowFull) + 1
)

// String returns the reason label of apiserver_flowcontrol_rejected_requests_total:
// "concurrency-limit" (LevelFull) and "queue-full" (FlowFull: upstream's
// name for a flow that used its share).
func (r Reason) String() string {
	switch r {
	case Admitted:
		return "admitted"
	case LevelFull:
		return "concurrency-limit"
	case FlowFull:
		return "queue-full"
	}
	return "unknown"
}

// flowBuckets is the width of each level's count-min sketch.
const flowBuckets = 1024

// Controller admits requests into seats. It is safe for concurrent use and
// lock-free: a level is a handful of atomic counters.
type Controller struct {
	seed   maphash.Seed
	levels [NumLevels]level
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
	_          [64]byte // keep levels' hot counters on separate cache lines
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
	c := &Controller{seed: maphash.MakeSeed()}
	for i, sh := range shares {
		if sh.Seats < 0 || sh.Seats > 1 || sh.PerFlow < 0 || sh.PerFlow > 1 {
			return nil, fmt.Errorf("level %s: shares must be in [0, 1], got seats %v per flow %v", Level(i), sh.Seats, sh.PerFlow)
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
// It never blocks and does not allocate.
func (c *Controller) AdmitWidth(lv Level, flow string, width int) (Seat, Reason) {
	l := &c.levels[lv]
	w := int32(max(1, width))
	if l.seats > 0 {
		w = min(w, l.seats)
	}
	if l.flows != nil {
		w = min(w, l.flowCap)
	}
	s := Seat{l: l, width: w}
	if l.flows != nil {
		h := maphash.String(c.seed, flow)
		b0, b1 := uint16(h%flowBuckets), uint16((h>>32)%flowBuckets)
		if b1 == b0 {
			b1 = (b0 + 1) % flowBuckets
		}
		s.buckets = [2]uint16{b0, b1}
		n0, n1 := l.flows[b0].Add(w), l.flows[b1].Add(w)
		if min(n0, n1) > l.flowCap {
			l.flows[b0].Add(-w)
			l.flows[b1].Add(-w)
			l.rejected[FlowFull].Add(1)
			return Seat{}, FlowFull
		}
	}
	if n := l.executing.Add(w); l.seats > 0 && n > l.seats {
		l.executing.Add(-w)
		if l.flows != nil {
			l.flows[s.buckets[0]].Add(-w)
			l.flows[s.buckets[1]].Add(-w)
		}
		l.rejected[LevelFull].Add(1)
		return Seat{}, LevelFull
	}
	l.requests.Add(1)
	l.dispatched.Add(1)
	return s, Admitted
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
	// Reason (index LevelFull, FlowFull).
	Dispatched uint64
	Rejected   [numReasons]uint64
}

// Stats returns a snapshot of level lv.
func (c *Controller) Stats(lv Level) LevelStats {
	l := &c.levels[lv]
	st := LevelStats{Seats: int(l.seats), FlowSeats: int(l.seats), Executing: int(l.executing.Load()), Requests: int(l.requests.Load()), Dispatched: l.dispatched.Load()}
	if l.flows != nil {
		st.FlowSeats = int(l.flowCap)
	}
	for i := range st.Rejected {
		st.Rejected[i] = l.rejected[i].Load()
	}
	return st
}
