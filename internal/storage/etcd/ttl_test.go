package etcd

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeplane/nodeplane/internal/storage"
)

// TestKeyTTL: a key under a TTL prefix is deleted by etcd once its lease
// runs out, and watchers see the delete; other keys stay.
func TestKeyTTL(t *testing.T) {
	m := startMember(t, EmbeddedConfig{})
	s, err := New(Config{Client: v3client.New(m.etcd.Server), KV: m.kv, TTLs: []KeyTTL{{Prefix: "/registry/events/", TTL: time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events, err := s.Watch(ctx, "/registry/", storage.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "/registry/events/default/e1", []byte("e1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "/registry/pods/default/p1", []byte("p1")); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case <-ctx.Done():
			t.Fatal("the event was not deleted within 30s")
		case ev := <-events:
			if ev.Type != storage.EventDelete {
				continue
			}
			if ev.Key != "/registry/events/default/e1" {
				t.Fatalf("deleted %s; only the event has a TTL", ev.Key)
			}
			if _, err := s.Get(ctx, "/registry/pods/default/p1"); err != nil {
				t.Fatalf("the pod without a TTL: %v", err)
			}
			if _, err := s.Get(ctx, "/registry/events/default/e1"); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("the expired event: got %v, want not found", err)
			}
			return
		}
	}
}

// TestLeasesAreSharedWithinAWindow: writes within a tenth of the TTL (at
// most a minute) share one lease; a write after it gets a new one.
func TestLeasesAreSharedWithinAWindow(t *testing.T) {
	m := startMember(t, EmbeddedConfig{})
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	l, err := newLeases(v3client.New(m.etcd.Server).Lease, clk, []KeyTTL{{Prefix: "/registry/events/", TTL: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lease := func(key string) int64 {
		t.Helper()
		id, err := l.forKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	if id := lease("/registry/pods/default/p"); id != 0 {
		t.Errorf("a key without a TTL got lease %d", id)
	}
	first := lease("/registry/events/default/a")
	if first == 0 {
		t.Fatal("an event got no lease")
	}
	clk.SetTime(clk.Now().Add(30 * time.Second))
	if id := lease("/registry/events/default/b"); id != first {
		t.Errorf("a write 30s later got lease %d, want the shared %d", id, first)
	}
	clk.SetTime(clk.Now().Add(30 * time.Second))
	if id := lease("/registry/events/default/c"); id == first || id == 0 {
		t.Errorf("a write past the 1m window got lease %d, want a new one", id)
	}
}
