// Package storagetest is the conformance suite for storage.Interface: the
// behaviour the API server relies on, written once and run against every
// implementation (embedded etcd, an etcd cluster, an in-memory fake).
//
// It owns no implementation and must not reach past storage.Interface.
package storagetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/internal/storage"
)

// eventWait bounds every wait for a watch event. Events normally arrive in
// milliseconds; the bound only keeps a broken implementation from hanging.
const eventWait = 10 * time.Second

// RunConformance runs the suite. newStore returns a store for one subtest
// and arranges its Close with t.Cleanup; stores may share a backend, since
// every subtest writes under its own random prefix. Subtests run one after
// another: some compact the store, which must not race with another
// subtest's reads of old revisions.
func RunConformance(t *testing.T, newStore func(t *testing.T) storage.Interface) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, newStore(t), uniquePrefix(t))
		})
	}
}

type testCase struct {
	name string
	// run gets a store and a prefix ending in "/" that no other test uses.
	run func(t *testing.T, s storage.Interface, prefix string)
}

// cases lists every conformance test; each group lives in the file named
// after it.
var cases = concat(crudCases, listCases, watchCases, revisionCases)

func concat(groups ...[]testCase) []testCase {
	var all []testCase
	for _, g := range groups {
		all = append(all, g...)
	}
	return all
}

var unsafeKeyChars = regexp.MustCompile(`[^a-zA-Z0-9]+`)

func uniquePrefix(t *testing.T) string {
	name := unsafeKeyChars.ReplaceAllString(t.Name(), "-")
	return fmt.Sprintf("/storagetest/%s-%08x/", name, rand.Uint32())
}

func mustCreate(t *testing.T, s storage.Interface, key, value string) int64 {
	t.Helper()
	rev, err := s.Create(t.Context(), key, []byte(value))
	if err != nil {
		t.Fatalf("Create(%q) = %v", key, err)
	}
	return rev
}

func mustUpdate(t *testing.T, s storage.Interface, key, value string, expected int64) int64 {
	t.Helper()
	rev, err := s.Update(t.Context(), key, []byte(value), expected)
	if err != nil {
		t.Fatalf("Update(%q, at %d) = %v", key, expected, err)
	}
	return rev
}

func mustDelete(t *testing.T, s storage.Interface, key string) int64 {
	t.Helper()
	_, rev, err := s.Delete(t.Context(), key, 0)
	if err != nil {
		t.Fatalf("Delete(%q) = %v", key, err)
	}
	return rev
}

func mustRevision(t *testing.T, s storage.Interface) int64 {
	t.Helper()
	rev, err := s.CurrentRevision(t.Context())
	if err != nil {
		t.Fatalf("CurrentRevision() = %v", err)
	}
	return rev
}

func wantErr(t *testing.T, call string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", call, err, want)
	}
}

// nextEvent waits for the next event, failing the test if none arrives in
// eventWait or the channel closes.
func nextEvent(t *testing.T, ch <-chan storage.Event) storage.Event {
	t.Helper()
	timer := time.NewTimer(eventWait)
	defer timer.Stop()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed, want an event")
		}
		return ev
	case <-timer.C:
		t.Fatalf("no watch event in %v", eventWait)
	}
	return storage.Event{}
}

// waitClosed drains ch until it is closed and returns what it drained.
func waitClosed(t *testing.T, ch <-chan storage.Event) []storage.Event {
	t.Helper()
	timer := time.NewTimer(eventWait)
	defer timer.Stop()
	var drained []storage.Event
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return drained
			}
			drained = append(drained, ev)
		case <-timer.C:
			t.Fatalf("watch channel still open after %v (drained %d events)", eventWait, len(drained))
		}
	}
}

// watch starts a watch that ends with the test.
func watch(t *testing.T, s storage.Interface, prefix string, opts storage.WatchOptions) <-chan storage.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	ch, err := s.Watch(ctx, prefix, opts)
	if err != nil {
		t.Fatalf("Watch(%q, %+v) = %v", prefix, opts, err)
	}
	return ch
}

// eventSummary is the part of an event tests compare.
type eventSummary struct {
	Type      storage.EventType
	Key       string
	Value     string
	PrevValue string
	Revision  int64
	Created   bool
}

func summarize(ev storage.Event) eventSummary {
	return eventSummary{
		Type:      ev.Type,
		Key:       ev.Key,
		Value:     string(ev.Value),
		PrevValue: string(ev.PrevValue),
		Revision:  ev.Revision,
		Created:   ev.Created,
	}
}
