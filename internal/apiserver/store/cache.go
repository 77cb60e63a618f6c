package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodeplane/nodeplane/internal/storage"
)

// ErrExpired: a watch asked to resume from a revision older than the cache's
// history window (the API answers 410 Gone / Expired).
var ErrExpired = errors.New("resource version too old")

// ErrTooLargeRV: the cache did not reach the requested revision in time.
var ErrTooLargeRV = errors.New("too large resource version")

// ErrNotReady: the watch cache has not loaded yet.
var ErrNotReady = errors.New("watch cache is not ready")

// freshnessTimeout bounds how long a request waits for the cache to reach a
// requested revision.
const freshnessTimeout = 3 * time.Second

// progressRetry is how often a waiting request repeats its progress request.
const progressRetry = 50 * time.Millisecond

// listPageSize is the storage page size used to (re)load the cache.
const listPageSize = 5000

// progressRequester is implemented by stores that can be asked to send a
// progress event on every watch (etcd's RequestProgress).
type progressRequester interface {
	RequestProgress(ctx context.Context) error
}

type entry struct {
	obj    runtime.Object
	fields fieldSet
}

// newEntry caches obj with its field-selector fields.
func (c *cache) newEntry(obj runtime.Object) *entry {
	return &entry{obj: obj, fields: c.s.fieldsOf(obj)}
}

// fieldSet is a cached object's field-selector fields as name, value
// pairs in a short slice, searched in order (two to four fields). A
// fields.Set is a map: about 1 KB per cached object for two or three
// fields, kept for every object and every version in the history; the
// slice is about 100 bytes and is built without a map.
type fieldSet []string

// fieldsOf returns obj's field-selector fields.
func (s *Store) fieldsOf(obj runtime.Object) fieldSet {
	n := s.fieldsLen.Load()
	f := s.cfg.Fields(make([]string, 0, n), obj)
	if int32(len(f)) != n {
		s.fieldsLen.Store(int32(len(f)))
	}
	return f
}

// Has implements fields.Fields.
func (f fieldSet) Has(name string) bool {
	_, ok := f.lookup(name)
	return ok
}

// Get implements fields.Fields: the value, or "" when there is no such field.
func (f fieldSet) Get(name string) string {
	v, _ := f.lookup(name)
	return v
}

func (f fieldSet) lookup(name string) (string, bool) {
	for i := 0; i+1 < len(f); i += 2 {
		if f[i] == name {
			return f[i+1], true
		}
	}
	return "", false
}

// event is one change in the cache's history.
type event struct {
	key     string
	rv      int64
	deleted bool
	// cur is the object after the change (nil for deletes).
	cur *entry
	// prev is the object before the change (nil for creates). For deletes
	// it carries the delete's resourceVersion.
	prev *entry
}

type cache struct {
	s *Store

	mu      sync.RWMutex
	objects map[string]*entry
	rv      int64
	ready   bool
	// rvCh is closed (and replaced) when rv advances and a request waits
	// on it (rvWaited, set under mu's read lock by the waiter): events
	// nobody waits for allocate no channel.
	rvCh     chan struct{}
	rvWaited atomic.Bool

	// history is a ring of the most recent events; oldest is the smallest
	// revision a watch may resume from.
	history []*event
	head    int // index of the oldest event
	count   int
	oldest  int64

	unindexed map[*Watcher]struct{}
	indexed   map[string]map[string]map[*Watcher]struct{} // field → value → watchers

	progressWanted chan struct{}

	// handed holds, by key, the writes of this store whose storage events
	// have not been applied yet (Store.hands only): the value slice the
	// write stored and a copy of the object it wrote, taken by apply
	// instead of decoding that very value again.
	handMu sync.Mutex
	handed map[string]handedWrite
}

func newCache(s *Store) *cache {
	return &cache{
		s:              s,
		objects:        map[string]*entry{},
		rvCh:           make(chan struct{}),
		history:        make([]*event, s.cfg.HistorySize),
		unindexed:      map[*Watcher]struct{}{},
		indexed:        map[string]map[string]map[*Watcher]struct{}{},
		progressWanted: make(chan struct{}, 1),
		handed:         map[string]handedWrite{},
	}
}

func (c *cache) isReady() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.ready
}

func (c *cache) currentRV() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.rv
}

func (c *cache) get(key string) (runtime.Object, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.ready {
		return nil, ErrNotReady
	}
	e, ok := c.objects[key]
	if !ok {
		return nil, fmt.Errorf("%s: %w", key, storage.ErrNotFound)
	}
	return e.obj, nil
}

func (c *cache) list(p Predicate) ([]runtime.Object, int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []runtime.Object
	for key, e := range c.objects {
		if c.s.inNamespace(p, key) && p.matches(e.obj, e.fields) {
			out = append(out, e.obj)
		}
	}
	return out, c.rv
}

// waitFor blocks until the cache reflects at least rv, asking storage for a
// progress notification so a quiet prefix catches up quickly.
func (c *cache) waitFor(ctx context.Context, rv int64) error {
	deadline := c.s.cfg.Clock.NewTimer(freshnessTimeout)
	defer deadline.Stop()
	// etcd answers a progress request only when every watch on the stream
	// has caught up, and drops it otherwise: ask again while waiting.
	retry := c.s.cfg.Clock.NewTicker(progressRetry)
	defer retry.Stop()
	for {
		c.mu.RLock()
		ready, cur, ch := c.ready, c.rv, c.rvCh
		reached := ready && cur >= rv
		if !reached {
			c.rvWaited.Store(true)
		}
		c.mu.RUnlock()
		if reached {
			return nil
		}
		if ready {
			c.requestProgress()
		}
		select {
		case <-ch:
		case <-retry.C():
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C():
			if !ready {
				return ErrNotReady
			}
			return fmt.Errorf("waiting for revision %d (cache at %d): %w", rv, cur, ErrTooLargeRV)
		}
	}
}

func (c *cache) requestProgress() {
	select {
	case c.progressWanted <- struct{}{}:
	default:
	}
}

// run loads the cache and follows the storage watch, reloading after errors.
func (c *cache) run(ctx context.Context) {
	log := c.s.cfg.Logger.With("resource", c.s.cfg.Resource.String())
	go c.progressLoop(ctx)
	backoff := 100 * time.Millisecond
	loaded := false
	for ctx.Err() == nil {
		var err error
		if !loaded {
			var rev int64
			if rev, err = c.load(ctx); err == nil {
				loaded = true
				backoff = 100 * time.Millisecond
				err = c.follow(ctx, rev)
			}
		} else {
			// A broken storage watch (a member lost its leader, a network
			// blip) resumes from the last applied revision: watchers keep
			// going. Only a compacted revision forces a reload.
			err = c.follow(ctx, c.currentRV())
		}
		if errors.Is(err, storage.ErrCompacted) {
			loaded = false
		}
		if ctx.Err() != nil {
			break
		}
		log.Warn("watch cache resuming", "err", err, "reload", !loaded)
		select {
		case <-ctx.Done():
		case <-c.s.cfg.Clock.After(backoff):
		}
		if backoff < 5*time.Second {
			backoff *= 2
		}
	}
	c.terminateAll(nil)
}

func (c *cache) progressLoop(ctx context.Context) {
	pr, ok := c.s.cfg.Storage.(progressRequester)
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.progressWanted:
			if ok {
				if err := pr.RequestProgress(ctx); err != nil && ctx.Err() == nil {
					c.s.cfg.Logger.Debug("request progress", "err", err)
				}
			}
		}
	}
}

// load lists the whole prefix at one revision and replaces the cache state.
// Watchers are terminated: they resume from their last revision.
func (c *cache) load(ctx context.Context) (int64, error) {
	c.dropHanded()
	objects := map[string]*entry{}
	var rev int64
	key := ""
	for {
		res, err := c.s.cfg.Storage.List(ctx, c.s.cfg.Prefix+"/", storage.ListOptions{Revision: rev, Limit: listPageSize, StartKey: key})
		if err != nil {
			return 0, fmt.Errorf("list %s: %w", c.s.cfg.Prefix, err)
		}
		rev = res.Revision
		for _, kv := range res.Items {
			obj, err := c.s.decodeCached(kv.Value, kv.ModRevision)
			if err != nil {
				return 0, err
			}
			objects[kv.Key] = c.newEntry(obj)
		}
		if !res.More || len(res.Items) == 0 {
			break
		}
		key = res.Items[len(res.Items)-1].Key + "\x00"
	}
	c.terminateAll(ErrExpired)
	c.mu.Lock()
	c.objects = objects
	c.head, c.count = 0, 0
	for i := range c.history {
		c.history[i] = nil
	}
	c.oldest = rev
	c.ready = true
	c.advanceLocked(rev)
	c.mu.Unlock()
	return rev, nil
}

func (c *cache) advanceLocked(rv int64) {
	if rv <= c.rv {
		return
	}
	c.rv = rv
	if c.rvWaited.Load() {
		close(c.rvCh)
		c.rvCh = make(chan struct{})
		c.rvWaited.Store(false)
	}
}

// follow applies storage events until the watch fails.
func (c *cache) follow(ctx context.Context, from int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := c.s.cfg.Storage.Watch(wctx, c.s.cfg.Prefix+"/", storage.WatchOptions{FromRevision: from, ProgressNotify: true})
	if err != nil {
		return fmt.Errorf("watch %s: %w", c.s.cfg.Prefix, err)
	}
	ticker := c.s.cfg.Clock.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-ticker.C():
			c.sendBookmarks(now)
		case ev, ok := <-ch:
			if !ok {
				return errors.New("storage watch closed")
			}
			switch ev.Type {
			case storage.EventProgress:
				c.mu.Lock()
				c.advanceLocked(ev.Revision)
				c.mu.Unlock()
			case storage.EventError:
				return ev.Err
			case storage.EventPut, storage.EventDelete:
				if err := c.apply(ev); err != nil {
					return err
				}
			}
		}
	}
}

// apply records one storage event and fans it out.
func (c *cache) apply(ev storage.Event) error {
	e := &event{key: ev.Key, rv: ev.Revision}
	var handed runtime.Object
	if c.s.hands {
		handed = c.takeHanded(ev.Key, ev.Value)
	}
	switch {
	case ev.Type == storage.EventDelete:
		e.deleted = true
	case handed != nil:
		if err := setRV(handed, ev.Revision); err != nil {
			return err
		}
		e.cur = c.newEntry(handed)
	default:
		obj, err := c.s.decodeCached(ev.Value, ev.Revision)
		if err != nil {
			return err
		}
		e.cur = c.newEntry(obj)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ev.Revision <= c.rv {
		return nil // already reflected by the load
	}
	if prev, ok := c.objects[ev.Key]; ok {
		e.prev = prev
	}
	if e.deleted {
		if e.prev == nil {
			c.advanceLocked(ev.Revision)
			return nil
		}
		obj := e.prev.obj.DeepCopyObject()
		if err := setRV(obj, ev.Revision); err != nil {
			return err
		}
		e.prev = &entry{obj: obj, fields: e.prev.fields}
		delete(c.objects, ev.Key)
	} else {
		c.objects[ev.Key] = e.cur
	}
	c.pushLocked(e)
	c.dispatchLocked(e)
	c.advanceLocked(ev.Revision)
	return nil
}

func (c *cache) pushLocked(e *event) {
	n := len(c.history)
	if c.count == n {
		c.oldest = c.history[c.head].rv
		c.history[c.head] = e
		c.head = (c.head + 1) % n
		return
	}
	c.history[(c.head+c.count)%n] = e
	c.count++
}

// dispatchLocked offers e to every watcher that may care about it.
func (c *cache) dispatchLocked(e *event) {
	for w := range c.unindexed {
		w.offer(e)
	}
	for field, byValue := range c.indexed {
		var cur, prev string
		if e.cur != nil {
			cur = e.cur.fields.Get(field)
			for w := range byValue[cur] {
				w.offer(e)
			}
		}
		if e.prev != nil {
			prev = e.prev.fields.Get(field)
			if e.cur == nil || prev != cur {
				for w := range byValue[prev] {
					w.offer(e)
				}
			}
		}
	}
}

func (c *cache) sendBookmarks(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rv := c.rv
	each := func(w *Watcher) {
		if w.bookmarks && !now.Before(w.nextBookmark) {
			w.nextBookmark = now.Add(w.bookmarkEvery)
			w.send(Event{Type: watch.Bookmark, RV: rv})
		}
	}
	for w := range c.unindexed {
		each(w)
	}
	for _, byValue := range c.indexed {
		for _, ws := range byValue {
			for w := range ws {
				each(w)
			}
		}
	}
}

// terminateAll closes every watcher (err is reported to them, nil = clean end).
func (c *cache) terminateAll(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for w := range c.unindexed {
		c.removeLocked(w, err)
	}
	for _, byValue := range c.indexed {
		for _, ws := range byValue {
			for w := range ws {
				c.removeLocked(w, err)
			}
		}
	}
}

func (c *cache) addLocked(w *Watcher) {
	if w.indexField == "" {
		c.unindexed[w] = struct{}{}
		return
	}
	byValue := c.indexed[w.indexField]
	if byValue == nil {
		byValue = map[string]map[*Watcher]struct{}{}
		c.indexed[w.indexField] = byValue
	}
	ws := byValue[w.indexValue]
	if ws == nil {
		ws = map[*Watcher]struct{}{}
		byValue[w.indexValue] = ws
	}
	ws[w] = struct{}{}
}

func (c *cache) removeLocked(w *Watcher, err error) {
	if w.removed {
		return
	}
	w.removed = true
	w.err = err
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.signal()
	if w.indexField == "" {
		delete(c.unindexed, w)
		return
	}
	byValue := c.indexed[w.indexField]
	delete(byValue[w.indexValue], w)
	if len(byValue[w.indexValue]) == 0 {
		delete(byValue, w.indexValue)
	}
	if len(byValue) == 0 {
		delete(c.indexed, w.indexField)
	}
}

// WatchOptions select where a watch starts.
type WatchOptions struct {
	// InitialState: start with ADDED events for every matching object (at a
	// cache revision >= MinRV), then follow changes.
	InitialState bool
	// MinRV is the oldest acceptable starting revision for InitialState.
	MinRV int64
	// FromRV: without InitialState, replay every change after FromRV.
	FromRV int64
	// Bookmarks enables periodic BOOKMARK events every BookmarkEvery.
	Bookmarks     bool
	BookmarkEvery time.Duration
}

// Event is what a watcher receives.
type Event struct {
	Type   watch.EventType
	Object runtime.Object // shared: do not mutate; nil for bookmarks
	RV     int64
}

// Watcher receives the events of one API watch.
//
// Its events wait in a queue that grows only while the consumer is behind
// (up to Config.WatcherBuffer events) and is released after a burst, so an
// idle watcher costs a few hundred bytes instead of a preallocated buffer
// (a channel of 1,024 events was 40 KB per watch; a fleet's agents hold
// two watches each).
type Watcher struct {
	c          *cache
	pred       Predicate
	limit      int           // events queued before the watcher is closed
	ready      chan struct{} // capacity 1: events were queued or the watch ended
	indexField string
	indexValue string

	bookmarks     bool
	bookmarkEvery time.Duration
	nextBookmark  time.Time

	// guarded by c.mu
	removed bool
	err     error

	mu     sync.Mutex
	queue  []Event // guarded by mu
	closed bool    // guarded by mu: no more events will be queued

	notify atomic.Pointer[func()] // set by Notify: called instead of signalling ready
}

// maxKeptQueue is the largest queue capacity a watcher keeps between
// bursts; a larger one is dropped once drained.
const maxKeptQueue = 16

// Ready is signalled when events are queued or the watch ends; then call
// Next.
func (w *Watcher) Ready() <-chan struct{} { return w.ready }

// Next returns the queued events, appended to buf[:0] (buf's memory is
// reused for the next queue), and whether the watch has ended: when ended
// is true the events returned are the last (see Err for why it ended).
func (w *Watcher) Next(buf []Event) (events []Event, ended bool) {
	if cap(buf) > maxKeptQueue {
		buf = nil
	}
	clear(buf[:cap(buf)])
	w.mu.Lock()
	events, w.queue = w.queue, buf[:0]
	ended = w.closed
	w.mu.Unlock()
	return events, ended
}

// Notify makes the watcher call f, instead of signalling Ready, whenever
// events are queued or the watch ends, so that a consumer needs no
// goroutine waiting on it. f runs with the cache locked: it must return
// promptly and must not call into the store. Events queued before Notify
// are not announced again: call Next once after it.
func (w *Watcher) Notify(f func()) { w.notify.Store(&f) }

// signal wakes the consumer without blocking.
func (w *Watcher) signal() {
	if f := w.notify.Load(); f != nil {
		(*f)()
		return
	}
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

// Err says why the event channel closed: nil for a normal end, ErrExpired
// when the watcher fell behind or the cache reloaded.
func (w *Watcher) Err() error {
	w.c.mu.RLock()
	defer w.c.mu.RUnlock()
	return w.err
}

// Stop ends the watch.
func (w *Watcher) Stop() {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	w.c.removeLocked(w, nil)
}

// send delivers ev without blocking; a watcher whose buffer is full is
// closed with ErrExpired so it resumes instead of stalling everyone.
func (w *Watcher) send(ev Event) {
	if w.removed {
		return
	}
	w.mu.Lock()
	full := len(w.queue) >= w.limit
	if !full {
		w.queue = append(w.queue, ev)
	}
	w.mu.Unlock()
	if full {
		w.c.removeLocked(w, fmt.Errorf("watcher fell %d events behind: %w", w.limit, ErrExpired))
		return
	}
	w.signal()
}

// offer converts a cache event into the watcher's view and sends it.
func (w *Watcher) offer(e *event) {
	if ev, ok := w.convert(e); ok {
		w.send(ev)
	}
}

func (w *Watcher) convert(e *event) (Event, bool) {
	s := w.c.s
	if !s.inNamespace(w.pred, e.key) {
		return Event{}, false
	}
	curMatch := e.cur != nil && w.pred.matches(e.cur.obj, e.cur.fields)
	prevMatch := e.prev != nil && w.pred.matches(e.prev.obj, e.prev.fields)
	switch {
	case e.deleted:
		if prevMatch {
			return Event{Type: watch.Deleted, Object: e.prev.obj, RV: e.rv}, true
		}
	case curMatch && prevMatch:
		return Event{Type: watch.Modified, Object: e.cur.obj, RV: e.rv}, true
	case curMatch:
		return Event{Type: watch.Added, Object: e.cur.obj, RV: e.rv}, true
	case prevMatch:
		// The object left the selection: the watcher sees it deleted, at the
		// revision of the change.
		obj := e.prev.obj.DeepCopyObject()
		if setRV(obj, e.rv) == nil {
			return Event{Type: watch.Deleted, Object: obj, RV: e.rv}, true
		}
	}
	return Event{}, false
}

// Watch starts a watch. It returns the initial events (synthetic ADDED for
// InitialState, or the replayed history after FromRV), the revision they
// bring the watcher to, and the watcher for live events.
func (s *Store) Watch(ctx context.Context, p Predicate, opts WatchOptions) ([]Event, int64, *Watcher, error) {
	c := s.cache
	minRV := opts.FromRV
	if opts.InitialState {
		minRV = opts.MinRV
	}
	if err := c.waitFor(ctx, minRV); err != nil {
		return nil, 0, nil, err
	}
	w := &Watcher{
		c:             c,
		pred:          p,
		limit:         s.cfg.WatcherBuffer,
		ready:         make(chan struct{}, 1),
		bookmarks:     opts.Bookmarks,
		bookmarkEvery: opts.BookmarkEvery,
	}
	if w.bookmarkEvery <= 0 {
		w.bookmarkEvery = time.Minute
	}
	w.nextBookmark = s.cfg.Clock.Now().Add(w.bookmarkEvery)
	if p.Field != nil {
		for _, f := range s.cfg.IndexedFields {
			if v, ok := p.Field.RequiresExactMatch(f); ok {
				w.indexField, w.indexValue = f, v
				break
			}
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	var initial []Event
	if opts.InitialState {
		for key, e := range c.objects {
			if s.inNamespace(p, key) && p.matches(e.obj, e.fields) {
				initial = append(initial, Event{Type: watch.Added, Object: e.obj, RV: c.rv})
			}
		}
	} else {
		if opts.FromRV < c.oldest {
			return nil, 0, nil, fmt.Errorf("too old resource version: %d (%d): %w", opts.FromRV, c.oldest, ErrExpired)
		}
		n := len(c.history)
		for i := 0; i < c.count; i++ {
			e := c.history[(c.head+i)%n]
			if e.rv <= opts.FromRV {
				continue
			}
			if ev, ok := w.convert(e); ok {
				initial = append(initial, ev)
			}
		}
	}
	c.addLocked(w)
	return initial, c.rv, w, nil
}
