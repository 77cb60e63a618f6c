package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nodeplane/nodeplane/internal/storage"
)

// maxScan bounds the ring slots a watcher reads under one read lock, so
// that a watcher far behind does not hold writers off for long.
const maxScan = 1024

// A watch is a goroutine that reads the history ring from its own cursor.
// A write only stores its event in the ring and wakes the watchers of its
// key (a non-blocking send on a channel of one), so a slow watcher never
// holds a writer up: it reads the events when it gets to them, and if the
// ring has overwritten an event it still needed, its stream ends with
// ErrCompacted and the watcher lists again (the API server's watch cache
// does exactly that, as it does when etcd compacts under a slow watch).
type watcher struct {
	store      *Store
	prefix     string
	prevValues bool
	progress   bool
	ctx        context.Context
	wake       chan struct{}
	// progressWanted is set by RequestProgress.
	progressWanted atomic.Bool
	// cursor: every event up to it has been read (only the watch's
	// goroutine touches it).
	cursor int64
	out    chan storage.Event
}

func (w *watcher) notify() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Watch streams the changes under prefix after opts.FromRevision (0: from
// now). FromRevision ahead of the store fails with ErrFutureRevision; one
// before the history, at once or later because the watcher fell behind,
// ends the stream with an ErrCompacted EventError.
func (s *Store) Watch(ctx context.Context, prefix string, opts storage.WatchOptions) (<-chan storage.Event, error) {
	defer s.observe(storage.OpWatch, s.now())
	if opts.FromRevision < 0 {
		return nil, fmt.Errorf("watch %q from revision %d: negative revision", prefix, opts.FromRevision)
	}
	w := &watcher{
		store:      s,
		prefix:     prefix,
		prevValues: opts.PrevValues,
		progress:   opts.ProgressNotify,
		ctx:        ctx,
		wake:       make(chan struct{}, 1),
		out:        make(chan storage.Event, s.cfg.WatchBuffer),
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("watch %q: %w: %w", prefix, storage.ErrUnavailable, errClosed)
	}
	w.cursor = opts.FromRevision
	if w.cursor == 0 {
		w.cursor = s.rev
	}
	if w.cursor > s.rev {
		s.mu.Unlock()
		return nil, fmt.Errorf("watch %q from revision %d (current %d): %w", prefix, w.cursor, s.rev, storage.ErrFutureRevision)
	}
	s.watchers = append(slices.Clip(s.watchers), w)
	s.mu.Unlock()
	go w.run()
	return w.out, nil
}

// RequestProgress makes every watch send an EventProgress once it has read
// the whole history, as etcd's RequestProgress does; the API server's watch
// cache uses it to learn it is fresh.
func (s *Store) RequestProgress(context.Context) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, w := range s.watchers {
		w.progressWanted.Store(true)
		w.notify()
	}
	return nil
}

func (s *Store) removeWatcher(w *watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchers = slices.DeleteFunc(slices.Clone(s.watchers), func(x *watcher) bool { return x == w })
}

func (w *watcher) run() {
	defer close(w.out)
	defer w.store.removeWatcher(w)
	var tick <-chan time.Time
	if w.progress {
		t := w.store.cfg.Clock.NewTicker(w.store.cfg.ProgressInterval)
		defer t.Stop()
		tick = t.C()
	}
	var batch []storage.Event
	for {
		var caughtUp bool
		var err error
		batch, caughtUp, err = w.collect(batch[:0])
		if err != nil {
			w.send(storage.Event{Type: storage.EventError, Err: err})
			return
		}
		for _, ev := range batch {
			if !w.send(ev) {
				return
			}
		}
		if !caughtUp {
			continue
		}
		if w.progressWanted.Swap(false) && !w.send(w.progressEvent()) {
			return
		}
		select {
		case <-w.ctx.Done():
			return
		case <-w.wake:
		case <-tick:
			if !w.send(w.progressEvent()) {
				return
			}
		}
	}
}

func (w *watcher) progressEvent() storage.Event {
	return storage.Event{Type: storage.EventProgress, Revision: w.cursor}
}

// collect appends the events under the prefix after the cursor (at most
// maxScan ring slots) and moves the cursor; caughtUp reports that it reached
// the current revision.
func (w *watcher) collect(batch []storage.Event) ([]storage.Event, bool, error) {
	s := w.store
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return batch, false, fmt.Errorf("watch %q: %w: %w", w.prefix, storage.ErrUnavailable, errClosed)
	}
	if w.cursor < s.first {
		return batch, false, fmt.Errorf("watch %q at revision %d, history starts after %d: %w", w.prefix, w.cursor, s.first, storage.ErrCompacted)
	}
	n := int64(len(s.ring))
	end := min(s.rev, w.cursor+maxScan)
	for r := w.cursor + 1; r <= end; r++ {
		ev := &s.ring[r%n]
		if strings.HasPrefix(ev.key, w.prefix) {
			batch = append(batch, w.toEvent(ev))
		}
	}
	w.cursor = end
	return batch, end == s.rev, nil
}

func (w *watcher) toEvent(ev *event) storage.Event {
	out := storage.Event{Key: ev.key, Revision: ev.rev}
	if w.prevValues && ev.prev.exists {
		out.PrevValue = ev.prev.value
		if out.PrevValue == nil {
			out.PrevValue = []byte{}
		}
	}
	if ev.deleted {
		out.Type = storage.EventDelete
		return out
	}
	out.Type = storage.EventPut
	out.Value = ev.value
	out.CreateRevision = ev.create
	out.Created = !ev.prev.exists
	return out
}

func (w *watcher) send(ev storage.Event) bool {
	select {
	case w.out <- ev:
		return true
	case <-w.ctx.Done():
		return false
	}
}
