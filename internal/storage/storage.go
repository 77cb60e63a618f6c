// Package storage defines the narrow key-value contract the API server needs
// from its backing store: revisioned reads, compare-and-swap writes, prefix
// lists and watches that can resume from a revision.
//
// It knows nothing about Kubernetes objects: keys are strings, values are
// opaque bytes. The API server encodes objects and maps revisions to
// resourceVersions. The etcd implementation lives in storage/etcd; the
// conformance suite every implementation must pass lives in storage/storagetest.
// The request-latency histogram every implementation records into is here
// too (Metrics), so that the backends of one server share one metric.
package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Implementations wrap them (errors.Is must match) and add
// the key in the message; callers translate them to API statuses once.
var (
	// ErrNotFound: the key does not exist (or did not at the requested revision).
	ErrNotFound = errors.New("key not found")
	// ErrAlreadyExists: Create found the key present.
	ErrAlreadyExists = errors.New("key already exists")
	// ErrConflict: the key's current revision is not the expected one.
	ErrConflict = errors.New("revision conflict")
	// ErrCompacted: the requested revision has been compacted away.
	ErrCompacted = errors.New("revision compacted")
	// ErrFutureRevision: the requested revision is newer than the store's current revision.
	ErrFutureRevision = errors.New("revision is in the future")
	// ErrUnavailable: the store cannot be reached or did not answer in time.
	ErrUnavailable = errors.New("storage unavailable")
	// ErrTooManyRequests: the store is overloaded and refused the request;
	// retrying later may succeed (the API answers 429).
	ErrTooManyRequests = errors.New("storage overloaded")
)

// KeyValue is one stored value at the revision it was last modified.
type KeyValue struct {
	Key   string
	Value []byte
	// ModRevision is the store revision of the last write to the key. The API
	// server uses it as the object's resourceVersion.
	ModRevision int64
	// CreateRevision is the store revision of the write that created the key.
	CreateRevision int64
}

// ListOptions select a page of a prefix.
type ListOptions struct {
	// Revision to read at; 0 means the latest. A compacted revision yields ErrCompacted.
	Revision int64
	// Limit is the maximum number of items; 0 means no limit.
	Limit int64
	// StartKey, when set, is the first key (inclusive) of the page; it must
	// lie under the prefix. Used to continue a paginated list.
	StartKey string
}

// Start checks opts for a list of prefix and returns the first key to
// read: StartKey when set (it must lie under prefix), else prefix. Every
// implementation refuses the same options with the same messages.
func (o ListOptions) Start(prefix string) (string, error) {
	if o.Limit < 0 || o.Revision < 0 {
		return "", fmt.Errorf("list %q: negative limit %d or revision %d", prefix, o.Limit, o.Revision)
	}
	if o.StartKey == "" {
		return prefix, nil
	}
	if !strings.HasPrefix(o.StartKey, prefix) {
		return "", fmt.Errorf("list %q: start key %q is outside the prefix", prefix, o.StartKey)
	}
	return o.StartKey, nil
}

// ListResult is one page of a prefix list.
type ListResult struct {
	Items []KeyValue
	// Revision the list was read at (the store's current revision when
	// ListOptions.Revision was 0).
	Revision int64
	// More reports that keys remain after the last returned item.
	More bool
	// Remaining is the number of keys after this page when known (>= 0), or -1.
	Remaining int64
}

// EventType says what happened to a key.
type EventType int

const (
	// EventPut is a create or an update. Event.Created tells which.
	EventPut EventType = iota + 1
	// EventDelete removes the key (Event.PrevValue holds the value it had
	// when the watch asked for PrevValues).
	EventDelete
	// EventProgress carries no key: it says the watch has seen every change
	// up to and including Event.Revision. Used for bookmarks and freshness.
	EventProgress
	// EventError ends the stream; Event.Err says why (for example ErrCompacted).
	EventError
)

// Event is one entry in a watch stream.
type Event struct {
	Type EventType
	Key  string
	// Value is the new value for EventPut.
	Value []byte
	// PrevValue is the value before the event, only when the watch asked for
	// WatchOptions.PrevValues: then always set for EventDelete and for
	// EventPut updates.
	PrevValue []byte
	// Revision is the store revision of the change (ModRevision of a put, the
	// deleting revision of a delete, the covered revision of a progress event).
	Revision int64
	// CreateRevision of the key (puts only).
	CreateRevision int64
	// Created is true for the put that created the key.
	Created bool
	// Err is set for EventError.
	Err error
}

// WatchOptions tune a watch.
type WatchOptions struct {
	// FromRevision: deliver every change with revision > FromRevision.
	// 0 means "from now": every change committed after Watch returns.
	FromRevision int64
	// ProgressNotify asks for periodic EventProgress entries while the prefix
	// is quiet, so the watcher knows how fresh its view is.
	ProgressNotify bool
	// PrevValues asks for Event.PrevValue. It costs the store a read per
	// event, so a watcher that keeps its own copy (the API server's watch
	// cache) leaves it off.
	PrevValues bool
}

// Interface is what the API server needs from a store. All methods are safe
// for concurrent use. Writes return the new revision; a successful write is
// durable when it returns (unless the implementation documents otherwise for
// a specific key space).
type Interface interface {
	// Get returns the key's current value, or ErrNotFound.
	Get(ctx context.Context, key string) (KeyValue, error)
	// List returns keys with the given prefix in key order.
	List(ctx context.Context, prefix string, opts ListOptions) (ListResult, error)
	// Count returns the number of keys under prefix.
	Count(ctx context.Context, prefix string) (int64, error)
	// Create stores value under key if the key is absent (ErrAlreadyExists otherwise).
	Create(ctx context.Context, key string, value []byte) (revision int64, err error)
	// Update replaces the value if the key's ModRevision equals expectedRevision,
	// which must be positive. ErrNotFound if the key is absent; ErrConflict
	// (wrapped in a *ConflictError carrying the current value) if the revision
	// differs.
	Update(ctx context.Context, key string, value []byte, expectedRevision int64) (revision int64, err error)
	// Delete removes the key. expectedRevision 0 means unconditional; otherwise
	// ErrConflict (as *ConflictError) if the ModRevision differs. Returns the
	// deleted value and the revision of the delete.
	Delete(ctx context.Context, key string, expectedRevision int64) (deleted KeyValue, revision int64, err error)
	// Watch streams changes under prefix until ctx is cancelled or an
	// EventError is sent; the channel is closed afterwards.
	Watch(ctx context.Context, prefix string, opts WatchOptions) (<-chan Event, error)
	// CurrentRevision returns the store's latest revision (a linearizable read).
	CurrentRevision(ctx context.Context) (int64, error)
	// Compact discards history before revision.
	Compact(ctx context.Context, revision int64) error
	// Close releases the client (not an embedded server; see storage/etcd).
	Close() error
}

// ValuesPassedThrough is implemented by a backend whose watch events carry
// the very value slice a write was given, not a copy (storage/memstore): a
// watch cache may then recognise the events of its own writes by the slice.
type ValuesPassedThrough interface {
	PassesValuesThrough() bool
}

// ConflictError is returned by Update and Delete on a revision mismatch. It
// matches ErrConflict with errors.Is and carries the current value so a
// retrying caller need not read again.
type ConflictError struct {
	Key     string
	Current KeyValue
}

func (e *ConflictError) Error() string { return "update " + e.Key + ": " + ErrConflict.Error() }

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }
