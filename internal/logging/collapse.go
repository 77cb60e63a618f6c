package logging

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// eventFloodMessages are client-go's event recorder's messages for an event
// it could not deliver, each logged with the whole event. When a zone of a
// large fleet goes dark the controllers record tens of thousands of events
// at once: the recorder's queue (1,000 events) overflows and it logged
// 30,713 of these lines in one 100,000-node outage (docs/performance.md).
var eventFloodMessages = []string{
	"Unable to record event: too many queued events, dropped event",
	"Server rejected event (will not retry!)",
	"Unable to write event (may retry after sleeping)",
	"Unable to write event (retry limit exceeded!)",
}

// collapseWindow is how long the repeats of a collapsed message are counted
// before their number is logged.
const collapseWindow = 10 * time.Second

// collapser is a slog.Handler that logs each of a few flooding messages at
// most once per window: the first record of a window as it came, the
// others only counted, and when the window ends one record with the same
// message and level saying how many were held back ("repeated") and since
// when. Every other record passes through.
type collapser struct {
	next  slog.Handler
	state *collapseState // shared by the handlers WithAttrs and WithGroup derive
}

type collapseState struct {
	msgs   map[string]bool
	window time.Duration
	clock  clock.WithDelayedExecution

	mu   sync.Mutex
	open map[string]*collapsed // the messages whose window runs
}

// collapsed is one message's running window.
type collapsed struct {
	first    time.Time
	level    slog.Level
	handler  slog.Handler // the handler of the window's first record
	repeated int
}

// newCollapser wraps next so that msgs are logged at most once per window.
func newCollapser(next slog.Handler, msgs []string, window time.Duration, clk clock.WithDelayedExecution) *collapser {
	st := &collapseState{msgs: map[string]bool{}, window: window, clock: clk, open: map[string]*collapsed{}}
	for _, m := range msgs {
		st.msgs[m] = true
	}
	return &collapser{next: next, state: st}
}

func (c *collapser) Enabled(ctx context.Context, l slog.Level) bool { return c.next.Enabled(ctx, l) }

func (c *collapser) Handle(ctx context.Context, r slog.Record) error {
	st := c.state
	if !st.msgs[r.Message] {
		return c.next.Handle(ctx, r)
	}
	st.mu.Lock()
	if w, ok := st.open[r.Message]; ok {
		w.repeated++
		st.mu.Unlock()
		return nil
	}
	st.open[r.Message] = &collapsed{first: st.clock.Now(), level: r.Level, handler: c.next}
	st.mu.Unlock()
	msg := r.Message
	st.clock.AfterFunc(st.window, func() { st.close(msg) })
	return c.next.Handle(ctx, r)
}

// close ends msg's window, logging how many records it held back.
func (st *collapseState) close(msg string) {
	st.mu.Lock()
	w := st.open[msg]
	delete(st.open, msg)
	st.mu.Unlock()
	if w == nil || w.repeated == 0 {
		return
	}
	// Stamped with the window's end (when this runs), not the clock's now:
	// a fake clock runs this with its lock held.
	r := slog.NewRecord(w.first.Add(st.window), w.level, msg, 0)
	r.AddAttrs(slog.Int("repeated", w.repeated), slog.Time("since", w.first))
	_ = w.handler.Handle(context.Background(), r)
}

func (c *collapser) WithAttrs(as []slog.Attr) slog.Handler {
	return &collapser{next: c.next.WithAttrs(as), state: c.state}
}

func (c *collapser) WithGroup(name string) slog.Handler {
	return &collapser{next: c.next.WithGroup(name), state: c.state}
}
