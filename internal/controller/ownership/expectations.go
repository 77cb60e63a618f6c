package ownership

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// DefaultExpectationsTimeout is how long a controller waits for the
// informer to show its writes before it trusts the cache again (upstream's
// ExpectationsTimeout, 5 min): a watch event lost for good must not stop a
// controller for ever.
const DefaultExpectationsTimeout = 5 * time.Minute

// Expectations remembers, per controller key (namespace/name), the pod
// creations and deletions a controller has asked for but not yet seen in
// its informer. While some are outstanding the cache undercounts or
// overcounts, so the controller must not create or delete again
// (Satisfied is false). Safe for concurrent use.
type Expectations struct {
	timeout time.Duration

	mu sync.Mutex
	m  map[string]*expectation
}

type expectation struct {
	creates int
	deletes map[types.UID]bool
	since   time.Time
}

// NewExpectations returns empty expectations that lapse after timeout
// (DefaultExpectationsTimeout when ≤ 0).
func NewExpectations(timeout time.Duration) *Expectations {
	if timeout <= 0 {
		timeout = DefaultExpectationsTimeout
	}
	return &Expectations{timeout: timeout, m: map[string]*expectation{}}
}

// Expect replaces key's expectations: creates pods to appear and the pods
// with deletes UIDs to go, as of now.
func (e *Expectations) Expect(key string, creates int, deletes []types.UID, now time.Time) {
	x := &expectation{creates: creates, since: now}
	if len(deletes) > 0 {
		x.deletes = make(map[types.UID]bool, len(deletes))
		for _, uid := range deletes {
			x.deletes[uid] = true
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[key] = x
}

// Created records that one expected pod appeared, or that a create failed
// or was skipped and so never will.
func (e *Expectations) Created(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.m[key]; ok && x.creates > 0 {
		x.creates--
	}
}

// Deleted records that the pod with uid is going (deleted, or
// deletionTimestamp seen), or that its deletion failed. Repeats are
// harmless.
func (e *Expectations) Deleted(key string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.m[key]; ok {
		delete(x.deletes, uid)
	}
}

// Satisfied reports whether key has no outstanding expectation at now:
// none recorded, all observed, or recorded more than the timeout ago.
func (e *Expectations) Satisfied(key string, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.m[key]
	if !ok {
		return true
	}
	return (x.creates <= 0 && len(x.deletes) == 0) || now.Sub(x.since) > e.timeout
}

// Forget drops key (its controller object is gone).
func (e *Expectations) Forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
