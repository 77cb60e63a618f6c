package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	goruntime "runtime"
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/watch"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodeplane/nodeplane/internal/apiserver/scheme"
	"github.com/nodeplane/nodeplane/internal/storage"
	"github.com/nodeplane/nodeplane/internal/storage/etcd"
	"github.com/nodeplane/nodeplane/internal/storage/memstore"
)

// These tests run the store and its watch cache against a real embedded
// etcd member. Waits are bounded polls on the cache's revision, never sleeps.

func newEtcd(t *testing.T) storage.Interface {
	t.Helper()
	cfg := etcd.DefaultEmbeddedConfig()
	cfg.Dir = t.TempDir()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := etcd.StartEmbedded(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	st, err := etcd.New(m.StoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func podFields(dst []string, obj runtime.Object) []string {
	p := obj.(*corev1.Pod)
	return append(dst, "metadata.name", p.Name, "metadata.namespace", p.Namespace, "spec.nodeName", p.Spec.NodeName)
}

func newPodStore(t *testing.T, backing storage.Interface, history, buffer int) *Store {
	t.Helper()
	return newPodStoreWith(t, backing, history, buffer, nil)
}

// newPodStoreWith is newPodStore with the config changed by edit (when non-nil).
func newPodStoreWith(t *testing.T, backing storage.Interface, history, buffer int, edit func(*Config)) *Store {
	t.Helper()
	cfg := Config{
		Storage:       backing,
		Prefix:        "/registry/pods",
		Resource:      schema.GroupResource{Resource: "pods"},
		GVK:           corev1.SchemeGroupVersion.WithKind("Pod"),
		Namespaced:    true,
		NewFunc:       func() runtime.Object { return &corev1.Pod{} },
		Codec:         protobuf.NewSerializer(scheme.Scheme, scheme.Scheme),
		Fields:        podFields,
		IndexedFields: []string{"spec.nodeName"},
		HistorySize:   history,
		WatcherBuffer: buffer,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if edit != nil {
		edit(&cfg)
	}
	return startStore(t, cfg)
}

// startStore builds a store, runs its watch cache until the test ends and
// waits for its first load.
func startStore(t *testing.T, cfg Config) *Store {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go s.Run(ctx)
	waitReady(t, s)
	return s
}

// waitReady blocks until the cache's first load is done: waitFor blocks
// on the cache's revision channel, bounded by its own timeout.
func waitReady(t *testing.T, s *Store) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		err := s.cache.waitFor(context.Background(), 0)
		if err == nil {
			return
		}
		if !errors.Is(err, ErrNotReady) || attempt == 3 {
			t.Fatalf("cache not ready: %v", err)
		}
	}
}

func pod(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{NodeName: node}}
}

func mustCreate(t *testing.T, s *Store, obj runtime.Object) int64 {
	t.Helper()
	out, err := s.Create(context.Background(), obj)
	if err != nil {
		t.Fatal(err)
	}
	rv, _ := ObjectRV(out)
	return rv
}

// waitCache blocks until the cache reflects rv.
func waitCache(t *testing.T, s *Store, rv int64) {
	t.Helper()
	if err := s.cache.waitFor(context.Background(), rv); err != nil {
		t.Fatal(err)
	}
}

// recv returns w's next event. Events queued beyond it are kept in
// pending (per watcher) for the next call.
func recv(t *testing.T, w *Watcher) Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		if q := pending[w]; len(q) > 0 {
			pending[w] = q[1:]
			return q[0]
		}
		select {
		case <-w.Ready():
			evs, ended := w.Next(nil)
			if len(evs) == 0 && ended {
				t.Fatalf("watch closed: %v", w.Err())
			}
			pending[w] = evs
		case <-timeout:
			t.Fatal("no event within 10s")
		}
	}
}

// pending holds events recv took from a watcher but has not returned yet.
var pending = map[*Watcher][]Event{}

func TestWatchReplaysHistoryAfterAResourceVersion(t *testing.T) {
	s := newPodStore(t, newEtcd(t), 100, 100)
	rv1 := mustCreate(t, s, pod("a", "n1"))
	mustCreate(t, s, pod("b", "n2"))
	last := mustCreate(t, s, pod("c", "n1"))
	waitCache(t, s, last)

	initial, _, w, err := s.Watch(context.Background(), Predicate{}, WatchOptions{FromRV: rv1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if len(initial) != 2 || initial[0].Object.(*corev1.Pod).Name != "b" || initial[1].Object.(*corev1.Pod).Name != "c" {
		t.Fatalf("replayed %d events, want b and c: %+v", len(initial), initial)
	}
	for _, ev := range initial {
		if ev.Type != watch.Added {
			t.Errorf("replayed %s, want ADDED", ev.Type)
		}
	}
}

func TestAnIndexedWatcherSeesOnlyItsNode(t *testing.T) {
	s := newPodStore(t, newEtcd(t), 100, 100)
	_, _, w, err := s.Watch(context.Background(), Predicate{Field: fields.OneTermEqualSelector("spec.nodeName", "n1")}, WatchOptions{FromRV: s.CacheRV()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if w.indexField != "spec.nodeName" || w.indexValue != "n1" {
		t.Fatalf("watcher not indexed: %q=%q", w.indexField, w.indexValue)
	}
	mustCreate(t, s, pod("other", "n2"))
	mustCreate(t, s, pod("mine", "n1"))
	if ev := recv(t, w); ev.Type != watch.Added || ev.Object.(*corev1.Pod).Name != "mine" {
		t.Fatalf("got %s %v, want ADDED mine", ev.Type, ev.Object)
	}
}

func TestAPodMovingOffTheWatchedNodeIsSeenAsDeleted(t *testing.T) {
	s := newPodStore(t, newEtcd(t), 100, 100)
	created, err := s.Create(context.Background(), pod("p", "n1"))
	if err != nil {
		t.Fatal(err)
	}
	rv, _ := ObjectRV(created)
	waitCache(t, s, rv)
	_, _, w, err := s.Watch(context.Background(), Predicate{Field: fields.OneTermEqualSelector("spec.nodeName", "n1")}, WatchOptions{FromRV: rv})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	moved := created.(*corev1.Pod).DeepCopy()
	moved.Spec.NodeName = "n2"
	out, err := s.Update(context.Background(), moved, rv)
	if err != nil {
		t.Fatal(err)
	}
	newRV, _ := ObjectRV(out)
	ev := recv(t, w)
	if ev.Type != watch.Deleted || ev.RV != newRV {
		t.Fatalf("got %s at %d, want DELETED at %d", ev.Type, ev.RV, newRV)
	}
	if got, _ := ObjectRV(ev.Object); got != newRV {
		t.Errorf("deleted object carries rv %d, want %d", got, newRV)
	}
}

func TestAWatcherThatFallsBehindIsClosedAndOthersContinue(t *testing.T) {
	s := newPodStore(t, newEtcd(t), 100, 2)
	_, _, slow, err := s.Watch(context.Background(), Predicate{}, WatchOptions{FromRV: s.CacheRV()})
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for i := 0; i < 5; i++ {
		last = mustCreate(t, s, pod(fmt.Sprintf("p%d", i), "n1"))
	}
	waitCache(t, s, last)
	n := 0
	for ended := false; !ended; {
		<-slow.Ready()
		var evs []Event
		evs, ended = slow.Next(nil)
		n += len(evs)
	}
	if n != 2 || !errors.Is(slow.Err(), ErrExpired) {
		t.Fatalf("slow watcher got %d events and err %v, want 2 then ErrExpired", n, slow.Err())
	}
	// A fresh watcher resuming from the last delivered revision still works.
	_, _, w, err := s.Watch(context.Background(), Predicate{}, WatchOptions{FromRV: last})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	mustCreate(t, s, pod("after", "n1"))
	if ev := recv(t, w); ev.Object.(*corev1.Pod).Name != "after" {
		t.Fatalf("got %v", ev.Object)
	}
}

func TestResumingOlderThanTheHistoryWindowIsExpired(t *testing.T) {
	s := newPodStore(t, newEtcd(t), 3, 100)
	first := mustCreate(t, s, pod("p0", ""))
	var last int64
	for i := 1; i < 8; i++ {
		last = mustCreate(t, s, pod(fmt.Sprintf("p%d", i), ""))
	}
	waitCache(t, s, last)
	if _, _, _, err := s.Watch(context.Background(), Predicate{}, WatchOptions{FromRV: first}); !errors.Is(err, ErrExpired) {
		t.Fatalf("watch from %d: err %v, want ErrExpired", first, err)
	}
	initial, _, w, err := s.Watch(context.Background(), Predicate{}, WatchOptions{FromRV: last - 1})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	if len(initial) != 1 {
		t.Errorf("replayed %d events from inside the window, want 1", len(initial))
	}
}

func TestACacheOfAQuietResourceCatchesUpToTheStoreRevision(t *testing.T) {
	backing := newEtcd(t)
	s := newPodStore(t, backing, 100, 100)
	leases, err := New(Config{
		Storage: backing, Prefix: "/registry/leases", Resource: schema.GroupResource{Resource: "leases"},
		GVK: coordinationv1.SchemeGroupVersion.WithKind("Lease"), Namespaced: true,
		NewFunc: func() runtime.Object { return &coordinationv1.Lease{} },
		Codec:   protobuf.NewSerializer(scheme.Scheme, scheme.Scheme),
		Fields:  func(dst []string, _ runtime.Object) []string { return dst },
	})
	if err != nil {
		t.Fatal(err)
	}
	// Writes to leases move the store revision while pods stay quiet.
	var rv int64
	for i := 0; i < 3; i++ {
		out, err := leases.Create(context.Background(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("l%d", i), Namespace: "default"}})
		if err != nil {
			t.Fatal(err)
		}
		rv, _ = ObjectRV(out)
	}
	start := time.Now()
	page, err := s.ListFromCache(context.Background(), Predicate{}, rv)
	if err != nil {
		t.Fatalf("list at revision %d: %v", rv, err)
	}
	if page.RV < rv {
		t.Errorf("cache served revision %d, want >= %d", page.RV, rv)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("catching up took %v; a progress request should make it quick", took)
	}
}

func TestADrainedWatcherKeepsNoLargeQueue(t *testing.T) {
	s := newPodStore(t, newEtcd(t), 1000, 1000)
	_, _, w, err := s.Watch(context.Background(), Predicate{}, WatchOptions{FromRV: s.CacheRV()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	const burst = 50
	var last int64
	for i := range burst {
		last = mustCreate(t, s, pod(fmt.Sprintf("p%d", i), "n1"))
	}
	waitCache(t, s, last)
	var batch []Event
	got := 0
	for got < burst {
		<-w.Ready()
		var ended bool
		batch, ended = w.Next(batch)
		if ended {
			t.Fatalf("watch ended after %d events: %v", got, w.Err())
		}
		got += len(batch)
	}
	// Handing the drained batch back must not leave a burst-sized queue.
	if _, ended := w.Next(batch); ended {
		t.Fatalf("watch ended: %v", w.Err())
	}
	w.mu.Lock()
	kept := cap(w.queue)
	w.mu.Unlock()
	if got != burst || kept > maxKeptQueue {
		t.Errorf("got %d events, queue capacity %d after draining; want %d events and capacity <= %d", got, kept, burst, maxKeptQueue)
	}
}

func TestAReadWaitingForARevisionWakesWhenTheCacheReachesIt(t *testing.T) {
	// The fake clock never moves, so the wait's retry and deadline never
	// fire: only the cache reaching the revision can end it.
	clk := testingclock.NewFakeClock(time.Now())
	s := newPodStoreWith(t, newEtcd(t), 100, 100, func(c *Config) { c.Clock = clk })
	waitCache(t, s, mustCreate(t, s, pod("p0", "n1")))
	for i := range 3 {
		want := s.cache.currentRV() + 1
		done := make(chan error, 1)
		go func() { done <- s.cache.waitFor(context.Background(), want) }()
		// A bounded poll until the read waits on the cache's channel.
		for deadline := time.Now().Add(10 * time.Second); !s.cache.rvWaited.Load(); {
			if time.Now().After(deadline) {
				t.Fatal("the read never waited")
			}
			goruntime.Gosched()
		}
		mustCreate(t, s, pod(fmt.Sprintf("p%d", i+1), "n1"))
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("wait %d: %v", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("wait %d for revision %d did not end when the cache reached it", i, want)
		}
	}
}

func newLeaseStore(t *testing.T, backing storage.Interface) *Store {
	t.Helper()
	return startStore(t, Config{
		Storage:    backing,
		Prefix:     "/registry/leases",
		Resource:   schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"},
		GVK:        coordinationv1.SchemeGroupVersion.WithKind("Lease"),
		Namespaced: true,
		NewFunc:    func() runtime.Object { return &coordinationv1.Lease{} },
		Codec:      protobuf.NewSerializer(scheme.Scheme, scheme.Scheme),
		Fields: func(dst []string, obj runtime.Object) []string {
			l := obj.(*coordinationv1.Lease)
			return append(dst, "metadata.name", l.Name, "metadata.namespace", l.Namespace)
		},
		HandWrites: true,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
}

// Over the in-memory store an update's object goes to the watch cache as
// a copy sharing its values, not decoded again; a failed update leaves
// nothing behind; over etcd (values copied) nothing is handed.
func TestAnUpdatesObjectIsHandedToTheWatchCache(t *testing.T) {
	ctx := context.Background()
	mcfg := memstore.DefaultConfig()
	mcfg.Dir = t.TempDir()
	mcfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	mem, err := memstore.Open(mcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	s := newLeaseStore(t, mem)
	if !s.hands {
		t.Fatal("a store over the in-memory backend with HandWrites does not hand its writes")
	}
	lease := func(holder string) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "kube-node-lease", Labels: map[string]string{}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
		}
	}
	rv := mustCreate(t, s, lease("a"))
	waitCache(t, s, rv)

	l := lease("b")
	l.ResourceVersion = strconv.FormatInt(rv, 10)
	out, err := s.Update(ctx, l, rv)
	if err != nil {
		t.Fatal(err)
	}
	newRV, _ := ObjectRV(out)
	waitCache(t, s, newRV)
	got, err := s.GetCached("kube-node-lease", "n1")
	if err != nil {
		t.Fatal(err)
	}
	cached := got.(*coordinationv1.Lease)
	if cached == l {
		t.Fatal("the cache holds the writer's own object, not a copy")
	}
	if cached.Spec.HolderIdentity != l.Spec.HolderIdentity {
		t.Error("the cache decoded the write again instead of taking the written object")
	}
	if cached.ResourceVersion != l.ResourceVersion || cached.Labels != nil {
		t.Errorf("cached resourceVersion %q labels %#v, want %q and none", cached.ResourceVersion, cached.Labels, l.ResourceVersion)
	}

	stale := lease("c")
	if _, err := s.Update(ctx, stale, rv); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("an update at a stale revision: %v, want a conflict", err)
	}
	s.cache.handMu.Lock()
	left := len(s.cache.handed)
	s.cache.handMu.Unlock()
	if left != 0 {
		t.Errorf("%d handed writes left behind after a failed update", left)
	}

	if newLeaseStore(t, newEtcd(t)).hands {
		t.Error("a store over etcd, which copies values, hands its writes")
	}
}
