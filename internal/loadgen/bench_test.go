package loadgen

// In-process API benchmarks: a real nodeplane server (HTTPS, embedded etcd
// with fsync, watch caches) started with serverapp.Run in this process, and
// client-go typed clients over loopback. Client and server share the
// machine's cores, as they do with `nodeplane load`. Run with:
//
//	go test -run '^$' -bench . -benchtime 5s ./internal/loadgen/
//
// Each top-level benchmark gets its own server (started once, reused by
// the b.N rounds and sub-benchmarks). Custom metrics: ops/s, p50-ms,
// p99-ms; BenchmarkLeaseUpdate adds etcd's WAL fsyncs per renewal.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodeplane/nodeplane/internal/app/serverapp"

	"github.com/nodeplane/nodeplane/internal/storage/etcd"
)

// benchServers are the in-process servers, by benchmark name; TestMain
// stops them.
var benchServers = struct {
	sync.Mutex
	byName map[string]*rest.Config
	stop   []func()
}{byName: map[string]*rest.Config{}}

func TestMain(m *testing.M) {
	code := m.Run()
	benchServers.Lock()
	for _, stop := range benchServers.stop {
		stop()
	}
	benchServers.Unlock()
	os.Exit(code)
}

// benchServer returns the admin rest.Config of the server for name,
// starting it on first use. tune, when not nil, adjusts its options.
func benchServer(tb testing.TB, name string, tune func(*serverapp.Options)) *rest.Config {
	tb.Helper()
	benchServers.Lock()
	defer benchServers.Unlock()
	if cfg, ok := benchServers.byName[name]; ok {
		return cfg
	}
	dir, err := os.MkdirTemp("", "nodeplane-bench-")
	if err != nil {
		tb.Fatal(err)
	}
	cfg, stop, err := startServer(dir, io.Discard, tune)
	if err != nil {
		os.RemoveAll(dir)
		tb.Fatal(err)
	}
	benchServers.byName[name] = cfg
	benchServers.stop = append(benchServers.stop, func() { stop(); os.RemoveAll(dir) })
	return cfg
}

// startServer runs `nodeplane server` in-process on a free loopback port
// with its data under dir and returns its admin rest.Config once ready.
// tune, when not nil, adjusts the default options.
func startServer(dir string, logs io.Writer, tune func(*serverapp.Options)) (*rest.Config, func(), error) {
	opts := serverapp.DefaultOptions()
	opts.DataDir = dir
	opts.Listen = "127.0.0.1:0"
	if tune != nil {
		tune(&opts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- serverapp.Run(ctx, serverapp.Config{
			Options: opts,
			Logger:  slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
			Ready:   func(url string) { ready <- url },
		})
	}()
	stop := func() { cancel(); <-done }
	select {
	case <-ready:
	case err := <-done:
		cancel()
		return nil, nil, fmt.Errorf("server: %w", err)
	case <-time.After(60 * time.Second):
		stop()
		return nil, nil, fmt.Errorf("server not ready after 60s")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, serverapp.AdminKubeconfigFile))
	if err != nil {
		stop()
		return nil, nil, err
	}
	return cfg, stop, nil
}

func benchClients(b *testing.B, cfg *rest.Config, n int) []kubernetes.Interface {
	b.Helper()
	clients, err := NewClients(cfg, n)
	if err != nil {
		b.Fatal(err)
	}
	return clients
}

// clientLeases is the typed lease client.
type clientLeases = coordinationv1client.LeaseInterface

// reportLatency adds ops/s and latency percentiles to b's metrics.
func reportLatency(b *testing.B, r *recorder, unit string) {
	s := r.summary()
	if s.Count == 0 {
		return
	}
	b.ReportMetric(float64(s.Count)/b.Elapsed().Seconds(), unit+"/s")
	b.ReportMetric(s.P50Ms, "p50-ms")
	b.ReportMetric(s.P99Ms, "p99-ms")
}

// parallelism makes RunParallel start goroutines goroutines (rounded up to
// a multiple of GOMAXPROCS).
func parallelism(b *testing.B, goroutines int) {
	b.SetParallelism(max(1, (goroutines+runtime.GOMAXPROCS(0)-1)/runtime.GOMAXPROCS(0)))
}

// BenchmarkLeaseUpdate is the heartbeat path: concurrent clients renew
// their own leases by updating the object they last wrote (no read). Each
// goroutine cycles through 1024/goroutines leases, so a renewal rarely
// overtakes the watch cache's copy of its previous write. storage=soft is
// the default (leases in the in-memory lease store), storage=durable runs the
// server with --durable-leases (leases in the fsynced main member).
func BenchmarkLeaseUpdate(b *testing.B) {
	const leases = 1024
	for _, tc := range []struct {
		durable           bool
		conns, goroutines int
	}{{false, 1, 1}, {false, 8, 64}, {false, 64, 256}, {true, 1, 1}, {true, 8, 64}, {true, 64, 256}} {
		storage := map[bool]string{false: "soft", true: "durable"}[tc.durable]
		b.Run(fmt.Sprintf("storage=%s/conns=%d/goroutines=%d", storage, tc.conns, tc.goroutines), func(b *testing.B) {
			cfg := benchServer(b, "lease-"+storage, func(o *serverapp.Options) { o.DurableLeases = tc.durable })
			clients := benchClients(b, cfg, tc.conns)
			objs := make([]*coordinationv1.Lease, leases)
			prefix := fmt.Sprintf("bench-%d-%d-", tc.conns, tc.goroutines)
			for i := range objs {
				name := NodeName(prefix, i)
				l, err := clients[i%len(clients)].CoordinationV1().Leases(NodeLeaseNamespace).Get(context.Background(), name, metav1.GetOptions{})
				if err != nil {
					l, err = clients[i%len(clients)].CoordinationV1().Leases(NodeLeaseNamespace).Create(context.Background(), NewLease(name, time.Now(), nil), metav1.CreateOptions{})
				}
				if err != nil {
					b.Fatal(err)
				}
				objs[i] = l
			}
			var lat recorder
			renew := func(c clientLeases, i int) error {
				l := objs[i]
				l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
				start := time.Now()
				out, err := c.Update(context.Background(), l, metav1.UpdateOptions{})
				lat.add(time.Since(start))
				if err == nil {
					objs[i] = out
				}
				return err
			}
			fsyncs0, fsyncSeconds0 := walFsyncs(b)
			if tc.goroutines == 1 {
				c := clients[0].CoordinationV1().Leases(NodeLeaseNamespace)
				for n := 0; b.Loop(); n++ {
					if err := renew(c, n%leases); err != nil {
						b.Fatal(err)
					}
				}
			} else {
				var next atomic.Int64
				parallelism(b, tc.goroutines)
				per := leases / (max(1, (tc.goroutines+runtime.GOMAXPROCS(0)-1)/runtime.GOMAXPROCS(0)) * runtime.GOMAXPROCS(0))
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					g := int(next.Add(1) - 1)
					c := clients[g%len(clients)].CoordinationV1().Leases(NodeLeaseNamespace)
					for n := 0; pb.Next(); n++ {
						if err := renew(c, g*per+n%per); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			b.StopTimer()
			reportLatency(b, &lat, "renewals")
			fsyncs, fsyncSeconds := walFsyncs(b)
			if n := fsyncs - fsyncs0; n > 0 {
				b.ReportMetric(float64(n)/float64(b.N), "fsyncs/op")
				b.ReportMetric((fsyncSeconds-fsyncSeconds0)*1e6/float64(n), "µs/fsync")
			}
		})
	}
}

// BenchmarkNodeCreate creates realistic (~4 KB) Nodes from 64 goroutines
// over 8 connections.
func BenchmarkNodeCreate(b *testing.B) {
	cfg := benchServer(b, "create", nil)
	clients := benchClients(b, cfg, 8)
	var lat recorder
	var seq, next atomic.Int64
	round := time.Now().UnixNano()
	parallelism(b, 64)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c := clients[int(next.Add(1))%len(clients)].CoreV1().Nodes()
		for pb.Next() {
			i := int(seq.Add(1))
			n := NewNode(NodeName(fmt.Sprintf("c%x-", round), i), i, time.Now())
			start := time.Now()
			_, err := c.Create(context.Background(), n, metav1.CreateOptions{})
			lat.add(time.Since(start))
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	reportLatency(b, &lat, "creates")
}

// ensureBenchNodes creates Nodes load-node-000000… up to n on the server.
func ensureBenchNodes(b *testing.B, cfg *rest.Config, n int) {
	b.Helper()
	clients := benchClients(b, cfg, 8)
	c := Config{Clients: clients, Prefix: DefaultConfig().Prefix, SetupConcurrency: 64, Clock: DefaultConfig().Clock}
	r := &runner{cfg: c}
	if _, _, err := r.ensureNodes(context.Background(), n); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkNodeGet reads random Nodes out of 1000 from 64 goroutines over
// 8 connections: a consistent read (resourceVersion "", from etcd) and a
// watch-cache read (resourceVersion "0").
func BenchmarkNodeGet(b *testing.B) {
	cfg := benchServer(b, "get", nil)
	const nodes = 1000
	ensureBenchNodes(b, cfg, nodes)
	for _, rv := range []string{"", "0"} {
		b.Run("rv="+map[string]string{"": "consistent", "0": "cache"}[rv], func(b *testing.B) {
			clients := benchClients(b, cfg, 8)
			var lat recorder
			var next atomic.Int64
			parallelism(b, 64)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				g := int(next.Add(1))
				c := clients[g%len(clients)].CoreV1().Nodes()
				for n := 0; pb.Next(); n++ {
					start := time.Now()
					_, err := c.Get(context.Background(), NodeName("load-", (g*7919+n*104729)%nodes), metav1.GetOptions{ResourceVersion: rv})
					lat.add(time.Since(start))
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			reportLatency(b, &lat, "gets")
		})
	}
}

// BenchmarkNodeList lists 1000 realistic Nodes (about 4 MB of JSON, 3 MB
// of protobuf) from one client: a consistent list (from etcd) and a
// watch-cache list (resourceVersion "0").
func BenchmarkNodeList(b *testing.B) {
	cfg := benchServer(b, "list", nil)
	const nodes = 1000
	ensureBenchNodes(b, cfg, nodes)
	for _, rv := range []string{"", "0"} {
		b.Run("rv="+map[string]string{"": "consistent", "0": "cache"}[rv], func(b *testing.B) {
			c := benchClients(b, cfg, 1)[0].CoreV1().Nodes()
			var lat recorder
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				l, err := c.List(context.Background(), metav1.ListOptions{ResourceVersion: rv})
				lat.add(time.Since(start))
				if err != nil || len(l.Items) != nodes {
					b.Fatalf("list: %d items, %v", len(l.Items), err)
				}
			}
			b.StopTimer()
			reportLatency(b, &lat, "lists")
		})
	}
}

// BenchmarkWatchEventLatency updates a Node's status and waits for the
// event on a Node watch (another connection): ns/op is write + delivery;
// p50-ms/p99-ms are from the write's acknowledgement to the event's
// receipt (0 when the event arrives first).
func BenchmarkWatchEventLatency(b *testing.B) {
	cfg := benchServer(b, "watch", nil)
	const nodes = 100
	ensureBenchNodes(b, cfg, nodes)
	clients := benchClients(b, cfg, 2)
	writer, watcher := clients[0].CoreV1().Nodes(), clients[1].CoreV1().Nodes()
	list, err := writer.List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	objs := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		objs[i] = &list.Items[i]
	}
	w, err := watcher.Watch(context.Background(), metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	var lat recorder
	b.ResetTimer()
	for n := 0; b.Loop(); n++ {
		i := n % len(objs)
		now := metav1.Now()
		for j := range objs[i].Status.Conditions {
			objs[i].Status.Conditions[j].LastHeartbeatTime = now
		}
		out, err := writer.UpdateStatus(context.Background(), objs[i], metav1.UpdateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		acked := time.Now()
		objs[i] = out
		for {
			ev, ok := <-w.ResultChan()
			if !ok {
				b.Fatal("watch closed")
			}
			if node, isNode := ev.Object.(*corev1.Node); isNode && ev.Type == watch.Modified && node.ResourceVersion == out.ResourceVersion {
				lat.add(max(0, time.Since(acked)))
				break
			}
		}
	}
	b.StopTimer()
	reportLatency(b, &lat, "events")
}

// walFsyncs reads etcd's WAL fsync totals from the default registry.
func walFsyncs(b *testing.B) (count uint64, seconds float64) {
	count, seconds, err := etcd.WALFsyncs(prometheus.DefaultGatherer)
	if err != nil {
		b.Fatal(err)
	}
	return count, seconds
}
