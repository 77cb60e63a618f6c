// Package store turns the byte-level storage.Interface into a typed object
// store for one resource: it encodes objects (protobuf) under
// "<prefix>/<namespace>/<name>" keys, maps store revisions to
// resourceVersions, and keeps a watch cache — the current objects plus a
// window of recent events — fed by one storage watch, from which it serves
// cached lists and fans events out to every API watcher.
//
// It knows nothing of HTTP, admission or validation; the API handlers own those.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/apiserver/scheme"
	"github.com/nodeplane/nodeplane/internal/storage"
)

// Config describes one resource's store.
type Config struct {
	Storage storage.Interface
	// Prefix of every key, without a trailing slash, e.g. "/registry/nodes".
	Prefix string
	// Resource names the resource in errors and logs.
	Resource schema.GroupResource
	// GVK of stored objects; set on every object before it is encoded.
	GVK        schema.GroupVersionKind
	Namespaced bool
	NewFunc    func() runtime.Object
	// Codec encodes and decodes stored values.
	Codec runtime.Codec
	// Fields appends an object's field-selector fields to dst as name,
	// value pairs, each name once, and returns the extended slice
	// (registry.Resource.AppendFields).
	Fields func(dst []string, obj runtime.Object) []string
	// IndexedFields are fields (from Fields) whose exact-match selectors are
	// indexed for watch fan-out, e.g. "metadata.name", "spec.nodeName".
	IndexedFields []string
	// Intern, when set, is given every object decoded from storage before
	// anyone else sees it, to share the strings objects repeat
	// (internal/intern).
	Intern func(obj any)
	// InternCached is given instead of Intern every object the watch
	// cache decodes: those are never modified (every reader shares them),
	// so whole lists they repeat may be shared too (intern.Frozen). Unset,
	// it is Intern.
	InternCached func(obj any)
	// HandWrites: the resource's objects round-trip exactly through their
	// encoding once their metadata's empty maps and lists are absent
	// (registry.Resource.RoundTrips). Over a backend whose events carry
	// the values it was given (storage.ValuesPassedThrough), Update then
	// hands a copy of the object it writes to the watch cache, which need
	// not decode its own write again (after the request's own work, a
	// Lease renewal's largest allocation).
	HandWrites bool
	// HistorySize is how many recent events the watch cache keeps for
	// watchers resuming from a resourceVersion (default 10000).
	HistorySize int
	// WatcherBuffer is the per-watcher event buffer; a watcher that falls
	// this far behind is closed and must resume (default 1024).
	WatcherBuffer int
	Clock         clock.WithTicker
	Logger        *slog.Logger
}

// Store is a typed object store with a watch cache.
type Store struct {
	cfg   Config
	cache *cache
	// fieldsLen is the length of the last field set built: a resource's
	// objects all have the same fields, so the next one is allocated at
	// its exact size.
	fieldsLen atomic.Int32
	// hands: Config.HandWrites, over a backend whose events carry the
	// values it was given.
	hands bool
}

// New validates cfg and returns a store. Call Run to start its watch cache.
func New(cfg Config) (*Store, error) {
	if cfg.Storage == nil || cfg.NewFunc == nil || cfg.Codec == nil || cfg.Fields == nil {
		return nil, fmt.Errorf("store %s: Storage, NewFunc, Codec and Fields are required", cfg.Resource)
	}
	if cfg.Prefix == "" || strings.HasSuffix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("store %s: prefix %q must be non-empty without a trailing slash", cfg.Resource, cfg.Prefix)
	}
	if cfg.HistorySize <= 0 {
		cfg.HistorySize = 10000
	}
	if cfg.WatcherBuffer <= 0 {
		cfg.WatcherBuffer = 1024
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.InternCached == nil {
		cfg.InternCached = cfg.Intern
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Store{cfg: cfg}
	if p, ok := cfg.Storage.(storage.ValuesPassedThrough); ok && p.PassesValuesThrough() {
		s.hands = cfg.HandWrites
	}
	s.cache = newCache(s)
	return s, nil
}

// Resource returns the resource the store holds.
func (s *Store) Resource() schema.GroupResource { return s.cfg.Resource }

// Key returns the storage key of an object.
func (s *Store) Key(namespace, name string) string {
	if s.cfg.Namespaced {
		return s.cfg.Prefix + "/" + namespace + "/" + name
	}
	return s.cfg.Prefix + "/" + name
}

// prefixFor returns the list prefix for a namespace ("" = all namespaces).
func (s *Store) prefixFor(namespace string) string {
	if s.cfg.Namespaced && namespace != "" {
		return s.cfg.Prefix + "/" + namespace + "/"
	}
	return s.cfg.Prefix + "/"
}

// encode serialises obj for storage. The resourceVersion is never stored:
// it is the key's revision.
func (s *Store) encode(obj runtime.Object) ([]byte, error) {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	rv := accessor.GetResourceVersion()
	accessor.SetResourceVersion("")
	obj.GetObjectKind().SetGroupVersionKind(s.cfg.GVK)
	data, err := scheme.Encode(s.cfg.Codec, obj)
	accessor.SetResourceVersion(rv)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", s.cfg.Resource, err)
	}
	return data, nil
}

// decode turns a stored value into an object carrying resourceVersion rev.
func (s *Store) decode(data []byte, rev int64) (runtime.Object, error) {
	return s.decodeFor(data, rev, s.cfg.Intern)
}

// decodeCached is decode for the watch cache.
func (s *Store) decodeCached(data []byte, rev int64) (runtime.Object, error) {
	return s.decodeFor(data, rev, s.cfg.InternCached)
}

// decodeFor is decode, giving the object to intern (when non-nil).
func (s *Store) decodeFor(data []byte, rev int64, intern func(obj any)) (runtime.Object, error) {
	obj := s.cfg.NewFunc()
	out, _, err := s.cfg.Codec.Decode(data, nil, obj)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", s.cfg.Resource, err)
	}
	if err := setRV(out, rev); err != nil {
		return nil, err
	}
	if intern != nil {
		intern(out)
	}
	return out, nil
}

func setRV(obj runtime.Object, rev int64) error {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	accessor.SetResourceVersion(strconv.FormatInt(rev, 10))
	return nil
}

// ParseRV parses a resourceVersion; "" and "0" are 0.
func ParseRV(rv string) (int64, error) {
	if rv == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid resource version %q", rv)
	}
	return n, nil
}

// ObjectRV returns the parsed resourceVersion of an object.
func ObjectRV(obj runtime.Object) (int64, error) {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return 0, err
	}
	return ParseRV(accessor.GetResourceVersion())
}

// Get reads the object from storage (a consistent read).
func (s *Store) Get(ctx context.Context, namespace, name string) (runtime.Object, error) {
	kv, err := s.cfg.Storage.Get(ctx, s.Key(namespace, name))
	if err != nil {
		return nil, err
	}
	return s.decode(kv.Value, kv.ModRevision)
}

// GetCached returns the watch cache's copy of the object (a shared object:
// callers must deep-copy before mutating) or storage.ErrNotFound.
func (s *Store) GetCached(namespace, name string) (runtime.Object, error) {
	return s.cache.get(s.Key(namespace, name))
}

// Create stores a new object and returns it with its resourceVersion.
func (s *Store) Create(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	data, err := s.encode(obj)
	if err != nil {
		return nil, err
	}
	rev, err := s.cfg.Storage.Create(ctx, s.Key(accessor.GetNamespace(), accessor.GetName()), data)
	if err != nil {
		return nil, err
	}
	if err := setRV(obj, rev); err != nil {
		return nil, err
	}
	return obj, nil
}

// Update writes obj if the stored revision equals expectedRV. On a revision
// mismatch it returns a *storage.ConflictError.
func (s *Store) Update(ctx context.Context, obj runtime.Object, expectedRV int64) (runtime.Object, error) {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	data, err := s.encode(obj)
	if err != nil {
		return nil, err
	}
	key := s.Key(accessor.GetNamespace(), accessor.GetName())
	if s.hands {
		cp, err := s.handCopy(obj)
		if err != nil {
			return nil, err
		}
		s.cache.hand(key, data, cp)
	}
	rev, err := s.cfg.Storage.Update(ctx, key, data, expectedRV)
	if err != nil {
		if s.hands {
			s.cache.unhand(key, data)
		}
		return nil, err
	}
	if err := setRV(obj, rev); err != nil {
		return nil, err
	}
	return obj, nil
}

// Delete removes the object if its revision equals expectedRV (0 = any) and
// returns the deleted object carrying the delete's resourceVersion.
func (s *Store) Delete(ctx context.Context, namespace, name string, expectedRV int64) (runtime.Object, error) {
	kv, rev, err := s.cfg.Storage.Delete(ctx, s.Key(namespace, name), expectedRV)
	if err != nil {
		return nil, err
	}
	return s.decode(kv.Value, rev)
}

// DecodeConflict returns the current object carried by a conflict error.
func (s *Store) DecodeConflict(err error) (runtime.Object, bool) {
	var ce *storage.ConflictError
	if !errors.As(err, &ce) || ce.Current.Value == nil {
		return nil, false
	}
	obj, derr := s.decode(ce.Current.Value, ce.Current.ModRevision)
	if derr != nil {
		return nil, false
	}
	return obj, true
}

// Predicate selects objects for lists and watches.
type Predicate struct {
	Namespace string
	Label     labels.Selector
	Field     fields.Selector
}

// Everything reports whether the predicate selects every object of the namespace.
func (p Predicate) everything() bool {
	return (p.Label == nil || p.Label.Empty()) && (p.Field == nil || p.Field.Empty())
}

// Matches reports whether obj (with its precomputed fields) is selected.
func (p Predicate) matches(obj runtime.Object, f fields.Fields) bool {
	if p.Label != nil && !p.Label.Empty() {
		accessor, err := meta.Accessor(obj)
		if err != nil {
			return false
		}
		if !p.Label.Matches(labels.Set(accessor.GetLabels())) {
			return false
		}
	}
	if p.Field != nil && !p.Field.Empty() && !p.Field.Matches(f) {
		return false
	}
	return true
}

// inNamespace reports whether a key lies in the predicate's namespace.
func (s *Store) inNamespace(p Predicate, key string) bool {
	if !s.cfg.Namespaced || p.Namespace == "" {
		return true
	}
	return strings.HasPrefix(key, s.cfg.Prefix+"/"+p.Namespace+"/")
}

// ListPage is one page of a list.
type ListPage struct {
	Items []runtime.Object
	// RV is the revision the list reflects.
	RV int64
	// Continue is set when more items remain (storage lists only).
	NextKey   string
	Remaining int64
}

// ListFromStorage lists at revision rev (0 = latest) starting at startKey
// (inclusive, "" = the beginning), returning up to limit matching items
// (0 = all). It pages through storage, so selectors never shorten a page
// that has more matches behind it.
func (s *Store) ListFromStorage(ctx context.Context, p Predicate, rev int64, startKey string, limit int64) (ListPage, error) {
	prefix := s.prefixFor(p.Namespace)
	if startKey != "" && !strings.HasPrefix(startKey, prefix) {
		return ListPage{}, fmt.Errorf("continue key %q is outside %q: %w", startKey, prefix, errBadContinue)
	}
	page := ListPage{Remaining: -1}
	key := startKey
	fetch := limit
	if fetch > 0 && !p.everything() && fetch < 500 {
		fetch = 500
	}
	for {
		res, err := s.cfg.Storage.List(ctx, prefix, storage.ListOptions{Revision: rev, Limit: fetch, StartKey: key})
		if err != nil {
			return ListPage{}, err
		}
		rev = res.Revision
		page.RV = res.Revision
		for i, kv := range res.Items {
			obj, err := s.decode(kv.Value, kv.ModRevision)
			if err != nil {
				return ListPage{}, err
			}
			if !p.matches(obj, s.fieldsOf(obj)) {
				continue
			}
			page.Items = append(page.Items, obj)
			if limit > 0 && int64(len(page.Items)) == limit {
				if i < len(res.Items)-1 || res.More {
					if i < len(res.Items)-1 {
						page.NextKey = res.Items[i+1].Key
					} else {
						page.NextKey = kv.Key + "\x00"
					}
					if p.everything() && res.Remaining >= 0 {
						page.Remaining = res.Remaining + int64(len(res.Items)-i-1)
					}
				}
				return page, nil
			}
		}
		if !res.More || len(res.Items) == 0 {
			return page, nil
		}
		key = res.Items[len(res.Items)-1].Key + "\x00"
	}
}

var errBadContinue = errors.New("bad continue key")

// IsBadContinue reports an invalid continue position.
func IsBadContinue(err error) bool { return errors.Is(err, errBadContinue) }

// ListFromCache returns the cached objects matching p once the cache has
// reached at least minRV (waiting briefly), with the cache's revision.
// Returned objects are shared: do not mutate them.
func (s *Store) ListFromCache(ctx context.Context, p Predicate, minRV int64) (ListPage, error) {
	if err := s.cache.waitFor(ctx, minRV); err != nil {
		return ListPage{}, err
	}
	items, rv := s.cache.list(p)
	return ListPage{Items: items, RV: rv, Remaining: -1}, nil
}

// CurrentRevision returns the backing store's latest revision.
func (s *Store) CurrentRevision(ctx context.Context) (int64, error) {
	return s.cfg.Storage.CurrentRevision(ctx)
}

// Count returns the number of stored objects.
func (s *Store) Count(ctx context.Context) (int64, error) {
	return s.cfg.Storage.Count(ctx, s.cfg.Prefix+"/")
}

// Run feeds the watch cache until ctx ends. Ready reports when the first
// full list has been loaded.
func (s *Store) Run(ctx context.Context) { s.cache.run(ctx) }

// Ready reports whether the watch cache has loaded.
func (s *Store) Ready() bool { return s.cache.isReady() }

// CacheRV returns the revision the watch cache reflects.
func (s *Store) CacheRV() int64 { return s.cache.currentRV() }
