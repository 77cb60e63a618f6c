package loadgen

import (
	"container/heap"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// Schedule decides when each of n leases is renewed next, the way the
// kubelet's lease controller paces itself (wait.JitterUntil with sliding
// true): a lease is renewed Interval plus a random jitter of up to
// JitterFactor·Interval after its previous renewal *finished*, so a slow
// server slows the renewals down instead of piling them up, and each lease
// has at most one renewal in flight.
//
// The first renewals are spread uniformly over one Interval from the start,
// as a fleet of agents that started at different times would be.
//
// Schedule is pure: it never reads a clock; callers pass now. It is not safe
// for concurrent use.
type Schedule struct {
	interval time.Duration
	jitter   float64
	rand     *rand.Rand
	due      dueHeap
}

// NewSchedule returns the schedule of n leases starting at start.
func NewSchedule(n int, start time.Time, interval time.Duration, jitterFactor float64, r *rand.Rand) *Schedule {
	s := &Schedule{interval: interval, jitter: jitterFactor, rand: r, due: make(dueHeap, 0, n)}
	for i := range n {
		var offset time.Duration
		if interval > 0 {
			offset = time.Duration(r.Int64N(int64(interval)))
		}
		s.due = append(s.due, dueItem{at: start.Add(offset), lease: i})
	}
	heap.Init(&s.due)
	return s
}

// Next returns the earliest time a renewal is due, or false when no lease is
// waiting (all are in flight).
func (s *Schedule) Next() (time.Time, bool) {
	if len(s.due) == 0 {
		return time.Time{}, false
	}
	return s.due[0].at, true
}

// PopDue removes every lease due at or before now and appends it, with the
// time it was due, to out.
func (s *Schedule) PopDue(now time.Time, out []Due) []Due {
	for len(s.due) > 0 && !s.due[0].at.After(now) {
		it := heap.Pop(&s.due).(dueItem)
		out = append(out, Due{Lease: it.lease, At: it.at})
	}
	return out
}

// Done records that lease's renewal finished at now and schedules its next
// one at now + Interval + rand[0, JitterFactor·Interval).
func (s *Schedule) Done(lease int, now time.Time) {
	next := now.Add(s.interval)
	if s.jitter > 0 && s.interval > 0 {
		if max := int64(s.jitter * float64(s.interval)); max > 0 {
			next = next.Add(time.Duration(s.rand.Int64N(max)))
		}
	}
	heap.Push(&s.due, dueItem{at: next, lease: lease})
}

// Waiting is the number of leases not in flight.
func (s *Schedule) Waiting() int { return len(s.due) }

// TargetRate is the renewals per second n leases produce on this schedule
// when renewals take no time: n / (Interval · (1 + JitterFactor/2)).
func TargetRate(n int, interval time.Duration, jitterFactor float64) float64 {
	if interval <= 0 {
		return 0
	}
	return float64(n) / (interval.Seconds() * (1 + jitterFactor/2))
}

// Due is one renewal that has come due.
type Due struct {
	Lease int
	At    time.Time
}

type dueItem struct {
	at    time.Time
	lease int
}

type dueHeap []dueItem

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].lease < h[j].lease
	}
	return h[i].at.Before(h[j].at)
}
func (h dueHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)   { *h = append(*h, x.(dueItem)) }
func (h *dueHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

// Pacer hands out the intended start times of an open-loop load of rate
// requests per second: start, start+1/rate, start+2/rate, … one per call,
// to any number of goroutines. A worker that falls behind gets start times
// in the past and runs at once; measuring latency from the intended start
// time (not from when the request was sent) keeps a slow server from hiding
// its queueing delay ("coordinated omission").
type Pacer struct {
	start  time.Time
	period time.Duration
	n      atomic.Int64
}

// NewPacer returns a pacer of rate per second from start. rate must be > 0.
func NewPacer(start time.Time, rate float64) *Pacer {
	return &Pacer{start: start, period: time.Duration(float64(time.Second) / rate)}
}

// Next returns the intended start time of the next request.
func (p *Pacer) Next() time.Time {
	n := p.n.Add(1) - 1
	return p.start.Add(time.Duration(n) * p.period)
}
