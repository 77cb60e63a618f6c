package etcd

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodeplane/nodeplane/internal/storage"
)

// watchBuffer is how many events a watch holds for a slow consumer before
// the translating goroutine, and then etcd's own buffers, push back.
const watchBuffer = 128

// errWatchClosed reports that etcd ended a watch nobody cancelled, for
// example because the client was closed.
var errWatchClosed = errors.New("watch closed by the etcd client")

// Watch streams the changes under prefix with revision > FromRevision. With
// FromRevision 0 it first reads the current revision (a linearizable read),
// so every change committed after Watch returns is delivered even when the
// member serving the watch lags behind the one that took the write.
//
// The stream ends with an EventError when etcd cancels the watch (ErrCompacted
// when FromRevision has been compacted, ErrUnavailable when the member lost
// its leader or the client was closed); it ends without one when ctx is
// cancelled. The channel is closed in both cases.
func (s *Store) Watch(ctx context.Context, prefix string, opts storage.WatchOptions) (<-chan storage.Event, error) {
	defer s.observe(storage.OpWatch, s.clock.Now())
	if opts.FromRevision < 0 {
		return nil, fmt.Errorf("watch %q from revision %d: negative revision", prefix, opts.FromRevision)
	}
	from := opts.FromRevision
	if from == 0 {
		resp, err := s.kv.Get(ctx, revisionProbeKey, clientv3.WithCountOnly())
		if err != nil {
			return nil, wrapError("watch", prefix, err)
		}
		from = resp.Header.Revision
	}
	// etcd answers progress requests (periodic or RequestProgress) on a
	// stream only while no watcher on it starts ahead of the store, so
	// every watch starts at from itself and drops the events of from.
	ctx, cancel := context.WithCancel(ctx)
	w := &watch{
		store:      s,
		prefix:     prefix,
		from:       from,
		progress:   opts.ProgressNotify,
		prevValues: opts.PrevValues,
		ctx:        ctx,
		out:        make(chan storage.Event, watchBuffer),
	}
	start := from
	etcdEvents := w.start(start)
	go func() {
		defer cancel()
		defer close(w.out)
		w.run(etcdEvents, start)
	}()
	return w.out, nil
}

// watch translates one etcd watch into storage events.
type watch struct {
	store    *Store
	prefix   string
	from     int64 // deliver changes after this revision
	progress bool
	// prevValues asks etcd for each event's previous value.
	prevValues bool
	ctx        context.Context
	out        chan storage.Event
}

// start opens the etcd watch at revision start.
func (w *watch) start(start int64) clientv3.WatchChan {
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(start)}
	if w.prevValues {
		opts = append(opts, clientv3.WithPrevKV())
	}
	if w.progress {
		opts = append(opts, clientv3.WithProgressNotify())
	}
	return w.store.watcher.Watch(watchContext(w.ctx), w.prefix, opts...)
}

// watchContext marks ctx for etcd watches: WithRequireLeader makes a member
// that loses its leader cancel the watch instead of letting it go silently
// stale. clientv3 multiplexes the watches whose contexts carry the same
// metadata onto one stream, and RequestProgress reaches only the stream of
// its own context's metadata, so it must use this too.
func watchContext(ctx context.Context) context.Context {
	return clientv3.WithRequireLeader(ctx)
}

func (w *watch) run(etcdEvents clientv3.WatchChan, start int64) {
	for {
		resp, ok := <-etcdEvents
		if !ok {
			if w.ctx.Err() == nil {
				w.send(storage.Event{Type: storage.EventError, Err: fmt.Errorf("watch %q: %w: %w", w.prefix, storage.ErrUnavailable, errWatchClosed)})
			}
			return
		}
		if start == w.from && resp.CompactRevision == w.from+1 {
			// Compacted exactly at from+1: what was asked for is intact;
			// only starting at from reached one revision too far. Watch
			// from from+1; progress resumes after the next write.
			start = w.from + 1
			etcdEvents = w.start(start)
			continue
		}
		if !w.forward(resp) {
			return
		}
	}
}

// forward translates one etcd response; false means the stream is over.
func (w *watch) forward(resp clientv3.WatchResponse) bool {
	if err := resp.Err(); err != nil {
		if w.ctx.Err() != nil {
			return false // cancelled by the caller: close quietly
		}
		w.send(storage.Event{Type: storage.EventError, Err: wrapError("watch", w.prefix, err)})
		return false
	}
	if resp.IsProgressNotify() {
		return w.send(storage.Event{Type: storage.EventProgress, Revision: resp.Header.Revision})
	}
	for _, ev := range resp.Events {
		if ev.Kv.ModRevision <= w.from {
			continue
		}
		if !w.send(toEvent(ev)) {
			return false
		}
	}
	return true
}

func (w *watch) send(ev storage.Event) bool {
	select {
	case w.out <- ev:
		return true
	case <-w.ctx.Done():
		return false
	}
}

func toEvent(ev *clientv3.Event) storage.Event {
	out := storage.Event{
		Key: string(ev.Kv.Key),
		// For a delete, Kv.ModRevision is the revision of the delete.
		Revision: ev.Kv.ModRevision,
	}
	if ev.PrevKv != nil {
		out.PrevValue = ev.PrevKv.Value
	}
	if ev.Type == clientv3.EventTypeDelete {
		out.Type = storage.EventDelete
		return out
	}
	out.Type = storage.EventPut
	out.Value = ev.Kv.Value
	out.CreateRevision = ev.Kv.CreateRevision
	out.Created = ev.IsCreate()
	return out
}
