package storagetest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/nodeplane/nodeplane/internal/storage"
)

var watchCases = []testCase{
	{"watch from revision 0 delivers only changes made after it started", func(t *testing.T, s storage.Interface, p string) {
		mustCreate(t, s, p+"old", "v")
		ch := watch(t, s, p, storage.WatchOptions{})
		rev := mustCreate(t, s, p+"new", "v")
		got := summarize(nextEvent(t, ch))
		want := eventSummary{Type: storage.EventPut, Key: p + "new", Value: "v", Revision: rev, Created: true}
		if got != want {
			t.Errorf("event = %+v, want %+v", got, want)
		}
	}},
	{"watch without PrevValues carries no previous values", func(t *testing.T, s storage.Interface, p string) {
		ch := watch(t, s, p, storage.WatchOptions{})
		r1 := mustCreate(t, s, p+"k", "v1")
		r2 := mustUpdate(t, s, p+"k", "v2", r1)
		r3 := mustDelete(t, s, p+"k")
		want := []eventSummary{
			{Type: storage.EventPut, Key: p + "k", Value: "v1", Revision: r1, Created: true},
			{Type: storage.EventPut, Key: p + "k", Value: "v2", Revision: r2},
			{Type: storage.EventDelete, Key: p + "k", Revision: r3},
		}
		for i, w := range want {
			if got := summarize(nextEvent(t, ch)); got != w {
				t.Errorf("event %d = %+v, want %+v", i, got, w)
			}
		}
	}},
	{"watch reports creates, updates with previous values and deletes in order", func(t *testing.T, s storage.Interface, p string) {
		ch := watch(t, s, p, storage.WatchOptions{PrevValues: true})
		r1 := mustCreate(t, s, p+"k", "v1")
		r2 := mustUpdate(t, s, p+"k", "v2", r1)
		r3 := mustDelete(t, s, p+"k")
		want := []eventSummary{
			{Type: storage.EventPut, Key: p + "k", Value: "v1", Revision: r1, Created: true},
			{Type: storage.EventPut, Key: p + "k", Value: "v2", PrevValue: "v1", Revision: r2},
			{Type: storage.EventDelete, Key: p + "k", PrevValue: "v2", Revision: r3},
		}
		for i, w := range want {
			ev := nextEvent(t, ch)
			if got := summarize(ev); got != w {
				t.Errorf("event %d = %+v, want %+v", i, got, w)
			}
			if ev.Type == storage.EventPut && ev.CreateRevision != r1 {
				t.Errorf("event %d CreateRevision = %d, want %d", i, ev.CreateRevision, r1)
			}
		}
	}},
	{"watch from a revision replays the history after it", func(t *testing.T, s storage.Interface, p string) {
		r1 := mustCreate(t, s, p+"k", "v1")
		r2 := mustUpdate(t, s, p+"k", "v2", r1)
		r3 := mustDelete(t, s, p+"k")
		ch := watch(t, s, p, storage.WatchOptions{FromRevision: r1, PrevValues: true})
		want := []eventSummary{
			{Type: storage.EventPut, Key: p + "k", Value: "v2", PrevValue: "v1", Revision: r2},
			{Type: storage.EventDelete, Key: p + "k", PrevValue: "v2", Revision: r3},
		}
		for i, w := range want {
			if got := summarize(nextEvent(t, ch)); got != w {
				t.Errorf("event %d = %+v, want %+v", i, got, w)
			}
		}
	}},
	{"watch sees only its prefix", func(t *testing.T, s storage.Interface, p string) {
		ch := watch(t, s, p+"a/", storage.WatchOptions{})
		mustCreate(t, s, p+"ab", "sibling")
		mustCreate(t, s, p+"b/x", "other")
		rev := mustCreate(t, s, p+"a/x", "mine")
		if ev := nextEvent(t, ch); ev.Key != p+"a/x" || ev.Revision != rev {
			t.Errorf("first event = %+v, want %s at %d", summarize(ev), p+"a/x", rev)
		}
	}},
	{"watch with progress notification reports the revision while the prefix is quiet", func(t *testing.T, s storage.Interface, p string) {
		rev := mustCreate(t, s, p+"k", "v")
		ch := watch(t, s, p, storage.WatchOptions{FromRevision: rev, ProgressNotify: true})
		for {
			ev := nextEvent(t, ch)
			if ev.Type == storage.EventProgress {
				if ev.Revision < rev {
					t.Errorf("progress revision %d, want >= %d", ev.Revision, rev)
				}
				return
			}
			if ev.Type == storage.EventError {
				t.Fatalf("watch failed: %v", ev.Err)
			}
		}
	}},
	{"watch from a compacted revision ends with an ErrCompacted error event", func(t *testing.T, s storage.Interface, p string) {
		r1 := mustCreate(t, s, p+"k", "v1")
		mustUpdate(t, s, p+"k", "v2", r1)
		if err := s.Compact(t.Context(), mustRevision(t, s)); err != nil {
			t.Fatalf("Compact = %v", err)
		}
		ch, err := s.Watch(t.Context(), p, storage.WatchOptions{FromRevision: r1 - 1})
		if err != nil {
			// Failing at once is not what the contract says.
			t.Fatalf("Watch = %v, want an EventError in the stream", err)
		}
		events := waitClosed(t, ch)
		if len(events) != 1 || events[0].Type != storage.EventError || !errors.Is(events[0].Err, storage.ErrCompacted) {
			t.Errorf("events = %+v, want one EventError with ErrCompacted", events)
		}
	}},
	{"watch from just below the compaction point delivers the change at that point", func(t *testing.T, s storage.Interface, p string) {
		r1 := mustCreate(t, s, p+"k", "v1")
		r2 := mustUpdate(t, s, p+"k", "v2", r1)
		if err := s.Compact(t.Context(), r2); err != nil {
			t.Fatalf("Compact = %v", err)
		}
		for _, progress := range []bool{false, true} {
			ch := watch(t, s, p, storage.WatchOptions{FromRevision: r1, ProgressNotify: progress})
			ev := nextEvent(t, ch)
			for ev.Type == storage.EventProgress {
				ev = nextEvent(t, ch)
			}
			if ev.Type != storage.EventPut || string(ev.Value) != "v2" || ev.Revision != r2 {
				t.Errorf("with progress %v: event = %+v, want the put of v2 at %d", progress, summarize(ev), r2)
			}
		}
	}},
	{"cancelling the watch context closes the channel without an error", func(t *testing.T, s storage.Interface, p string) {
		ctx, cancel := context.WithCancel(t.Context())
		ch, err := s.Watch(ctx, p, storage.WatchOptions{})
		if err != nil {
			t.Fatalf("Watch = %v", err)
		}
		cancel()
		for _, ev := range waitClosed(t, ch) {
			if ev.Type == storage.EventError {
				t.Errorf("got %+v after cancel, want the channel closed quietly", ev)
			}
		}
	}},
	{"many watchers of one prefix each see every event", func(t *testing.T, s storage.Interface, p string) {
		const watchers = 5
		var chans []<-chan storage.Event
		for range watchers {
			chans = append(chans, watch(t, s, p, storage.WatchOptions{}))
		}
		var revs []int64
		for _, k := range []string{"a", "b", "c"} {
			revs = append(revs, mustCreate(t, s, p+k, "v"))
		}
		for i, ch := range chans {
			var got []int64
			for range revs {
				got = append(got, nextEvent(t, ch).Revision)
			}
			if !slices.Equal(got, revs) {
				t.Errorf("watcher %d revisions = %v, want %v", i, got, revs)
			}
		}
	}},
}
