package apiserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/net/http2"

	"github.com/nodeplane/nodeplane/internal/h2server"
)

// serveOver serves h over TLS, over HTTP/2 with internal/h2server when h2,
// else over HTTP/1.1; it returns the base URL and a client for it.
func serveOver(t *testing.T, h http.Handler, h2 bool) (string, *http.Client) {
	t.Helper()
	ts := httptest.NewUnstartedServer(h)
	if h2 {
		ts.TLS = &tls.Config{NextProtos: []string{"h2"}}
		h2server.New(h2server.Config{}).Attach(ts.Config, h)
	}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	var tr http.RoundTripper = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, MaxConnsPerHost: 100}
	if h2 {
		tr = &http2.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	}
	t.Cleanup(func() { tr.(interface{ CloseIdleConnections() }).CloseIdleConnections() })
	return ts.URL, &http.Client{Transport: tr}
}

// openWatch starts a JSON watch of path as admin; the events are read line
// by line from the returned scanner.
func openWatch(t *testing.T, ctx context.Context, client *http.Client, url string) (*bufio.Scanner, *http.Response) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(headerUser, admin.name)
	req.Header.Set(headerGroups, strings.Join(admin.groups, ","))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %s", resp.Status)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return bufio.NewScanner(resp.Body), resp
}

// nextEvent reads the next event's type and object name, failing after 10 s.
func nextEvent(t *testing.T, sc *bufio.Scanner) (typ, name string) {
	t.Helper()
	got := make(chan bool, 1)
	go func() { got <- sc.Scan() }()
	select {
	case ok := <-got:
		if !ok {
			t.Fatalf("the watch ended: %v", sc.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
	}
	var ev struct {
		Type   string `json:"type"`
		Object struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"object"`
	}
	if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
		t.Fatalf("event %q: %v", sc.Bytes(), err)
	}
	return ev.Type, ev.Object.Metadata.Name
}

// wantEnd waits (at most 10 s) for the watch's body to end.
func wantEnd(t *testing.T, sc *bufio.Scanner, why string) {
	t.Helper()
	ended := make(chan struct{})
	go func() {
		for sc.Scan() { //nolint:revive // drain until the end
		}
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatalf("the watch did not end within 10 s after %s", why)
	}
}

// metricValue reads a gauge's or a counter's value.
func metricValue(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	if m.Gauge != nil {
		return m.Gauge.GetValue()
	}
	return m.Counter.GetValue()
}

// goroutinesIn counts the goroutines whose stack passes through fn.
func goroutinesIn(fn string) int {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	n := 0
	for _, g := range strings.Split(b.String(), "\n\n") {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}

// eventually polls cond (every 10 ms, at most 10 s) and fails with what
// unless it comes true: the server ends watches and their goroutines
// asynchronously, over real sockets, so there is no event to wait on.
func eventually(t *testing.T, cond func() bool, what func() string) {
	t.Helper()
	for range 1000 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond) // poll interval of a bounded wait
	}
	t.Fatal(what())
}

// waitGoroutinesIn waits until the count of goroutines in fn is want.
func waitGoroutinesIn(t *testing.T, fn string, want int) {
	t.Helper()
	var n int
	eventually(t, func() bool { n = goroutinesIn(fn); return n == want },
		func() string { return fmt.Sprintf("%d goroutines in %s, want %d", n, fn, want) })
}

func TestWatchesOverHTTP2HoldNoGoroutineWhileIdle(t *testing.T) {
	const watches = 20
	const inWatch = "apiserver.(*watchStream)"
	for _, tt := range []struct {
		name        string
		h2          bool
		wantWaiting int
	}{
		{name: "over HTTP/1.1 each watch keeps its handler's goroutine", h2: false, wantWaiting: watches},
		{name: "over HTTP/2 the watches are parked and no goroutine waits in them", h2: true, wantWaiting: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := NewMetrics(reg)
			_, h := newTestServer(t, Config{Metrics: m})
			url, client := serveOver(t, h, tt.h2)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var scs []*bufio.Scanner
			for range watches {
				sc, _ := openWatch(t, ctx, client, url+"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=0")
				scs = append(scs, sc)
			}
			open := m.watches.WithLabelValues("WATCH", "", "v1", "configmaps", "", "")
			if got := metricValue(open); got != watches {
				t.Fatalf("%v watches open, want %d", got, watches)
			}
			waitGoroutinesIn(t, inWatch, tt.wantWaiting)

			for i := range 3 {
				name := fmt.Sprintf("cm-%d", i)
				if r := do(t, h, admin, "POST", "/api/v1/namespaces/default/configmaps",
					map[string]any{"metadata": map[string]any{"name": name}}); r.code != http.StatusCreated {
					t.Fatalf("create: %d %s", r.code, r.body)
				}
				for w, sc := range scs {
					if typ, got := nextEvent(t, sc); typ != "ADDED" || got != name {
						t.Fatalf("watch %d: %s %s, want ADDED %s", w, typ, got, name)
					}
				}
			}
			waitGoroutinesIn(t, inWatch, tt.wantWaiting)

			// The clients go away: every watch ends, its metrics are
			// recorded once, and nothing is left running.
			cancel()
			eventually(t, func() bool { return metricValue(open) == 0 },
				func() string { return fmt.Sprintf("%v watches still open after their clients left", metricValue(open)) })
			if got := metricValue(m.requests.WithLabelValues("WATCH", "", "v1", "configmaps", "", "namespace", "200")); got != watches {
				t.Errorf("%v watch requests counted, want %d", got, watches)
			}
			waitGoroutinesIn(t, inWatch, 0)
		})
	}
}

func TestAParkedWatchEndsAtItsTimeoutAndWhenTheServerStops(t *testing.T) {
	s, h := newTestServer(t, Config{})
	url, client := serveOver(t, h, true)
	ctx := context.Background()

	short, _ := openWatch(t, ctx, client, url+"/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1")
	long, _ := openWatch(t, ctx, client, url+"/api/v1/namespaces/default/configmaps?watch=1")
	wantEnd(t, short, "its one-second timeout")

	if r := do(t, h, admin, "POST", "/api/v1/namespaces/default/configmaps",
		map[string]any{"metadata": map[string]any{"name": "after-timeout"}}); r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	if typ, name := nextEvent(t, long); typ != "ADDED" || name != "after-timeout" {
		t.Fatalf("the other watch got %s %s", typ, name)
	}

	stopped := make(chan struct{})
	go func() { s.Stop(); close(stopped) }()
	wantEnd(t, long, "the server stopped")
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return: a parked watch was not released")
	}
}
