package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/apiserver/flowcontrol"
)

// OnWarmWorkers serves requests that are not long-running (watches and pod
// logs are) on a pool of at most max long-lived goroutines; see
// WarmWorkers. It goes outermost, so that routing, authentication and
// authorization run on the worker too.
func OnWarmWorkers(next http.Handler, max int) http.Handler {
	return NewWarmWorkers(max).Handler(next)
}

// Handler serves next's requests that are not long-running on p's workers.
func (p *WarmWorkers) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if flowcontrol.IsLongRunning(r.Method, r.URL.Path, r.URL.RawQuery) {
			next.ServeHTTP(w, r)
			return
		}
		p.run(func() { next.ServeHTTP(w, r) })
	})
}

// GoServe starts fn, which serves r, and does not wait for it: on a new
// goroutine when r is long-running, else on an idle worker, on a new one
// while the pool is below its size, or, with every worker busy, on the
// first worker that becomes free (the requests waiting are served oldest
// first, a node's heartbeat before others: see heartbeatBurst). fn must
// not panic (a server that starts handlers this way recovers in fn
// itself). It is how a server that starts its own handler goroutines
// (internal/h2server) puts short requests on warm stacks without a second
// hand-off.
func (p *WarmWorkers) GoServe(r *http.Request, fn func()) {
	if flowcontrol.IsLongRunning(r.Method, r.URL.Path, r.URL.RawQuery) {
		go fn()
		return
	}
	t := &warmTask{fn: fn}
	p.mu.Lock()
	if p.startLocked(t) {
		p.mu.Unlock()
		return
	}
	now := p.clock.Now()
	if p.queued() == 0 {
		p.progress = now
	} else if !p.stalled && now.Sub(p.progress) > StallAfter {
		p.stalled = true
	}
	if !p.stalled {
		if flowcontrol.IsHeartbeat(r.URL.Path) {
			p.heartbeats.push(t)
		} else {
			p.queue.push(t)
		}
		p.mu.Unlock()
		return
	}
	// Every worker is blocked (on storage, on a slow client's body), not
	// busy: waiting for one would only add the stall to every request.
	// Serve the queued requests and this one on goroutines of their own,
	// as without the pool, until a worker is free again.
	queued := append(p.heartbeats.drain(), p.queue.drain()...)
	p.mu.Unlock()
	for _, q := range queued {
		go q.fn()
	}
	go fn()
}

// StallAfter is how long a queued request may wait while no worker takes
// one before the pool stops queueing (GoServe). The stall is noticed by
// the next request that arrives: on a server receiving none, a request
// queued behind blocked workers waits for one of them.
const StallAfter = time.Second

// heartbeatBurst is how many queued node heartbeats (a Lease renewal, a
// Node status update: flowcontrol.IsHeartbeat) a free worker takes in a
// row before the oldest other request, when both wait. A renewal is never
// queued behind a LIST or a flood of other requests, and heartbeats alone
// cannot keep everyone else waiting for ever.
const heartbeatBurst = 8

// WarmWorkers runs short requests on long-lived goroutines.
//
// Go's HTTP/2 server starts a new goroutine for every request, with a small
// stack. A request through the whole chain (authorization, decoding,
// admission, storage, encoding) needs several times that, so every request
// grew its stack two or three times, each a copy of every frame: 7 % of the
// server's CPU at 2,500 renewals/s (docs/performance.md). A worker's stack
// has grown already, so a request handed to one starts with the room it
// needs. The hand-off costs a lock and a channel operation.
//
// The pool also decides where a saturated server's backlog waits
// (GoServe). Started each on a goroutine of its own, the requests read
// became thousands of runnable goroutines, and the Go scheduler ran the
// connections' readers behind all of them (a reader woken by the network,
// or preempted, waits in the scheduler's global queue, which a busy
// processor serves one turn in 61): requests waited unread in the sockets
// until their clients timed out. Now a request that finds every worker busy
// waits in the pool's queue (node heartbeats in a queue of their own that
// is served first, see heartbeatBurst), and a worker takes the next one
// only after yielding to the goroutines already waiting to run, the
// readers among them. The readers keep the sockets drained, at most max
// handlers are runnable, and the backlog waits where a request whose
// client has gone, or whose deadline has passed, is dropped without being
// served (LimitInFlight). When no worker has taken a queued request for
// StallAfter, the workers are blocked rather than busy (storage stalls,
// slow clients' bodies): the pool then starts every request on a goroutine
// of its own again until a worker is free, so a blocked worker never
// holds up a request that could be served.
//
// A request from run (net/http's and the in-process clients' path) waits
// for no worker: when none is idle and the pool is at its size, it runs on
// its own goroutine as before. A panic in a worker is carried back and
// raised again on the request's goroutine, so net/http handles it exactly
// as before (http.ErrAbortHandler included).
type WarmWorkers struct {
	max   int
	clock clock.PassiveClock

	mu      sync.Mutex
	running int
	idle    []chan *warmTask // parked workers' hand-off channels, the last parked on top
	queue   taskQueue        // GoServe's requests waiting for a worker, oldest first
	// heartbeats are GoServe's node heartbeats waiting for a worker, taken
	// before queue's requests; inARow counts those taken while others waited.
	heartbeats taskQueue
	inARow     int
	progress   time.Time // when a worker last took a queued request, or the queue last filled from empty
	stalled    bool      // no worker took a queued request for StallAfter: GoServe queues nothing
}

// warmTask is one request for a worker; tasks of run are pooled with their
// done channel. A task from GoServe has no done channel: nobody waits for
// it.
type warmTask struct {
	fn   func()
	done chan any // the panic value, or nil
}

var warmTasks = sync.Pool{New: func() any { return &warmTask{done: make(chan any, 1)} }}

// NewWarmWorkers returns a pool of at most max workers, started on demand.
func NewWarmWorkers(max int) *WarmWorkers {
	return &WarmWorkers{max: max, clock: clock.RealClock{}}
}

// workers is how many workers the pool has started (idle or busy).
func (p *WarmWorkers) workers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running
}

// startLocked gives t to the worker parked last or, while the pool is
// below its size, to a new worker, and reports whether it did; mu is held.
// The hand-off never blocks: a parked worker's channel is empty.
func (p *WarmWorkers) startLocked(t *warmTask) bool {
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		w <- t
		return true
	}
	if p.running < p.max {
		p.running++
		go p.work(t)
		return true
	}
	return false
}

// run calls fn on a worker, or on the calling goroutine when none is free,
// and returns when fn has returned.
func (p *WarmWorkers) run(fn func()) {
	t := warmTasks.Get().(*warmTask)
	t.fn = fn
	p.mu.Lock()
	started := p.startLocked(t)
	p.mu.Unlock()
	if !started {
		t.fn = nil
		warmTasks.Put(t)
		fn()
		return
	}
	v := <-t.done
	t.fn = nil
	warmTasks.Put(t)
	switch {
	case v == errGoexit: //nolint:errorlint // the sentinel itself
		runtime.Goexit()
	case v != nil:
		panic(v)
	}
}

// errGoexit is what a task reports when it ended its goroutine with
// runtime.Goexit: the caller ends its own the same way.
var errGoexit = errors.New("the handler called runtime.Goexit")

// work runs tasks until the process ends: workers are few (bounded by
// max) and idle ones cost only their stack.
func (p *WarmWorkers) work(t *warmTask) {
	next := make(chan *warmTask, 1)
	returned := false
	defer func() {
		// Only runtime.Goexit in a task gets here without returning: the
		// worker is gone, its caller must not wait.
		if !returned {
			p.mu.Lock()
			p.running--
			p.mu.Unlock()
			if t.done != nil {
				t.done <- errGoexit
			}
		}
	}()
	for {
		v := call(t.fn)
		returned = true
		if t.done != nil {
			t.done <- v
		} else if v != nil {
			panic(v) // GoServe's fn must recover its own panics
		}
		p.mu.Lock()
		p.stalled = false
		if q := p.popLocked(); q != nil {
			p.progress = p.clock.Now()
			p.mu.Unlock()
			// Requests are waiting: the server is saturated. Go behind
			// the goroutines already waiting to run, the connections'
			// readers among them, so that reading stays ahead of serving.
			runtime.Gosched()
			t = q
		} else {
			p.idle = append(p.idle, next)
			p.mu.Unlock()
			t = <-next
		}
		returned = false
	}
}

// queued is how many of GoServe's requests wait for a worker; mu is held.
func (p *WarmWorkers) queued() int { return p.heartbeats.len() + p.queue.len() }

// popLocked takes the next waiting request: a heartbeat, unless
// heartbeatBurst of them were taken in a row while others waited; mu is
// held.
func (p *WarmWorkers) popLocked() *warmTask {
	if p.heartbeats.len() > 0 && (p.queue.len() == 0 || p.inARow < heartbeatBurst) {
		if p.queue.len() > 0 {
			p.inARow++
		}
		return p.heartbeats.pop()
	}
	p.inARow = 0
	return p.queue.pop()
}

// taskQueue is a FIFO of tasks. Its backing array is reused: the tasks
// left are moved down once at least half of it has been taken, so it stays
// within twice the longest the queue has been.
type taskQueue struct {
	tasks []*warmTask
	head  int
}

func (q *taskQueue) len() int { return len(q.tasks) - q.head }

func (q *taskQueue) push(t *warmTask) {
	if q.head > 0 && q.head >= len(q.tasks)/2 {
		n := copy(q.tasks, q.tasks[q.head:])
		clear(q.tasks[n:])
		q.tasks, q.head = q.tasks[:n], 0
	}
	q.tasks = append(q.tasks, t)
}

// drain takes every task, oldest first, and empties the queue.
func (q *taskQueue) drain() []*warmTask {
	tasks := q.tasks[q.head:]
	q.tasks, q.head = nil, 0
	return tasks
}

func (q *taskQueue) pop() *warmTask {
	if q.len() == 0 {
		return nil
	}
	t := q.tasks[q.head]
	q.tasks[q.head] = nil
	q.head++
	if q.head == len(q.tasks) {
		q.tasks, q.head = q.tasks[:0], 0
	}
	return t
}

// call runs fn and returns what it panicked with, if anything. The stack of
// the panic is added to its value (the re-raise elsewhere would lose it),
// except for http.ErrAbortHandler, which net/http recognizes by identity.
func call(fn func()) (panicked any) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler { //nolint:errorlint // net/http compares it by identity too
				panicked = v
				return
			}
			panicked = fmt.Errorf("%v\n\nworker goroutine stack:\n%s", v, debug.Stack())
		}
	}()
	fn()
	return nil
}
