package nodelifecycle

import (
	"container/list"
	"time"
)

// tokenBucket is a zone's NoExecute taint limiter (SPEC NLC-1, NLC-15): a
// token bucket of burst 1 refilled at rate tokens per second, driven by the
// time it is given, never by a clock of its own.
//
// With burst 1 the whole state is the moment the bucket is (or was) full
// again: a token is granted at or after readyAt, and granting one moves
// readyAt to 1/rate later. A rate of 0 grants nothing.
type tokenBucket struct {
	rate    float64
	readyAt time.Time
}

// newTokenBucket returns a full bucket.
func newTokenBucket(rate float64, now time.Time) tokenBucket {
	return tokenBucket{rate: rate, readyAt: now}
}

// interval is the spacing between tokens at rate r (> 0).
func interval(r float64) time.Duration {
	return time.Duration(float64(time.Second) / r)
}

// full reports whether a token is available at now.
func (b *tokenBucket) full(now time.Time) bool {
	return b.rate > 0 && !now.Before(b.readyAt)
}

// take grants a token if one is available at now.
func (b *tokenBucket) take(now time.Time) bool {
	if !b.full(now) {
		return false
	}
	b.readyAt = now.Add(interval(b.rate))
	return true
}

// giveBack undoes a take that moved readyAt from prev to granted, unless the
// bucket changed since (another take, a rate swap): a token handed out for a
// write the shell then skipped was never used.
func (b *tokenBucket) giveBack(prev, granted time.Time) {
	if b.readyAt.Equal(granted) {
		b.readyAt = prev
	}
}

// setRate changes the rate the way upstream swaps a zone's limiter: nothing
// happens if the rate is unchanged; otherwise the bucket starts full if the
// old one had a token and empty if it had none, so swapping never grants a
// burst (SPEC NLC-15). Rate 0 grants nothing until the rate changes again,
// and leaving it starts empty.
func (b *tokenBucket) setRate(rate float64, now time.Time) {
	if rate == b.rate {
		return
	}
	hadToken := b.full(now)
	b.rate = rate
	if hadToken {
		b.readyAt = now
	} else if rate > 0 {
		b.readyAt = now.Add(interval(rate))
	}
}

// seed makes the bucket look as if its last token had been taken at last (a
// failover: the previous leader's last NoExecute taint, from its timeAdded).
// A time after now counts as now.
func (b *tokenBucket) seed(last, now time.Time) {
	if b.rate <= 0 {
		return
	}
	if last.After(now) {
		last = now
	}
	if next := last.Add(interval(b.rate)); next.After(b.readyAt) {
		b.readyAt = next
	}
}

// taintQueue is a zone's queue of nodes waiting for a NoExecute taint: first
// in, first out, each node at most once.
type taintQueue struct {
	order *list.List // of string (node names)
	index map[string]*list.Element
}

func newTaintQueue() taintQueue {
	return taintQueue{order: list.New(), index: map[string]*list.Element{}}
}

func (q *taintQueue) len() int { return q.order.Len() }

func (q *taintQueue) has(name string) bool {
	_, ok := q.index[name]
	return ok
}

// push adds name at the back unless it is already queued.
func (q *taintQueue) push(name string) {
	if !q.has(name) {
		q.index[name] = q.order.PushBack(name)
	}
}

// pushFront puts name at the front (a retried write keeps its place).
func (q *taintQueue) pushFront(name string) {
	q.remove(name)
	q.index[name] = q.order.PushFront(name)
}

func (q *taintQueue) remove(name string) {
	if e, ok := q.index[name]; ok {
		q.order.Remove(e)
		delete(q.index, name)
	}
}

// head returns the first queued node.
func (q *taintQueue) head() (string, bool) {
	e := q.order.Front()
	if e == nil {
		return "", false
	}
	return e.Value.(string), true
}

// names lists the queue in order.
func (q *taintQueue) names() []string {
	out := make([]string, 0, q.order.Len())
	for e := q.order.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.(string))
	}
	return out
}
