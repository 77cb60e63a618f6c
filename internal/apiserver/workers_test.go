package apiserver

import (
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestWarmWorkers(t *testing.T) {
	t.Run("a request runs on a worker, and the caller waits for it", func(t *testing.T) {
		p := NewWarmWorkers(2)
		done := false
		p.run(func() { done = true })
		if !done || p.running.Load() != 1 {
			t.Fatalf("done %v, workers %d: want the function run on one new worker", done, p.running.Load())
		}
		p.run(func() {})
		if p.running.Load() != 1 {
			t.Errorf("workers %d after a second request, want the idle worker reused", p.running.Load())
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
		if n := p.running.Load(); n != 1 {
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
		if count != 200 || p.running.Load() > 4 {
			t.Errorf("%d of 200 ran on %d workers (limit 4)", count, p.running.Load())
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
		if !ran || p.running.Load() != 1 {
			t.Errorf("after the panic: ran %v on %d workers, want the same worker to serve again", ran, p.running.Load())
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
		if n := p.running.Load(); n != 0 {
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
		if n := p.running.Load(); n != 0 {
			t.Fatalf("%d workers after a watch, want none", n)
		}
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/api/v1/nodes", nil))
		if n := p.running.Load(); n != 1 {
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
		if n := p.running.Load(); n != 1 {
			t.Fatalf("%d workers, want the request on one new worker", n)
		}
		close(release)
		<-ran
		// The worker is idle again: the next request reuses it.
		done := make(chan struct{})
		for deadline := time.Now().Add(10 * time.Second); ; {
			select {
			case p.tasks <- &warmTask{fn: func() { close(done) }}:
			default:
				if time.Now().After(deadline) {
					t.Fatal("the worker never became idle")
				}
				runtime.Gosched()
				continue
			}
			break
		}
		<-done
		if n := p.running.Load(); n != 1 {
			t.Errorf("%d workers, want the idle one reused", n)
		}
	})

	t.Run("a watch runs on its own goroutine and takes no worker", func(t *testing.T) {
		p := NewWarmWorkers(2)
		release, ran := make(chan struct{}), make(chan struct{})
		r := httptest.NewRequest("GET", "/api/v1/pods?watch=true&fieldSelector=spec.nodeName%3Dn1", nil)
		p.GoServe(r, func() { <-release; close(ran) })
		if n := p.running.Load(); n != 0 {
			t.Fatalf("%d workers, want none for a watch", n)
		}
		close(release)
		<-ran
	})

	t.Run("with every worker busy a short request starts on its own goroutine", func(t *testing.T) {
		p := NewWarmWorkers(1)
		release := make(chan struct{})
		defer close(release)
		r := httptest.NewRequest("GET", "/api/v1/nodes/n1", nil)
		p.GoServe(r, func() { <-release })
		ran := make(chan struct{})
		p.GoServe(r, func() { close(ran) })
		select {
		case <-ran:
		case <-time.After(10 * time.Second):
			t.Fatal("the second request did not run while the only worker was busy")
		}
		if n := p.running.Load(); n != 1 {
			t.Errorf("%d workers, want the limit of 1", n)
		}
	})
}
