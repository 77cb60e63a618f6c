package etcd

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodeplane/nodeplane/internal/storage"
)

// Run with: go test -run x -bench . -benchtime 3s ./internal/storage/etcd/

// leaseValue is about the size of an encoded coordination.k8s.io Lease.
var leaseValue = bytes.Repeat([]byte("x"), 400)

// benchWriters is the number of concurrent writers: like many agents
// renewing leases at once, which lets etcd batch them into one raft
// proposal round and one WAL fsync.
const benchWriters = 256

type benchBackend struct {
	name      string
	cfg       EmbeddedConfig
	inProcess bool
}

var benchBackends = []benchBackend{
	{"in-process", EmbeddedConfig{}, true},
	{"grpc-loopback", EmbeddedConfig{ClientURL: "http://127.0.0.1:0"}, false},
	{"in-process-no-fsync", EmbeddedConfig{UnsafeNoFsync: true}, true},
}

func benchStore(b *testing.B, backend benchBackend) *Store {
	b.Helper()
	m := startMember(b, backend.cfg)
	if backend.inProcess {
		return newTestStore(b, m)
	}
	client, err := Dial(b.Context(), ExternalConfig{Endpoints: []string{m.ClientURL()}, Logger: testLogger(b)})
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(Config{Client: client})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// BenchmarkUpdate renews lease-like keys: every writer owns its keys and
// does compare-and-swap updates at the revision it last wrote.
func BenchmarkUpdate(b *testing.B) {
	for _, backend := range benchBackends {
		b.Run(backend.name, func(b *testing.B) {
			s := benchStore(b, backend)
			const keysPerWriter = 4
			revs := make([]int64, benchWriters*keysPerWriter)
			for i := range revs {
				rev, err := s.Create(b.Context(), leaseKey(i), leaseValue)
				if err != nil {
					b.Fatal(err)
				}
				revs[i] = rev
			}
			var writer atomic.Int64
			lat := newLatencies()
			fsyncsBefore, fsyncTimeBefore := walFsyncs(b)
			b.SetParallelism(benchWriters / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				id := int(writer.Add(1)-1) % benchWriters
				var own []time.Duration
				for n := 0; pb.Next(); n++ {
					i := id*keysPerWriter + n%keysPerWriter
					start := time.Now()
					rev, err := s.Update(context.Background(), leaseKey(i), leaseValue, revs[i])
					own = append(own, time.Since(start))
					if err != nil {
						b.Error(err)
						return
					}
					revs[i] = rev
				}
				lat.add(own)
			})
			b.StopTimer()
			fsyncs, fsyncTime := walFsyncs(b)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "updates/s")
			lat.report(b)
			if n := fsyncs - fsyncsBefore; n > 0 && !backend.cfg.UnsafeNoFsync {
				b.ReportMetric(float64(n)/float64(b.N), "fsyncs/op")
				b.ReportMetric((fsyncTime-fsyncTimeBefore)*1e6/float64(n), "µs/fsync")
			}
		})
	}
}

// BenchmarkUpdateSerial renews one key at a time: every update waits for its
// own WAL fsync, so ns/op is about the fsync cost plus etcd's apply.
func BenchmarkUpdateSerial(b *testing.B) {
	s := benchStore(b, benchBackends[0])
	rev, err := s.Create(b.Context(), leaseKey(0), leaseValue)
	if err != nil {
		b.Fatal(err)
	}
	fsyncsBefore, fsyncTimeBefore := walFsyncs(b)
	for b.Loop() {
		if rev, err = s.Update(context.Background(), leaseKey(0), leaseValue, rev); err != nil {
			b.Fatal(err)
		}
	}
	fsyncs, fsyncTime := walFsyncs(b)
	if n := fsyncs - fsyncsBefore; n > 0 {
		b.ReportMetric(float64(n)/float64(b.N), "fsyncs/op")
		b.ReportMetric((fsyncTime-fsyncTimeBefore)*1e6/float64(n), "µs/fsync")
	}
}

// BenchmarkCreate creates new keys from many writers.
func BenchmarkCreate(b *testing.B) {
	s := benchStore(b, benchBackends[0])
	var next atomic.Int64
	b.SetParallelism(benchWriters / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := fmt.Sprintf("/bench/create/%09d", next.Add(1))
			if _, err := s.Create(context.Background(), key, leaseValue); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
}

// BenchmarkGet does linearizable reads of existing keys from many readers.
func BenchmarkGet(b *testing.B) {
	s := benchStore(b, benchBackends[0])
	const keys = 1000
	for i := range keys {
		if _, err := s.Create(b.Context(), leaseKey(i), leaseValue); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	b.SetParallelism(benchWriters / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Get(context.Background(), leaseKey(int(next.Add(1)%keys))); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "gets/s")
}

// BenchmarkList1000 lists a prefix of 1000 lease-sized values.
func BenchmarkList1000(b *testing.B) {
	s := benchStore(b, benchBackends[0])
	for i := range 1000 {
		if _, err := s.Create(b.Context(), leaseKey(i), leaseValue); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		page, err := s.List(context.Background(), "/bench/leases/", storage.ListOptions{})
		if err != nil || len(page.Items) != 1000 {
			b.Fatalf("List = %d items, %v", len(page.Items), err)
		}
	}
}

// BenchmarkStartEmbedded measures starting and stopping a fresh member.
func BenchmarkStartEmbedded(b *testing.B) {
	for b.Loop() {
		m, err := StartEmbedded(b.Context(), EmbeddedConfig{Dir: b.TempDir(), Logger: testLogger(b)})
		if err != nil {
			b.Fatal(err)
		}
		m.Close()
	}
}

func leaseKey(i int) string { return fmt.Sprintf("/bench/leases/node-%06d", i) }

// latencies collects per-request durations from all goroutines.
type latencies struct {
	mu  sync.Mutex
	all []time.Duration
}

func newLatencies() *latencies { return &latencies{} }

func (l *latencies) add(d []time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, d...)
}

func (l *latencies) report(b *testing.B) {
	if len(l.all) == 0 {
		return
	}
	slices.Sort(l.all)
	q := func(p float64) float64 { return float64(l.all[int(p*float64(len(l.all)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

// walFsyncs reads etcd's WAL fsync totals from the default registry.
func walFsyncs(b *testing.B) (count uint64, seconds float64) {
	count, seconds, err := WALFsyncs(prometheus.DefaultGatherer)
	if err != nil {
		b.Fatal(err)
	}
	return count, seconds
}
