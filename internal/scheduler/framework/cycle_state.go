package framework

import (
	"errors"
	"fmt"
)

// StateKey names one entry of a CycleState; plugins use their own name as a
// prefix so keys never collide.
type StateKey string

// ErrStateNotFound is returned when a key was never written in this cycle
// (typically because the plugin's PreFilter or PreScore did not run).
var ErrStateNotFound = errors.New("cycle state not found")

// CycleState carries what plugins compute once per cycle (in PreFilter or
// PreScore) to the per-node calls (Filter, Score). It lives for one cycle of
// one pod. Writes happen in the sequential PreFilter/PreScore phases only, so
// the per-node phases may read it without locking.
//
// A cycle holds a handful of entries, read once per node per plugin, so they
// are kept in a slice: a linear scan over a few keys beats hashing the key.
type CycleState struct {
	entries []stateEntry
}

type stateEntry struct {
	key   StateKey
	value any
}

// NewCycleState returns an empty state.
func NewCycleState() *CycleState {
	return &CycleState{entries: make([]stateEntry, 0, 8)}
}

// Write stores v under key, replacing an earlier value.
func (c *CycleState) Write(key StateKey, v any) {
	for i := range c.entries {
		if c.entries[i].key == key {
			c.entries[i].value = v
			return
		}
	}
	c.entries = append(c.entries, stateEntry{key: key, value: v})
}

// Read returns the value stored under key.
func (c *CycleState) Read(key StateKey) (any, error) {
	for i := range c.entries {
		if c.entries[i].key == key {
			return c.entries[i].value, nil
		}
	}
	return nil, fmt.Errorf("read %q: %w", key, ErrStateNotFound)
}

// ReadState reads key and asserts its type.
func ReadState[T any](c *CycleState, key StateKey) (T, error) {
	var zero T
	v, err := c.Read(key)
	if err != nil {
		return zero, err
	}
	t, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("read %q: got %T, want %T", key, v, zero)
	}
	return t, nil
}

func (c *CycleState) reset() {
	clear(c.entries)
	c.entries = c.entries[:0]
}
