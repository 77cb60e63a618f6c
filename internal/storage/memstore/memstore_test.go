package memstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodeplane/nodeplane/internal/storage"
)

// eventWait bounds every wait for a watch event.
const eventWait = 10 * time.Second

func mustCreate(t *testing.T, s *Store, key, value string) int64 {
	t.Helper()
	rev, err := s.Create(t.Context(), key, []byte(value))
	if err != nil {
		t.Fatalf("Create(%q) = %v", key, err)
	}
	return rev
}

func mustUpdate(t *testing.T, s *Store, key, value string, expected int64) int64 {
	t.Helper()
	rev, err := s.Update(t.Context(), key, []byte(value), expected)
	if err != nil {
		t.Fatalf("Update(%q at %d) = %v", key, expected, err)
	}
	return rev
}

// drain reads ch until it closes and returns what it read.
func drain(t *testing.T, ch <-chan storage.Event) []storage.Event {
	t.Helper()
	timer := time.NewTimer(eventWait)
	defer timer.Stop()
	var got []storage.Event
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return got
			}
			got = append(got, ev)
		case <-timer.C:
			t.Fatalf("watch still open after %v (%d events)", eventWait, len(got))
		}
	}
}

func TestWatcherThatFallsBehindTheHistoryEndsWithErrCompacted(t *testing.T) {
	s := newTestStore(t, Config{History: 16, WatchBuffer: 1, InitialRevision: 10})
	rev := mustCreate(t, s, "/k", "0")
	ch, err := s.Watch(t.Context(), "/", storage.WatchOptions{FromRevision: rev})
	if err != nil {
		t.Fatal(err)
	}
	// Nobody reads the watch: the writes must complete all the same.
	for i := range 100 {
		rev = mustUpdate(t, s, "/k", fmt.Sprint(i+1), rev)
	}
	events := drain(t, ch)
	if len(events) == 0 {
		t.Fatal("watch closed without an event, want an ErrCompacted EventError last")
	}
	last := events[len(events)-1]
	if last.Type != storage.EventError || !errors.Is(last.Err, storage.ErrCompacted) {
		t.Errorf("last event = %+v, want an EventError with ErrCompacted", last)
	}
	for i, ev := range events[:len(events)-1] {
		if ev.Type != storage.EventPut {
			t.Errorf("event %d = %+v before the error, want a put", i, ev)
		}
	}
}

func TestHistoryBoundsReadsAtPastRevisions(t *testing.T) {
	s := newTestStore(t, Config{History: 8, InitialRevision: 100})
	r1 := mustCreate(t, s, "/a/1", "v1")
	r2 := mustCreate(t, s, "/a/2", "v1")
	r3 := mustUpdate(t, s, "/a/1", "v2", r1)
	if _, _, err := s.Delete(t.Context(), "/a/2", r2); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, "/a/0", "new")

	got, err := s.List(t.Context(), "/a/", storage.ListOptions{Revision: r2})
	if err != nil {
		t.Fatalf("List at %d = %v", r2, err)
	}
	want := []string{"/a/1=v1", "/a/2=v1"}
	if fmt.Sprint(summary(got.Items)) != fmt.Sprint(want) || got.Remaining != 0 || got.More {
		t.Errorf("List at %d = %v (remaining %d), want %v", r2, summary(got.Items), got.Remaining, want)
	}
	page, err := s.List(t.Context(), "/a/", storage.ListOptions{Revision: r3, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(summary(page.Items)) != "[/a/1=v2]" || page.Remaining != 1 || !page.More {
		t.Errorf("first page at %d = %v (remaining %d), want [/a/1=v2] and one more", r3, summary(page.Items), page.Remaining)
	}

	for i := range 10 {
		mustCreate(t, s, fmt.Sprintf("/b/%d", i), "x")
	}
	_, err = s.List(t.Context(), "/a/", storage.ListOptions{Revision: r2})
	if !errors.Is(err, storage.ErrCompacted) {
		t.Errorf("List at %d after the history moved on = %v, want ErrCompacted", r2, err)
	}
	cur, _ := s.CurrentRevision(t.Context())
	_, err = s.List(t.Context(), "/a/", storage.ListOptions{Revision: cur + 1})
	if !errors.Is(err, storage.ErrFutureRevision) {
		t.Errorf("List at a future revision = %v, want ErrFutureRevision", err)
	}
	_, err = s.Watch(t.Context(), "/a/", storage.WatchOptions{FromRevision: cur + 1})
	if !errors.Is(err, storage.ErrFutureRevision) {
		t.Errorf("Watch from a future revision = %v, want ErrFutureRevision", err)
	}
}

func summary(items []storage.KeyValue) []string {
	var out []string
	for _, kv := range items {
		out = append(out, kv.Key+"="+string(kv.Value))
	}
	return out
}

func TestConcurrentWritersGetDistinctRevisionsSeenInOrder(t *testing.T) {
	s := newTestStore(t, Config{InitialRevision: 1})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := s.Watch(ctx, "/w/", storage.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const writers, writes = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			key := fmt.Sprintf("/w/%d", w)
			rev, err := s.Create(ctx, key, []byte("0"))
			for i := 1; i < writes && err == nil; i++ {
				rev, err = s.Update(ctx, key, []byte(fmt.Sprint(i)), rev)
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	var last int64
	timer := time.NewTimer(eventWait)
	defer timer.Stop()
	for n := 0; n < writers*writes; n++ {
		select {
		case ev := <-ch:
			if ev.Type != storage.EventPut || ev.Revision != last+1 && last != 0 {
				t.Fatalf("event %d = %+v after revision %d, want the put of the next revision", n, ev, last)
			}
			last = ev.Revision
		case <-timer.C:
			t.Fatalf("got %d of %d events", n, writers*writes)
		}
	}
	if cur, _ := s.CurrentRevision(t.Context()); cur != last {
		t.Errorf("CurrentRevision = %d, last event %d", cur, last)
	}
}

func TestCleanRestartRestoresTheContentAndContinuesTheRevisions(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir, RevisionBlock: 1000, InitialRevision: 50})
	if err != nil {
		t.Fatal(err)
	}
	r1 := mustCreate(t, s, "/l/a", "a1")
	r2 := mustUpdate(t, s, "/l/a", "a2", r1)
	mustCreate(t, s, "/l/b", "b1")
	closedAt, _ := s.CurrentRevision(t.Context())
	if err := s.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}

	s2 := newTestStore(t, Config{Dir: dir, RevisionBlock: 1000})
	if cur, _ := s2.CurrentRevision(t.Context()); cur != closedAt {
		t.Errorf("CurrentRevision after a clean restart = %d, want %d", cur, closedAt)
	}
	got, err := s2.Get(t.Context(), "/l/a")
	if err != nil || string(got.Value) != "a2" || got.ModRevision != r2 || got.CreateRevision != r1 {
		t.Errorf("Get = %+v, %v; want a2 at %d created at %d", got, err, r2, r1)
	}
	// A watch from the shutdown revision goes on; one from before ends 410.
	ch, err := s2.Watch(t.Context(), "/l/", storage.WatchOptions{FromRevision: closedAt})
	if err != nil {
		t.Fatal(err)
	}
	next := mustUpdate(t, s2, "/l/b", "b2", closedAt)
	select {
	case ev := <-ch:
		if ev.Type != storage.EventPut || ev.Revision != next || next <= closedAt {
			t.Errorf("event = %+v, want the put at %d > %d", ev, next, closedAt)
		}
	case <-time.After(eventWait):
		t.Fatal("no event")
	}
	old, err := s2.Watch(t.Context(), "/l/", storage.WatchOptions{FromRevision: r1})
	if err != nil {
		t.Fatal(err)
	}
	if events := drain(t, old); len(events) != 1 || !errors.Is(events[0].Err, storage.ErrCompacted) {
		t.Errorf("watch from %d before the restart = %+v, want one ErrCompacted error", r1, events)
	}
}

func TestRestartAfterACrashNeverReusesARevision(t *testing.T) {
	dir := t.TempDir()
	crashed, err := Open(Config{Dir: dir, RevisionBlock: 8, InitialRevision: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer crashed.Close() // after the test: it stands for a dead process
	rev := mustCreate(t, crashed, "/l/a", "snapshotted")
	if err := crashed.snapshot(false); err != nil {
		t.Fatal(err)
	}
	var handedOut int64
	for i := range 20 {
		handedOut = mustUpdate(t, crashed, "/l/a", fmt.Sprint("lost", i), rev)
		rev = handedOut
		ceiling, _, err := readCeiling(filepath.Join(dir, ceilingFile))
		if err != nil || ceiling < handedOut {
			t.Fatalf("ceiling on disk %d, %v after handing out %d", ceiling, err, handedOut)
		}
	}
	lostCreate := mustCreate(t, crashed, "/l/b", "lost")
	handedOut = lostCreate

	// A new process opens the files as the crashed one left them.
	s := newTestStore(t, Config{Dir: dir, RevisionBlock: 8})
	cur, _ := s.CurrentRevision(t.Context())
	if cur < handedOut {
		t.Fatalf("CurrentRevision after the crash = %d, want >= %d (handed out before)", cur, handedOut)
	}
	got, err := s.Get(t.Context(), "/l/a")
	if err != nil || string(got.Value) != "snapshotted" {
		t.Errorf("Get(/l/a) = %+v, %v; want the snapshotted value", got, err)
	}
	if _, err := s.Get(t.Context(), "/l/b"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Get(/l/b) written after the snapshot = %v, want ErrNotFound", err)
	}
	// A client holding a revision from before the crash cannot match.
	if _, err := s.Update(t.Context(), "/l/a", []byte("x"), rev); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("Update at pre-crash revision %d = %v, want ErrConflict", rev, err)
	}
	if next := mustCreate(t, s, "/l/b", "again"); next <= handedOut {
		t.Errorf("revision %d after the crash, want > %d", next, handedOut)
	}
}

func TestUnreadableSnapshotStartsEmptyAboveTheCeiling(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir, InitialRevision: 50})
	if err != nil {
		t.Fatal(err)
	}
	handedOut := mustCreate(t, s, "/l/a", "v")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, snapshotFile), []byte("garbage that is long enough to be read"), 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := newTestStore(t, Config{Dir: dir})
	if n, _ := s2.Count(t.Context(), "/"); n != 0 {
		t.Errorf("Count = %d after an unreadable snapshot, want 0", n)
	}
	if next := mustCreate(t, s2, "/l/a", "v"); next <= handedOut {
		t.Errorf("revision %d, want > %d", next, handedOut)
	}
}

func TestOpenRejectsASnapshotWithoutItsCeiling(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir, InitialRevision: 50})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, "/l/a", "v")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, ceilingFile)); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(Config{Dir: dir}); err == nil {
		_ = s.Close()
		t.Error("Open without the ceiling file succeeded, want an error")
	}
}

func TestCallsAfterCloseFailWithErrUnavailable(t *testing.T) {
	s, err := Open(Config{})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := s.Watch(t.Context(), "/", storage.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(t.Context(), "/k", nil); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Create after Close = %v, want ErrUnavailable", err)
	}
	if events := drain(t, ch); len(events) != 1 || !errors.Is(events[0].Err, storage.ErrUnavailable) {
		t.Errorf("watch after Close = %+v, want one ErrUnavailable error", events)
	}
}

func TestRequestProgressReachesEveryCaughtUpWatch(t *testing.T) {
	s := newTestStore(t, Config{InitialRevision: 7})
	rev := mustCreate(t, s, "/p/k", "v")
	var chans []<-chan storage.Event
	for _, prefix := range []string{"/p/", "/other/"} {
		ch, err := s.Watch(t.Context(), prefix, storage.WatchOptions{FromRevision: rev})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	if err := s.RequestProgress(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i, ch := range chans {
		select {
		case ev := <-ch:
			if ev.Type != storage.EventProgress || ev.Revision != rev {
				t.Errorf("watch %d: event %+v, want progress at %d", i, ev, rev)
			}
		case <-time.After(eventWait):
			t.Fatalf("watch %d: no progress event", i)
		}
	}
}

// TestPeriodicSnapshotCarriesWritesAcrossACrash runs the store in a synctest
// bubble: its snapshot ticker runs on bubble time, so one simulated minute
// and synctest.Wait give exactly one periodic snapshot. The snapshot is
// checked before the store is closed (a close writes one too); the copy
// opened afterwards stands for the restart after the crash.
func TestPeriodicSnapshotCarriesWritesAcrossACrash(t *testing.T) {
	dir := t.TempDir()
	var rev int64
	synctest.Test(t, func(t *testing.T) {
		crashed, err := Open(Config{Dir: dir, SnapshotInterval: time.Minute, InitialRevision: 5})
		if err != nil {
			t.Fatal(err)
		}
		defer crashed.Close()
		rev = mustCreate(t, crashed, "/s/k", "in the snapshot")
		time.Sleep(time.Minute)
		synctest.Wait()
		if snap, err := readSnapshot(filepath.Join(dir, snapshotFile)); err != nil || snap.revision != rev {
			t.Fatalf("after one snapshot interval: snapshot %+v, %v; want one at revision %d", snap, err, rev)
		}
	})
	s := newTestStore(t, Config{Dir: dir})
	got, err := s.Get(t.Context(), "/s/k")
	if err != nil || string(got.Value) != "in the snapshot" || got.ModRevision != rev {
		t.Errorf("Get after the crash = %+v, %v; want the periodic snapshot's value at %d", got, err, rev)
	}
}

// The heartbeat path's write must stay allocation-free in the store: the
// value is kept, the event goes into a preallocated ring slot, and timing
// it is two clock reads and one observation of a pre-resolved histogram.
func TestUpdateDoesNotAllocate(t *testing.T) {
	metrics, err := storage.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		metrics *storage.BackendMetrics
	}{
		{"an update without metrics does not allocate", nil},
		{"an update recording its latency does not allocate", metrics.Backend("memory")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestStore(t, Config{InitialRevision: 1, Metrics: tt.metrics})
			rev := mustCreate(t, s, "/a/k", "v")
			value := []byte("renewed")
			var err error
			allocs := testing.AllocsPerRun(1000, func() {
				if rev, err = s.Update(t.Context(), "/a/k", value, rev); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("Update allocates %.1f times per call, want 0", allocs)
			}
		})
	}
}
