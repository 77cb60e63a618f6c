package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"

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

// GoServe starts fn, which serves r, and does not wait for it: on a worker
// when r is not long-running and one is idle or can be started, else on a
// new goroutine. fn must not panic (a server that starts handlers this way
// recovers in fn itself). It is how a server that starts its own handler
// goroutines (internal/h2server) puts short requests on warm stacks without
// a second hand-off.
func (p *WarmWorkers) GoServe(r *http.Request, fn func()) {
	if flowcontrol.IsLongRunning(r.Method, r.URL.Path, r.URL.RawQuery) {
		go fn()
		return
	}
	t := &warmTask{fn: fn}
	select {
	case p.tasks <- t:
	default:
		if !p.spawn(t) {
			go fn()
		}
	}
}

// WarmWorkers runs short requests on long-lived goroutines.
//
// Go's HTTP/2 server starts a new goroutine for every request, with a small
// stack. A request through the whole chain (authorization, decoding,
// admission, storage, encoding) needs several times that, so every request
// grew its stack two or three times, each a copy of every frame: 7 % of the
// server's CPU at 2,500 renewals/s (docs/performance.md). A worker's stack
// has grown already, so a request handed to one starts with the room it
// needs. The hand-off costs two channel operations.
//
// A request waits for no worker: when none is idle and the pool is at its
// size, the request runs on its own goroutine as before. A panic in a
// worker is carried back and raised again on the request's goroutine, so
// net/http handles it exactly as before (http.ErrAbortHandler included).
type WarmWorkers struct {
	tasks   chan *warmTask
	max     int32
	running atomic.Int32
}

// warmTask is one request for a worker; tasks are pooled with their done
// channel. A task from GoServe has no done channel: nobody waits for it.
type warmTask struct {
	fn   func()
	done chan any // the panic value, or nil
}

var warmTasks = sync.Pool{New: func() any { return &warmTask{done: make(chan any, 1)} }}

// NewWarmWorkers returns a pool of at most max workers, started on demand.
func NewWarmWorkers(max int) *WarmWorkers {
	return &WarmWorkers{tasks: make(chan *warmTask), max: int32(max)}
}

// run calls fn on a worker, or on the calling goroutine when none is free,
// and returns when fn has returned.
func (p *WarmWorkers) run(fn func()) {
	t := warmTasks.Get().(*warmTask)
	t.fn = fn
	select {
	case p.tasks <- t: // an idle worker took it
	default:
		if !p.spawn(t) {
			t.fn = nil
			warmTasks.Put(t)
			fn()
			return
		}
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

// spawn starts a worker with t as its first task, unless the pool is full.
func (p *WarmWorkers) spawn(t *warmTask) bool {
	for {
		n := p.running.Load()
		if n >= p.max {
			return false
		}
		if p.running.CompareAndSwap(n, n+1) {
			break
		}
	}
	go p.work(t)
	return true
}

// work runs tasks until the process ends: workers are few (bounded by
// max) and idle ones cost only their stack.
func (p *WarmWorkers) work(t *warmTask) {
	returned := false
	defer func() {
		// Only runtime.Goexit in a task gets here without returning: the
		// worker is gone, its caller must not wait.
		if !returned {
			p.running.Add(-1)
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
		t = <-p.tasks
		returned = false
	}
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
