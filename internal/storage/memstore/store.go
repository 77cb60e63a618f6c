// Package memstore implements storage.Interface in memory, for soft state
// (node leases) that must be cheap to write and need not wait for a disk.
//
// It owns one revision counter, the current value of every key (a map plus
// a sorted key slice for ordered lists), a bounded ring of recent events
// (watches resume from it; lists at a past revision undo it), the views
// paginated lists continue from (views.go) and the files
// that carry it across restarts (persist.go): a snapshot written
// periodically and at Close, and a revision ceiling reserved on disk ahead of
// use, so that after a crash the counter restarts above every revision ever
// handed out and a resourceVersion is never reused.
//
// A write is durable only in that sense: the key's value written since the
// last snapshot may be lost in a crash, its revision never reappears.
//
// The store keeps the value slices callers pass to Create and Update and
// returns them from reads and watch events: callers must not modify a slice
// after passing it, nor one they got back (the API server encodes every
// object into a fresh slice and only decodes what it reads).
//
// It is a single-process store: it must not back a resource that several
// API servers share.
package memstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/storage"
)

// Config configures a Store.
type Config struct {
	// Dir holds the snapshot and the revision ceiling. Empty: nothing is
	// persisted (tests), and revisions start at InitialRevision.
	Dir string
	// History is how many recent events the store keeps (one per write).
	// Watches resume and lists read at a past revision only within it (a
	// paginated list's later pages excepted: they read the view its first
	// page kept, views.go); a watcher that falls further behind gets
	// ErrCompacted and must list again. At 10,000 writes/s the default
	// covers 6.5 s.
	History int
	// SnapshotInterval is how often the content is written to Dir; what was
	// written since the last snapshot is lost in a crash (not at Close).
	// 0 disables periodic snapshots.
	SnapshotInterval time.Duration
	// RevisionBlock is how many revisions are reserved on disk at a time;
	// the next block is reserved in the background when half of the
	// current one is used, so writes wait for the disk only if a whole half
	// block is used up during one fsync. A crash skips at most one block.
	RevisionBlock int64
	// InitialRevision is the lowest revision the store starts at (the
	// first write gets at least InitialRevision+1), whatever Dir holds. A
	// store that replaces another one for the same keys passes a value at
	// or above anything the other one handed out.
	InitialRevision int64
	// ProgressInterval is how often a quiet watch that asked for
	// ProgressNotify gets an EventProgress.
	ProgressInterval time.Duration
	// WatchBuffer is the channel capacity of each watch.
	WatchBuffer int
	// Metrics records request latencies when set:
	// storage.Metrics.Backend("memory"). It costs two clock reads and one
	// histogram observation per request.
	Metrics *storage.BackendMetrics
	// Clock drives the snapshots and progress notifications, and times
	// requests for Metrics. Default: the real clock.
	Clock clock.WithTicker
	// Logger reports snapshot and reservation failures (they do not stop
	// the store unless a write finds no reserved revision left).
	Logger *slog.Logger
}

// DefaultConfig returns the defaults, with no Dir.
func DefaultConfig() Config {
	return Config{
		History:          1 << 16,
		SnapshotInterval: time.Minute,
		RevisionBlock:    1 << 20,
		ProgressInterval: 5 * time.Second,
		WatchBuffer:      128,
		Clock:            clock.RealClock{},
		Logger:           slog.Default(),
	}
}

// errClosed is returned by every call after Close.
var errClosed = errors.New("memstore closed")

// entry is a key's current value.
type entry struct {
	key            string
	value          []byte
	modRevision    int64
	createRevision int64
}

// state is a key's value at some revision, or its absence.
type state struct {
	exists         bool
	value          []byte
	modRevision    int64
	createRevision int64
}

// event is one write in the history ring; prev is the key's state before
// it, which both PrevValues and lists at a past revision need.
type event struct {
	key     string
	rev     int64
	deleted bool
	value   []byte
	create  int64
	prev    state
}

// Store is the in-memory storage.Interface.
type Store struct {
	cfg Config

	mu      sync.RWMutex
	rev     int64
	entries map[string]*entry
	keys    []string // sorted keys of entries
	ring    []event  // event of revision r at r % len(ring)
	// first is the oldest revision the ring can answer for: every event
	// after it is in the ring.
	first, compacted int64
	watchers         []*watcher // copy on write
	closed           bool
	views            listViews // what paginated lists continue from (views.go)

	persist *persister // nil without Dir
	stop    chan struct{}
	done    sync.WaitGroup
}

var _ storage.Interface = (*Store)(nil)

// Open returns a store, restored from cfg.Dir when it holds one, and starts
// its periodic snapshots. Close stops them and writes a last snapshot.
func Open(cfg Config) (*Store, error) {
	def := DefaultConfig()
	if cfg.History <= 0 {
		cfg.History = def.History
	}
	if cfg.RevisionBlock <= 0 {
		cfg.RevisionBlock = def.RevisionBlock
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = def.ProgressInterval
	}
	if cfg.WatchBuffer <= 0 {
		cfg.WatchBuffer = def.WatchBuffer
	}
	if cfg.Clock == nil {
		cfg.Clock = def.Clock
	}
	if cfg.Logger == nil {
		cfg.Logger = def.Logger
	}
	if cfg.InitialRevision < 0 {
		return nil, fmt.Errorf("memstore: negative initial revision %d", cfg.InitialRevision)
	}
	s := &Store{
		cfg:     cfg,
		entries: map[string]*entry{},
		ring:    make([]event, cfg.History),
		stop:    make(chan struct{}),
		rev:     cfg.InitialRevision,
	}
	if cfg.Dir != "" {
		p, restored, err := openPersister(cfg.Dir, cfg.RevisionBlock, cfg.InitialRevision, cfg.Logger)
		if err != nil {
			return nil, err
		}
		s.persist = p
		p.raised = func(ceiling int64, err error) {
			s.mu.Lock()
			p.reserving = false
			if err == nil && ceiling > p.ceiling {
				p.ceiling = ceiling
			}
			s.mu.Unlock()
			if err != nil {
				cfg.Logger.Warn("reserve lease revisions", "err", err)
			}
		}
		s.rev = restored.revision
		for _, kv := range restored.items {
			s.entries[kv.Key] = &entry{key: kv.Key, value: kv.Value, modRevision: kv.ModRevision, createRevision: kv.CreateRevision}
			s.keys = append(s.keys, kv.Key)
		}
		slices.Sort(s.keys)
		if cfg.SnapshotInterval > 0 {
			s.done.Add(1)
			go s.snapshotLoop()
		}
	}
	s.first = s.rev
	return s, nil
}

// now is when a request begins, read only if its latency is recorded.
func (s *Store) now() time.Time {
	if s.cfg.Metrics == nil {
		return time.Time{}
	}
	return s.cfg.Clock.Now()
}

// observe records the latency of one request that began at start (now).
// Requests call it with defer, so the clock is read when they begin.
func (s *Store) observe(op storage.Operation, start time.Time) {
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.Observe(op, s.cfg.Clock.Since(start))
	}
}

// PassesValuesThrough reports that watch events carry the slice a write
// was given (storage.ValuesPassedThrough): values are kept, not copied.
func (s *Store) PassesValuesThrough() bool { return true }

// Get returns the key's current value.
func (s *Store) Get(_ context.Context, key string) (storage.KeyValue, error) {
	defer s.observe(storage.OpGet, s.now())
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return storage.KeyValue{}, fmt.Errorf("get %q: %w: %w", key, storage.ErrUnavailable, errClosed)
	}
	e, ok := s.entries[key]
	if !ok {
		return storage.KeyValue{}, fmt.Errorf("get %q: %w", key, storage.ErrNotFound)
	}
	return e.keyValue(), nil
}

func (e *entry) keyValue() storage.KeyValue {
	return storage.KeyValue{Key: e.key, Value: e.value, ModRevision: e.modRevision, CreateRevision: e.createRevision}
}

// Create stores value under key if the key is absent.
func (s *Store) Create(_ context.Context, key string, value []byte) (int64, error) {
	defer s.observe(storage.OpCreate, s.now())
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.entries[key]; ok {
		return 0, fmt.Errorf("create %q: %w", key, storage.ErrAlreadyExists)
	}
	rev, err := s.nextRevisionLocked("create", key)
	if err != nil {
		return 0, err
	}
	e := &entry{key: key, value: value, modRevision: rev, createRevision: rev}
	s.entries[key] = e
	i, _ := slices.BinarySearch(s.keys, key)
	s.keys = slices.Insert(s.keys, i, key)
	s.recordLocked(event{key: key, rev: rev, value: value, create: rev})
	return rev, nil
}

// Update replaces the value if the key's ModRevision is expectedRevision.
func (s *Store) Update(_ context.Context, key string, value []byte, expectedRevision int64) (int64, error) {
	defer s.observe(storage.OpUpdate, s.now())
	if expectedRevision <= 0 {
		return 0, fmt.Errorf("update %q at revision %d: expected revision must be positive", key, expectedRevision)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[key]
	if !ok {
		return 0, fmt.Errorf("update %q: %w", key, storage.ErrNotFound)
	}
	if e.modRevision != expectedRevision {
		return 0, &storage.ConflictError{Key: key, Current: e.keyValue()}
	}
	rev, err := s.nextRevisionLocked("update", key)
	if err != nil {
		return 0, err
	}
	prev := state{exists: true, value: e.value, modRevision: e.modRevision, createRevision: e.createRevision}
	e.value, e.modRevision = value, rev
	s.recordLocked(event{key: e.key, rev: rev, value: value, create: e.createRevision, prev: prev})
	return rev, nil
}

// Delete removes the key; expectedRevision 0 means unconditional.
func (s *Store) Delete(_ context.Context, key string, expectedRevision int64) (storage.KeyValue, int64, error) {
	defer s.observe(storage.OpDelete, s.now())
	if expectedRevision < 0 {
		return storage.KeyValue{}, 0, fmt.Errorf("delete %q at revision %d: negative revision", key, expectedRevision)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[key]
	if !ok {
		return storage.KeyValue{}, 0, fmt.Errorf("delete %q: %w", key, storage.ErrNotFound)
	}
	if expectedRevision != 0 && e.modRevision != expectedRevision {
		return storage.KeyValue{}, 0, &storage.ConflictError{Key: key, Current: e.keyValue()}
	}
	rev, err := s.nextRevisionLocked("delete", key)
	if err != nil {
		return storage.KeyValue{}, 0, err
	}
	delete(s.entries, key)
	if i, found := slices.BinarySearch(s.keys, key); found {
		s.keys = slices.Delete(s.keys, i, i+1)
	}
	prev := state{exists: true, value: e.value, modRevision: e.modRevision, createRevision: e.createRevision}
	s.recordLocked(event{key: e.key, rev: rev, deleted: true, prev: prev})
	return e.keyValue(), rev, nil
}

// nextRevisionLocked returns the revision of the write being made, once it
// lies under the ceiling reserved on disk.
func (s *Store) nextRevisionLocked(op, key string) (int64, error) {
	if s.closed {
		return 0, fmt.Errorf("%s %q: %w: %w", op, key, storage.ErrUnavailable, errClosed)
	}
	next := s.rev + 1
	if s.persist != nil {
		if err := s.persist.reserve(next); err != nil {
			return 0, fmt.Errorf("%s %q: %w: %w", op, key, storage.ErrUnavailable, err)
		}
	}
	s.rev = next
	return next, nil
}

// recordLocked puts ev in the ring and wakes the watchers of its key.
func (s *Store) recordLocked(ev event) {
	n := int64(len(s.ring))
	s.ring[ev.rev%n] = ev
	if floor := ev.rev - n; floor > s.first {
		s.first = floor
	}
	for _, w := range s.watchers {
		if strings.HasPrefix(ev.key, w.prefix) {
			w.notify()
		}
	}
}

// CurrentRevision returns the revision of the latest write.
func (s *Store) CurrentRevision(context.Context) (int64, error) {
	defer s.observe(storage.OpCurrentRevision, s.now())
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, fmt.Errorf("read current revision: %w: %w", storage.ErrUnavailable, errClosed)
	}
	return s.rev, nil
}

// Compact drops the history before revision: reads below it fail with
// ErrCompacted, and so do watches that still need an event before it.
func (s *Store) Compact(_ context.Context, revision int64) error {
	defer s.observe(storage.OpCompact, s.now())
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("compact to revision %d: %w: %w", revision, storage.ErrUnavailable, errClosed)
	}
	if revision > s.rev {
		return fmt.Errorf("compact to revision %d (current %d): %w", revision, s.rev, storage.ErrFutureRevision)
	}
	if revision <= s.compacted {
		return nil
	}
	s.compacted = revision
	s.views.dropBelow(revision)
	// Watches from revision-1 need the event of revision itself.
	for r := max(s.first+1, s.rev-int64(len(s.ring))+1); r < revision; r++ {
		s.ring[r%int64(len(s.ring))] = event{}
	}
	if revision-1 > s.first {
		s.first = revision - 1
	}
	return nil
}

// Count returns the number of keys under prefix.
func (s *Store) Count(_ context.Context, prefix string) (int64, error) {
	defer s.observe(storage.OpCount, s.now())
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, fmt.Errorf("count %q: %w: %w", prefix, storage.ErrUnavailable, errClosed)
	}
	i0, i1 := s.rangeLocked(prefix, prefix)
	return int64(i1 - i0), nil
}

// rangeLocked returns the indexes in keys of the keys under prefix that
// are >= start.
func (s *Store) rangeLocked(start, prefix string) (int, int) {
	i0 := sort.SearchStrings(s.keys, start)
	end, bounded := prefixEnd(prefix)
	if !bounded {
		return i0, len(s.keys)
	}
	return i0, max(i0, sort.SearchStrings(s.keys, end))
}

// prefixEnd returns the smallest key greater than every key with prefix;
// false when there is none (the prefix is empty or all 0xff).
func prefixEnd(prefix string) (string, bool) {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1]), true
		}
	}
	return "", false
}

// List returns one page of the keys under prefix at opts.Revision (0: the
// current one). A past revision is read by undoing, on top of the current
// values, the events after it; it must lie within the history.
func (s *Store) List(_ context.Context, prefix string, opts storage.ListOptions) (storage.ListResult, error) {
	defer s.observe(storage.OpList, s.now())
	start, err := opts.Start(prefix)
	if err != nil {
		return storage.ListResult{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return storage.ListResult{}, fmt.Errorf("list %q: %w: %w", prefix, storage.ErrUnavailable, errClosed)
	}
	rev := opts.Revision
	if rev == 0 {
		rev = s.rev
	}
	if rev > s.rev {
		return storage.ListResult{}, fmt.Errorf("list %q at revision %d (current %d): %w", prefix, rev, s.rev, storage.ErrFutureRevision)
	}
	limit := int(opts.Limit)
	if limit == 0 {
		limit = -1
	}
	if rev < s.compacted {
		return storage.ListResult{}, fmt.Errorf("list %q at revision %d: %w", prefix, rev, storage.ErrCompacted)
	}
	if rev != s.rev {
		if v := s.views.find(rev, prefix); v != nil {
			return v.page(start, limit), nil
		}
	}
	if rev < s.first {
		return storage.ListResult{}, fmt.Errorf("list %q at revision %d: %w", prefix, rev, storage.ErrCompacted)
	}
	i0, i1 := s.rangeLocked(start, prefix)
	overlay := s.undoLocked(rev, start, prefix)
	res := storage.ListResult{Revision: rev}
	if limit >= 0 && opts.StartKey == "" && rev == s.rev && i1-i0 > limit {
		// The first page of a paginated list: keep what the next pages
		// will read.
		v := s.newListViewLocked(prefix)
		s.views.add(v)
		return v.page(start, limit), nil
	}
	if len(overlay) == 0 {
		n := i1 - i0
		if limit >= 0 && limit < n {
			n = limit
		}
		res.Items = make([]storage.KeyValue, n)
		for i := range n {
			res.Items[i] = s.entries[s.keys[i0+i]].keyValue()
		}
		res.Remaining = int64(i1 - i0 - n)
		res.More = res.Remaining > 0
		return res, nil
	}
	return s.mergeLocked(res, overlay, s.keys[i0:i1], limit), nil
}

// undoLocked returns the state at rev of every key in [start, prefix end)
// written after rev.
func (s *Store) undoLocked(rev int64, start, prefix string) map[string]state {
	if rev == s.rev {
		return nil
	}
	end, bounded := prefixEnd(prefix)
	overlay := map[string]state{}
	n := int64(len(s.ring))
	for r := s.rev; r > rev; r-- {
		ev := &s.ring[r%n]
		if ev.key < start || (bounded && ev.key >= end) {
			continue
		}
		overlay[ev.key] = ev.prev // older events overwrite newer ones
	}
	return overlay
}

// mergeLocked pages through the current keys with the overlay's past
// states in place of their current ones.
func (s *Store) mergeLocked(res storage.ListResult, overlay map[string]state, current []string, limit int) storage.ListResult {
	past := make([]string, 0, len(overlay))
	total := len(current)
	for k, st := range overlay {
		past = append(past, k)
		_, now := s.entries[k]
		switch {
		case st.exists && !now:
			total++
		case !st.exists && now:
			total--
		}
	}
	slices.Sort(past)
	i, j := 0, 0
	for (i < len(current) || j < len(past)) && (limit < 0 || len(res.Items) < limit) {
		var key string
		switch {
		case j >= len(past) || (i < len(current) && current[i] < past[j]):
			key = current[i]
			i++
			res.Items = append(res.Items, s.entries[key].keyValue())
			continue
		case i < len(current) && current[i] == past[j]:
			key = past[j]
			i++
			j++
		default:
			key = past[j]
			j++
		}
		if st := overlay[key]; st.exists {
			res.Items = append(res.Items, storage.KeyValue{Key: key, Value: st.value, ModRevision: st.modRevision, CreateRevision: st.createRevision})
		}
	}
	res.Remaining = int64(total - len(res.Items))
	res.More = res.Remaining > 0
	return res
}

// Close stops the snapshots, writes a last one, and ends every watch with
// ErrUnavailable. Later calls fail with ErrUnavailable.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for _, w := range s.watchers {
		w.notify()
	}
	s.mu.Unlock()
	close(s.stop)
	s.done.Wait()
	if s.persist == nil {
		return nil
	}
	return s.snapshot(true)
}
