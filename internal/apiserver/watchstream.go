package apiserver

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/apiserver/store"
)

// watchStream carries a watch's events to its client until the watch ends:
// the client goes away, its timeout passes, the watcher ends (it fell
// behind, or the cache reloaded) or the server stops.
//
// It runs in one of two ways. On the handler's goroutine (serve), blocking
// on whichever comes first — the way any net/http handler streams. Or
// parked (parkWatch): when the response writer can outlive its handler
// (internal/h2server's streams), the handler returns and the stream holds
// no goroutine while it is idle; each of the things it waits for wakes it,
// and one goroutine at a time does the work. An agent keeps two watches
// open for its whole life and they are idle nearly all the time: parked,
// they cost a fleet no goroutine stacks (about 5 KB each, measured in
// docs/performance.md).
type watchStream struct {
	h       *resourceHandler
	ctx     context.Context
	ww      *watchWriter
	watcher *store.Watcher
	flushes flushPacer
	batch   []store.Event
}

// writeInitial writes the initial events (and the bookmark that ends them,
// for a watch-list) and flushes them; false when the client is gone.
func (ws *watchStream) writeInitial(initial []store.Event, endBookmark bool, snapshotRV int64) bool {
	for _, ev := range initial {
		if err := ws.ww.write(ev); err != nil {
			return false
		}
	}
	if endBookmark {
		if err := ws.ww.writeBookmark(snapshotRV, true); err != nil {
			return false
		}
	}
	ws.ww.flush()
	return true
}

// drain writes what the watcher has queued, flushing as the pacer allows;
// it reports whether the watch is over.
func (ws *watchStream) drain() (over bool) {
	var ended bool
	// Everything queued is written before one flush.
	ws.batch, ended = ws.watcher.Next(ws.batch)
	for _, ev := range ws.batch {
		if err := ws.ww.write(ev); err != nil {
			return true
		}
	}
	if ended {
		ws.ww.flush()
		return true
	}
	if len(ws.batch) > 0 && ws.flushes.now() {
		ws.ww.flush()
	}
	return false
}

// flushDue writes the events the pacer held back.
func (ws *watchStream) flushDue() {
	ws.flushes.fired()
	ws.ww.flush()
}

// end releases the watch: its watcher, its place in the server's count of
// open watches (Stop waits for it) and its timers.
func (ws *watchStream) end() {
	ws.flushes.stop()
	ws.watcher.Stop()
	if ws.h.s.cfg.Metrics != nil {
		ws.h.s.cfg.Metrics.watchEnded(ws.h.r)
	}
	ws.h.s.watches.Done()
}

// serve runs the watch on the calling goroutine until it is over.
func (ws *watchStream) serve(timeout time.Duration) {
	timer := ws.h.s.cfg.Clock.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case <-ws.watcher.Ready():
			if ws.drain() {
				return
			}
		case <-ws.flushes.due():
			ws.flushDue()
		case <-timer.C():
			ws.ww.flush()
			return
		case <-ws.ctx.Done():
			return
		case <-ws.h.s.stopCtx.Done():
			ws.ww.flush()
			return
		}
	}
}

// parker is a response writer that can outlive its handler
// (internal/h2server's stream): after Park the handler returns, the
// response is written from any goroutine, one at a time, and finish ends
// it.
type parker interface {
	Park(onReset func()) (finish func(aborted bool))
}

// parkedWatch is a watchStream without a goroutine of its own.
type parkedWatch struct {
	ws     *watchStream
	finish func()

	state    atomic.Int32 // parkIdle, parkRunning or parkAgain
	timedOut atomic.Bool
	flushNow atomic.Bool

	timer clock.Timer // the watch's timeout
}

const (
	parkIdle    = iota // nothing to do: no goroutine runs the watch
	parkRunning        // a goroutine is running the watch
	parkAgain          // woken while running: run once more before idling
)

// parkWatch parks ws when the response writer allows it and the server's
// clock can run functions later; it reports whether it did, and then owns
// ws (and its end).
func parkWatch(w http.ResponseWriter, ws *watchStream, info requestInfo, timeout time.Duration) bool {
	rec, ok := w.(*statusRecorder)
	if !ok {
		return false
	}
	pk, ok := rec.ResponseWriter.(parker)
	if !ok {
		return false
	}
	clk, ok := ws.h.s.cfg.Clock.(clock.WithDelayedExecution)
	if !ok {
		return false
	}
	p := &parkedWatch{ws: ws}
	// Until the first run below, wake-ups only mark the watch to run again.
	p.state.Store(parkRunning)
	// The client's reset or the connection's end wakes the watch through
	// the stream itself (a context.AfterFunc per watch cost ~0.5 KB).
	finish := pk.Park(p.wake)
	rec.parked = true
	p.finish = func() {
		finish(false)
		if m := ws.h.s.cfg.Metrics; m != nil {
			// A watch's duration is not observed, only its count and code.
			m.observe(info, ws.h.r, rec.code, 0)
		}
	}
	ws.flushes.onDue = func() {
		p.flushNow.Store(true)
		p.wake()
	}
	p.timer = clk.AfterFunc(timeout, func() {
		p.timedOut.Store(true)
		p.wake()
	})
	ws.h.s.addParked(p)
	ws.watcher.Notify(p.wake)
	// What happened before the wake-ups were in place (events queued, the
	// server stopped, the client left) is seen by this first look.
	go p.run()
	return true
}

// wake makes sure the watch runs soon: it starts a goroutine when none is
// running, or tells the running one to look again. It never blocks (the
// watcher calls it with the cache locked).
func (p *parkedWatch) wake() {
	for {
		switch p.state.Load() {
		case parkIdle:
			if p.state.CompareAndSwap(parkIdle, parkRunning) {
				go p.run()
				return
			}
		case parkRunning:
			if p.state.CompareAndSwap(parkRunning, parkAgain) {
				return
			}
		default:
			return
		}
	}
}

// run does what the watch has to do, then idles; once the watch is over it
// ends it and never idles again, so that later wake-ups start nothing.
func (p *parkedWatch) run() {
	for {
		if p.step() {
			p.end()
			return
		}
		if p.state.CompareAndSwap(parkRunning, parkIdle) {
			return
		}
		p.state.Store(parkRunning)
	}
}

// step is one look at the watch; it reports whether the watch is over.
func (p *parkedWatch) step() (over bool) {
	ws := p.ws
	switch {
	case ws.ctx.Err() != nil:
		return true
	case p.timedOut.Load(), ws.h.s.stopCtx.Err() != nil:
		ws.ww.flush()
		return true
	}
	if p.flushNow.Swap(false) {
		ws.flushDue()
	}
	return ws.drain()
}

func (p *parkedWatch) end() {
	p.timer.Stop()
	p.ws.h.s.removeParked(p)
	p.ws.end()
	p.finish()
}
