package apiserver

import (
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

func TestWarmWorkers(t *testing.T) {
	t.Run("a request runs on a worker, and the caller waits for it", func(t *testing.T) {
		p := NewWarmWorkers(2)
		done := false
		p.run(func() { done = true })
		if !done || p.workers() != 1 {
			t.Fatalf("done %v, workers %d: want the function run on one new worker", done, p.workers())
		}
		p.run(func() {})
		if p.workers() != 1 {
			t.Errorf("workers %d after a second request, want the idle worker reused", p.workers())
		}
	})

	t.Run("when every worker is busy a request runs on its own goroutine at once", func(t *testing.T) {
		p := NewWarmWorkers(1)
		release := make(chan struct{})
		busy := make(chan struct{})
		go p.run(func() { close(busy); <-release })
		<-busy
		ran := make(chan struct{})
		go p.run(func() { close(ran) })
		select {
		case <-ran:
		case <-time.After(10 * time.Second):
			t.Fatal("the second request waited for the busy worker")
		}
		close(release)
		if n := p.workers(); n != 1 {
			t.Errorf("%d workers, want the limit of 1", n)
		}
	})

	t.Run("many requests at once all run", func(t *testing.T) {
		p := NewWarmWorkers(4)
		var mu sync.Mutex
		count := 0
		var wg sync.WaitGroup
		for range 200 {
			wg.Go(func() {
				p.run(func() { mu.Lock(); count++; mu.Unlock() })
			})
		}
		wg.Wait()
		if count != 200 || p.workers() > 4 {
			t.Errorf("%d of 200 ran on %d workers (limit 4)", count, p.workers())
		}
	})

	t.Run("a panic comes back to the caller with the worker's stack, and the worker survives", func(t *testing.T) {
		p := NewWarmWorkers(1)
		got := func() (v any) {
			defer func() { v = recover() }()
			p.run(func() { panic("boom") })
			return nil
		}()
		err, ok := got.(error)
		if !ok || !strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "worker goroutine stack") {
			t.Fatalf("recovered %v, want an error naming the panic with its stack", got)
		}
		ran := false
		p.run(func() { ran = true })
		if !ran || p.workers() != 1 {
			t.Errorf("after the panic: ran %v on %d workers, want the same worker to serve again", ran, p.workers())
		}
	})

	t.Run("runtime.Goexit in a task ends the caller's goroutine too, and frees the worker's place", func(t *testing.T) {
		p := NewWarmWorkers(1)
		returned := make(chan bool, 1)
		go func() {
			defer func() { returned <- false }()
			p.run(runtime.Goexit)
			returned <- true
		}()
		if <-returned {
			t.Fatal("run returned after the task called runtime.Goexit")
		}
		if n := p.workers(); n != 0 {
			t.Errorf("%d workers, want the exited one gone", n)
		}
		ran := false
		p.run(func() { ran = true })
		if !ran {
			t.Error("the next task did not run")
		}
	})

	t.Run("http.ErrAbortHandler comes back as itself", func(t *testing.T) {
		p := NewWarmWorkers(1)
		got := func() (v any) {
			defer func() { v = recover() }()
			p.run(func() { panic(http.ErrAbortHandler) })
			return nil
		}()
		if err, ok := got.(error); !ok || err != http.ErrAbortHandler { //nolint:errorlint // identity is the contract
			t.Errorf("recovered %v, want http.ErrAbortHandler itself", got)
		}
	})
}

func TestOnWarmWorkers(t *testing.T) {
	t.Run("short requests and watches are both served", func(t *testing.T) {
		h := OnWarmWorkers(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(r.URL.Path))
		}), 2)
		for _, path := range []string{"/api/v1/nodes", "/api/v1/nodes?watch=true", "/api/v1/namespaces/a/pods/p/log"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			if rec.Code != http.StatusOK || rec.Body.String() != strings.Split(path, "?")[0] {
				t.Errorf("%s: %d %q", path, rec.Code, rec.Body)
			}
		}
	})

	t.Run("a watch runs on its own goroutine, a short request on a worker", func(t *testing.T) {
		p := NewWarmWorkers(1)
		h := p.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/api/v1/nodes?watch=true", nil))
		if n := p.workers(); n != 0 {
			t.Fatalf("%d workers after a watch, want none", n)
		}
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/api/v1/nodes", nil))
		if n := p.workers(); n != 1 {
			t.Fatalf("%d workers after a list, want 1", n)
		}
	})

	t.Run("a panicking handler fails its request, the server goes on", func(t *testing.T) {
		h := OnWarmWorkers(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/boom" {
				panic(errors.New("handler bug"))
			}
		}), 1)
		srv := httptest.NewUnstartedServer(h)
		srv.Config.ErrorLog = log.New(io.Discard, "", 0)
		srv.Start()
		defer srv.Close()
		if resp, err := srv.Client().Get(srv.URL + "/boom"); err == nil {
			resp.Body.Close()
			t.Fatalf("got %d, want the connection aborted (net/http's answer to a panic)", resp.StatusCode)
		}
		resp, err := srv.Client().Get(srv.URL + "/ok")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("after the panic: %d", resp.StatusCode)
		}
	})
}

func TestGoServe(t *testing.T) {
	t.Run("a short request starts on a worker and the caller does not wait", func(t *testing.T) {
		p := NewWarmWorkers(2)
		release, ran := make(chan struct{}), make(chan struct{})
		r := httptest.NewRequest("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", nil)
		p.GoServe(r, func() { <-release; close(ran) })
		if n := p.workers(); n != 1 {
			t.Fatalf("%d workers, want the request on one new worker", n)
		}
		close(release)
		<-ran
		// Once the worker is idle again the next request reuses it: no
		// second worker is started.
		waitIdle(t, p, 1)
		done := make(chan struct{})
		p.GoServe(r, func() { close(done) })
		<-done
		if n := p.workers(); n != 1 {
			t.Errorf("%d workers, want the one reused", n)
		}
	})

	t.Run("a watch runs on its own goroutine and takes no worker", func(t *testing.T) {
		p := NewWarmWorkers(2)
		release, ran := make(chan struct{}), make(chan struct{})
		r := httptest.NewRequest("GET", "/api/v1/pods?watch=true&fieldSelector=spec.nodeName%3Dn1", nil)
		p.GoServe(r, func() { <-release; close(ran) })
		if n := p.workers(); n != 0 {
			t.Fatalf("%d workers, want none for a watch", n)
		}
		close(release)
		<-ran
	})

	t.Run("with every worker busy, requests wait and are served oldest first by the first worker free", func(t *testing.T) {
		p := NewWarmWorkers(1)
		release := make(chan struct{})
		r := httptest.NewRequest("GET", "/api/v1/nodes/n1", nil)
		p.GoServe(r, func() { <-release })
		var (
			mu    sync.Mutex
			order []int
			wg    sync.WaitGroup
		)
		for i := range 5 {
			wg.Add(1)
			p.GoServe(r, func() { mu.Lock(); order = append(order, i); mu.Unlock(); wg.Done() })
		}
		mu.Lock()
		started := len(order)
		mu.Unlock()
		if started != 0 {
			t.Fatalf("%d queued requests ran while the only worker was busy", started)
		}
		close(release)
		wg.Wait()
		if want := []int{0, 1, 2, 3, 4}; !slices.Equal(order, want) {
			t.Errorf("served in order %v, want %v", order, want)
		}
		if n := p.workers(); n != 1 {
			t.Errorf("%d workers, want the limit of 1", n)
		}
	})

	t.Run("a node's heartbeat waits in front of requests queued before it", func(t *testing.T) {
		p := NewWarmWorkers(1)
		release := make(chan struct{})
		list := httptest.NewRequest("GET", "/api/v1/nodes", nil)
		renewal := httptest.NewRequest("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", nil)
		status := httptest.NewRequest("PATCH", "/api/v1/nodes/n1/status", nil)
		p.GoServe(list, func() { <-release })
		serve, served := servedInOrder(p)
		serve(list, "list 1")
		serve(list, "list 2")
		serve(renewal, "renewal")
		serve(list, "list 3")
		serve(status, "status")
		close(release)
		order := served()
		if want := []string{"renewal", "status", "list 1", "list 2", "list 3"}; !slices.Equal(order, want) {
			t.Errorf("served in order %v, want %v", order, want)
		}
	})

	t.Run("heartbeats alone cannot keep another request waiting", func(t *testing.T) {
		p := NewWarmWorkers(1)
		release := make(chan struct{})
		renewal := httptest.NewRequest("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", nil)
		p.GoServe(renewal, func() { <-release })
		serve, served := servedInOrder(p)
		serve(httptest.NewRequest("GET", "/api/v1/nodes", nil), "list")
		for range 3 * heartbeatBurst {
			serve(renewal, "renewal")
		}
		close(release)
		if i := slices.Index(served(), "list"); i != heartbeatBurst {
			t.Errorf("the list was served after %d heartbeats, want %d (heartbeatBurst)", i, heartbeatBurst)
		}
	})

	t.Run("requests from many goroutines at once are all served, on no more workers than the limit", func(t *testing.T) {
		p := NewWarmWorkers(3)
		r := httptest.NewRequest("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", nil)
		var served sync.WaitGroup
		var senders sync.WaitGroup
		for range 8 {
			senders.Go(func() {
				for range 500 {
					served.Add(1)
					p.GoServe(r, served.Done)
				}
			})
		}
		senders.Wait()
		finished := make(chan struct{})
		go func() { served.Wait(); close(finished) }()
		select {
		case <-finished:
		case <-time.After(30 * time.Second):
			t.Fatal("some of 4,000 requests were never served: a request was queued with no worker to take it")
		}
		if n := p.workers(); n > 3 {
			t.Errorf("%d workers, want at most 3", n)
		}
	})

	t.Run("when no worker has taken a queued request for StallAfter, queued and new requests start on their own", func(t *testing.T) {
		p := NewWarmWorkers(1)
		clk := testingclock.NewFakePassiveClock(time.Unix(1000, 0))
		p.clock = clk
		release := make(chan struct{})
		r := httptest.NewRequest("POST", "/api/v1/namespaces/a/configmaps", nil)
		p.GoServe(r, func() { <-release }) // the only worker, blocked
		queued, fresh := make(chan struct{}), make(chan struct{})
		p.GoServe(r, func() { close(queued) })
		clk.SetTime(clk.Now().Add(StallAfter / 2))
		inTime := make(chan struct{})
		p.GoServe(r, func() { close(inTime) })
		select {
		case <-queued:
			t.Fatal("a queued request ran before the stall was declared")
		default:
		}
		clk.SetTime(clk.Now().Add(StallAfter))
		p.GoServe(r, func() { close(fresh) })
		for name, ch := range map[string]chan struct{}{"the first queued": queued, "the second queued": inTime, "the new": fresh} {
			select {
			case <-ch:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s request did not run while the worker stayed blocked", name)
			}
		}
		close(release)
		// The worker is free again: requests go back to it.
		waitIdle(t, p, 1)
		release = make(chan struct{})
		defer close(release)
		p.GoServe(r, func() { <-release })
		p.mu.Lock()
		idle, stalled := len(p.idle), p.stalled
		p.mu.Unlock()
		if idle != 0 || stalled {
			t.Errorf("after the stall: %d workers idle, stalled %v; want the request on the worker", idle, stalled)
		}
	})
}

// BenchmarkGoServe is the hand-off of a short request to a warm worker
// (GoServe) and the worker's return to the pool, with as many requests in
// flight as the benchmark's goroutines; docs/performance.md records it.
func BenchmarkGoServe(b *testing.B) {
	p := NewWarmWorkers(256)
	r := httptest.NewRequest("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		done := make(chan struct{}, 1)
		fn := func() { done <- struct{}{} }
		for pb.Next() {
			p.GoServe(r, fn)
			<-done
		}
	})
}

// waitIdle waits until n of p's workers are parked, failing the test after
// 10 s.
func waitIdle(t *testing.T, p *WarmWorkers, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; runtime.Gosched() {
		p.mu.Lock()
		idle := len(p.idle)
		p.mu.Unlock()
		if idle == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d workers idle after 10 s, want %d", idle, n)
		}
	}
}

// servedInOrder returns serve, which queues a request named name on p,
// and served, which waits until every request given to serve has run and
// returns their names in the order they ran.
func servedInOrder(p *WarmWorkers) (serve func(r *http.Request, name string), served func() []string) {
	var (
		mu    sync.Mutex
		order []string
		wg    sync.WaitGroup
	)
	serve = func(r *http.Request, name string) {
		wg.Add(1)
		p.GoServe(r, func() { mu.Lock(); order = append(order, name); mu.Unlock(); wg.Done() })
	}
	served = func() []string {
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(order)
	}
	return serve, served
}
