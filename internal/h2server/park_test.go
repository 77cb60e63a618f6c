package h2server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"

	"golang.org/x/net/http2"
)

// parked is what a parking handler hands the test once it has returned.
type parked struct {
	w      http.ResponseWriter
	r      *http.Request
	finish func(aborted bool)
	reset  <-chan struct{} // closed when Park's onReset is called
	resp   *http.Response  // the client's side (parkOne)
}

// parkingHandler parks every request after writing and flushing "head\n",
// and sends the parked response on the channel once ServeHTTP has
// returned.
func parkingHandler() (http.Handler, <-chan parked) {
	ch := make(chan parked, 10)
	inner := func(w http.ResponseWriter, r *http.Request, onReset func()) func(bool) {
		fmt.Fprintln(w, "head")
		w.(http.Flusher).Flush()
		return w.(interface{ Park(func()) func(bool) }).Park(onReset)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reset := make(chan struct{})
		var once sync.Once
		finish := inner(w, r, func() { once.Do(func() { close(reset) }) })
		// Handed over from a goroutine that starts after this handler has
		// returned its stream to the server (run's deferred end ran).
		go func() { ch <- parked{w: w, r: r, finish: finish, reset: reset} }()
	}), ch
}

func receive(t *testing.T, ch <-chan parked) parked {
	t.Helper()
	select {
	case p := <-ch:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("no request was parked within 10 s")
		return parked{}
	}
}

func TestAParkedResponseGoesOnAfterItsHandlerReturns(t *testing.T) {
	h, ch := parkingHandler()
	url, client, _ := startServer(t, Config{}, h)
	resp, err := client.Get(url + "/watch")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line := make([]byte, len("head\n"))
	if _, err := io.ReadFull(resp.Body, line); err != nil || string(line) != "head\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	p := receive(t, ch)
	if err := p.r.Context().Err(); err != nil {
		t.Fatalf("the parked request's context ended when its handler returned: %v", err)
	}
	// Written and flushed from another goroutine, after the handler returned.
	fmt.Fprintln(p.w, "tail")
	p.w.(http.Flusher).Flush()
	if _, err := io.ReadFull(resp.Body, line); err != nil || string(line) != "tail\n" {
		t.Fatalf("second line %q, %v", line, err)
	}
	p.finish(false)
	if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) != 0 {
		t.Fatalf("after finish: %q, %v (want a clean end of the body)", rest, err)
	}
	select {
	case <-p.r.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("finish did not end the request's context")
	}
	select {
	case <-p.reset:
		t.Fatal("a clean finish called onReset")
	default:
	}
	p.finish(false) // a second finish does nothing
	if _, err := p.w.Write([]byte("late")); err == nil {
		if err := p.w.(interface{ FlushError() error }).FlushError(); err == nil {
			t.Fatal("a write after finish was accepted")
		}
	}
}

func TestAClientThatCancelsEndsAParkedRequestsContext(t *testing.T) {
	h, ch := parkingHandler()
	url, client, _ := startServer(t, Config{}, h)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/watch", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := receive(t, ch)
	cancel()
	select {
	case <-p.r.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the client's reset did not cancel the parked request's context")
	}
	select {
	case <-p.reset:
	case <-time.After(10 * time.Second):
		t.Fatal("the client's reset did not call Park's onReset")
	}
	fmt.Fprintln(p.w, "late")
	if err := p.w.(interface{ FlushError() error }).FlushError(); err == nil {
		t.Fatal("a flush to a reset stream succeeded")
	}
	p.finish(false)
}

func TestAParkedStreamCountsAgainstTheStreamLimitUntilFinished(t *testing.T) {
	h, ch := parkingHandler()
	url, _, _ := startServer(t, Config{MaxConcurrentStreams: 1}, h)
	c := dialRaw(t, url)
	c.headers(1, "GET", "/watch", true)
	p := receive(t, ch)
	c.headers(3, "GET", "/watch", true)
	f := c.readUntil("a reset of stream 3", func(f http2.Frame) bool {
		rst, ok := f.(*http2.RSTStreamFrame)
		return ok && rst.StreamID == 3
	})
	if code := f.(*http2.RSTStreamFrame).ErrCode; code != http2.ErrCodeRefusedStream {
		t.Fatalf("stream 3 reset with %v, want REFUSED_STREAM while stream 1 is parked", code)
	}
	p.finish(false)
	c.readUntil("the end of stream 1", func(f http2.Frame) bool {
		return f.Header().StreamID == 1 && f.Header().Flags.Has(http2.FlagDataEndStream)
	})
	c.headers(5, "GET", "/watch", true)
	c.readUntil("the response on stream 5", func(f http2.Frame) bool {
		h, ok := f.(*http2.MetaHeadersFrame)
		return ok && h.StreamID == 5
	})
	receive(t, ch).finish(false)
}

// waitUntil calls step until cond holds, and fails with what() if it does
// not within 10 s: for what has no event to wait on (a collection, a
// goroutine ending).
func waitUntil(t *testing.T, cond func() bool, step func(), what func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(what())
		}
		step()
	}
}

// parkOne requests /watch from a parking handler and returns the parked
// response, once its handler has returned.
func parkOne(t *testing.T, client *http.Client, url string, ch <-chan parked) parked {
	t.Helper()
	resp, err := client.Get(url + "/watch")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	p := receive(t, ch)
	p.resp = resp
	return p
}

// checkShutdownWaits checks that shutdown does not return while p is
// parked, and returns once p is finished.
func checkShutdownWaits(t *testing.T, p parked, shutdown func(context.Context) error) {
	t.Helper()
	shutdownDone := make(chan error, 1)
	go func() { shutdownDone <- shutdown(context.Background()) }()
	select {
	case err := <-shutdownDone:
		t.Fatalf("Shutdown returned (%v) while a parked response was open", err)
	case <-time.After(200 * time.Millisecond): // a bounded window in which Shutdown must not return
	}
	p.finish(false)
	select {
	case err := <-shutdownDone:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return after the parked response finished")
	}
}

func TestShutdownWaitsForParkedResponses(t *testing.T) {
	h, ch := parkingHandler()
	url, client, hs := startServer(t, Config{}, h)
	checkShutdownWaits(t, parkOne(t, client, url, ch), hs.Shutdown)
}

func TestAParkedStreamKeepsNeitherItsRequestNorItsSentHeaders(t *testing.T) {
	type handedOver struct {
		w      http.ResponseWriter
		ctx    context.Context
		finish func(bool)
		req    weak.Pointer[http.Request]
	}
	ch := make(chan handedOver, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "head")
		w.(http.Flusher).Flush()
		finish := w.(interface{ Park(func()) func(bool) }).Park(nil)
		// What a parked watch keeps: the writer and the request's context.
		ch <- handedOver{w: w, ctx: r.Context(), finish: finish, req: weak.Make(r)}
	})
	url, client, _ := startServer(t, Config{}, h)
	resp, err := client.Get(url + "/watch")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain" {
		t.Fatalf("Content-Type %q: the headers set before the flush were not sent", ct)
	}
	var p handedOver
	select {
	case p = <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no request was parked within 10 s")
	}
	defer p.finish(false)
	if hdr := p.w.(*stream).header; hdr != nil {
		t.Fatalf("the parked stream keeps its sent headers: %v", hdr)
	}
	// The request (with its header map and URL) is garbage once the
	// handler has returned; its context lives on.
	waitUntil(t, func() bool { return p.req.Value() == nil }, runtime.GC, func() string {
		return "the parked stream's request is still reachable 10 s after its handler returned"
	})
	if err := p.ctx.Err(); err != nil {
		t.Fatalf("the request's context ended while the response is parked: %v", err)
	}
	fmt.Fprintln(p.w, "tail")
	p.w.(http.Flusher).Flush()
	line := make([]byte, len("head\ntail\n"))
	if _, err := io.ReadFull(resp.Body, line); err != nil || string(line) != "head\ntail\n" {
		t.Fatalf("body %q, %v", line, err)
	}
}
