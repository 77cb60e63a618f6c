package scraper

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestScrapeOnce drives the scraper against a real HTTPS agent stand-in
// whose counters advance by one CPU-second per 2 s of sample time.
func TestScrapeOnce(t *testing.T) {
	var n atomic.Int64
	var failing atomic.Bool
	agent := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics/resource" {
			http.Error(w, "wrong path "+r.URL.Path, http.StatusNotFound)
			return
		}
		if failing.Load() {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		i := n.Add(1)
		ts := int64(1700000000000) + i*2000
		fmt.Fprintf(w, "node_cpu_usage_seconds_total %d %d\nnode_memory_working_set_bytes 1000 %d\n", i, ts, ts)
		fmt.Fprintf(w, "container_cpu_usage_seconds_total{container=\"c\",namespace=\"ns\",pod=\"p\"} %d %d\n", 2*i, ts)
		fmt.Fprintf(w, "container_memory_working_set_bytes{container=\"c\",namespace=\"ns\",pod=\"p\"} 10 %d\n", ts)
	}))
	defer agent.Close()
	redirector := httptest.NewTLSServer(http.RedirectHandler(agent.URL+"/metrics/resource", http.StatusFound))
	defer redirector.Close()

	host := strings.TrimPrefix(agent.URL, "https://")
	targets := []Target{{Node: "n1", Host: host}, {Node: "evil", Host: strings.TrimPrefix(redirector.URL, "https://")}}
	s, err := New(Config{
		Resolution: time.Second,
		Targets:    func(context.Context) ([]Target, error) { return targets, nil },
		Client:     func(string) *http.Client { return agent.Client() },
		Clock:      clocktesting.NewFakeClock(time.Unix(1700000000, 0)),
		Rate:       -1, // no pacing: this test is not about it
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	s.ScrapeOnce(ctx)
	if _, ok := s.Node("n1"); ok {
		t.Error("usage after one scrape, want none until two samples")
	}
	s.ScrapeOnce(ctx)
	u, ok := s.Node("n1")
	if !ok || math.Abs(u.CPU-0.5) > 1e-9 || u.Window != 2*time.Second || u.Memory != 1000 {
		t.Errorf("node usage %+v %v, want 0.5 cores over 2s", u, ok)
	}
	p, ok := s.Pod("ns", "p")
	if !ok || len(p.Containers) != 1 || math.Abs(p.Containers[0].CPU-1) > 1e-9 {
		t.Errorf("pod usage %+v %v, want 1 core", p, ok)
	}
	if _, ok := s.Node("evil"); ok {
		t.Error("a redirecting agent has usage: the redirect was followed")
	}

	failing.Store(true)
	s.ScrapeOnce(ctx)
	if _, ok := s.Node("n1"); ok {
		t.Error("a node whose scrape failed keeps its old usage")
	}
	if _, ok := s.Pod("ns", "p"); ok {
		t.Error("a pod on a node whose scrape failed keeps its old usage")
	}
}

// TestAFailingNodeIsTriedLessOften: a node whose agent keeps failing is
// tried on passes 1, 2, 4, 8, 16, 24, … (skipped for up to 8 passes at a
// time), its failure is logged once per streak, and once it answers again
// it is scraped every pass.
func TestAFailingNodeIsTriedLessOften(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	var mu sync.Mutex // attempts and pass: the agent runs on its own goroutines
	var attempts []int
	pass := 0
	agent := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		attempts = append(attempts, pass)
		mu.Unlock()
		if failing.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "node_cpu_usage_seconds_total 1 1700000000000\nnode_memory_working_set_bytes 1 1700000000000\n")
	}))
	defer agent.Close()
	var logs strings.Builder
	s, err := New(Config{
		Targets: func(context.Context) ([]Target, error) {
			return []Target{{Node: "n1", Host: strings.TrimPrefix(agent.URL, "https://")}}, nil
		},
		Client: func(string) *http.Client { return agent.Client() },
		Clock:  clocktesting.NewFakeClock(time.Unix(1700000000, 0)),
		Rate:   -1, // no pacing: this test is not about it
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	scrapes := func(from, to int) []int {
		mu.Lock()
		attempts = nil
		mu.Unlock()
		for p := from; p <= to; p++ {
			mu.Lock()
			pass = p
			mu.Unlock()
			s.ScrapeOnce(context.Background())
		}
		mu.Lock()
		defer mu.Unlock()
		return append([]int(nil), attempts...)
	}
	tried := scrapes(1, 30)
	if want := []int{1, 2, 4, 8, 16, 24}; fmt.Sprint(tried) != fmt.Sprint(want) {
		t.Errorf("a failing node was tried on passes %v, want %v", tried, want)
	}
	if n := strings.Count(logs.String(), "scrape failed"); n != 1 {
		t.Errorf("%d failure lines for one streak, want 1:\n%s", n, logs.String())
	}

	failing.Store(false)
	tried = scrapes(31, 45)
	if len(tried) == 0 || tried[0] != 32 {
		t.Fatalf("after the agent recovered, first attempt on pass %v, want 32 (the next after 24 + 8)", tried)
	}
	if want := 45 - 32 + 1; len(tried) != want {
		t.Errorf("after recovery the node was tried %d times in passes 32–45, want every pass (%d)", len(tried), want)
	}
	if !strings.Contains(logs.String(), "scrape works again") {
		t.Errorf("no line says the node answers again:\n%s", logs.String())
	}
}

// connCounter counts the open server-side connections of the agents it is
// attached to (http.Server.ConnState) and signals every change.
type connCounter struct {
	mu       sync.Mutex
	open     int
	accepted int
	changed  chan struct{} // capacity 1: a change is never lost
}

func newConnCounter() *connCounter { return &connCounter{changed: make(chan struct{}, 1)} }

func (c *connCounter) track(_ net.Conn, state http.ConnState) {
	c.mu.Lock()
	switch state {
	case http.StateNew:
		c.open++
		c.accepted++
	case http.StateClosed, http.StateHijacked:
		c.open--
	}
	c.mu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

func (c *connCounter) counts() (open, accepted int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open, c.accepted
}

// waitForNoneOpen waits until no connection is open, failing after within.
func (c *connCounter) waitForNoneOpen(t *testing.T, within time.Duration) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		open, _ := c.counts()
		if open == 0 {
			return
		}
		select {
		case <-c.changed:
		case <-deadline.C:
			t.Fatalf("%d agent connections still open %v after the pass, want none", open, within)
		}
	}
}

// TestAPassLeavesNoConnectionOpen: agents reached through clients that keep
// connections alive (one client per node, as httptest builds them) hold no
// connection from the scraper once a pass is over, and the next pass
// scrapes them all the same, calling Client once per node and pass.
func TestAPassLeavesNoConnectionOpen(t *testing.T) {
	conns := newConnCounter()
	var n atomic.Int64
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		ts := int64(1700000000000) + i*2000
		fmt.Fprintf(w, "node_cpu_usage_seconds_total %d %d\nnode_memory_working_set_bytes 1000 %d\n", i, ts, ts)
	})
	const nodes = 3
	clients := map[string]*http.Client{}
	var targets []Target
	for i := range nodes {
		agent := httptest.NewUnstartedServer(handler)
		agent.Config.ConnState = conns.track
		agent.StartTLS()
		t.Cleanup(agent.Close)
		node := fmt.Sprintf("n%d", i)
		clients[node] = agent.Client()
		targets = append(targets, Target{Node: node, Host: strings.TrimPrefix(agent.URL, "https://")})
	}
	var mu sync.Mutex
	clientCalls := map[string]int{}
	s, err := New(Config{
		Targets: func(context.Context) ([]Target, error) { return targets, nil },
		Client: func(node string) *http.Client {
			mu.Lock()
			defer mu.Unlock()
			clientCalls[node]++
			return clients[node]
		},
		Clock: clocktesting.NewFakeClock(time.Unix(1700000000, 0)),
		Rate:  -1, // no pacing: this test is not about it
	})
	if err != nil {
		t.Fatal(err)
	}

	for pass := 1; pass <= 2; pass++ {
		s.ScrapeOnce(t.Context())
		if _, accepted := conns.counts(); accepted < pass*nodes {
			t.Fatalf("pass %d: the agents accepted %d connections, want at least %d", pass, accepted, pass*nodes)
		}
		conns.waitForNoneOpen(t, 10*time.Second)
	}
	for _, target := range targets {
		if _, ok := s.Node(target.Node); !ok {
			t.Errorf("%s has no usage after two passes: the second pass did not scrape it", target.Node)
		}
		if got := clientCalls[target.Node]; got != 2 {
			t.Errorf("Client(%q) called %d times in two passes, want 2", target.Node, got)
		}
	}
}

// A pass over more agents than its rate allows spreads their scrapes: with
// 10 a second, the 5 agents' scrapes start 100 ms apart on the clock, and
// none starts early.
func TestAPassIsPacedByItsRate(t *testing.T) {
	var served atomic.Int32
	agent := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		fmt.Fprint(w, "node_cpu_usage_seconds_total 1 1700000000000\nnode_memory_working_set_bytes 1 1700000000000\n")
	}))
	defer agent.Close()
	host := strings.TrimPrefix(agent.URL, "https://")
	clk := clocktesting.NewFakeClock(time.Unix(1700000000, 0))
	s, err := New(Config{
		Targets: func(context.Context) ([]Target, error) {
			return []Target{{"n1", host}, {"n2", host}, {"n3", host}, {"n4", host}, {"n5", host}}, nil
		},
		Client: func(string) *http.Client { return agent.Client() },
		Rate:   10,
		Clock:  clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.ScrapeOnce(context.Background()); close(done) }()
	for want := int32(1); want <= 5; want++ {
		// The pass has started scrape number want and waits on the clock
		// for the next (or, after the last, finishes).
		deadline := time.Now().Add(10 * time.Second)
		for served.Load() < want || (want < 5 && !clk.HasWaiters()) {
			if time.Now().After(deadline) {
				t.Fatalf("scrape %d did not happen: %d served", want, served.Load())
			}
			runtime.Gosched()
		}
		if got := served.Load(); got != want {
			t.Fatalf("%d scrapes after %v, want %d", got, time.Duration(want-1)*100*time.Millisecond, want)
		}
		if want < 5 {
			clk.Step(99 * time.Millisecond)
			if !clk.HasWaiters() {
				t.Fatalf("the pass stopped waiting %v early", time.Millisecond)
			}
			clk.Step(time.Millisecond)
		}
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the pass did not end after its last scrape")
	}
	if _, ok := s.Node("n5"); ok {
		t.Fatal("usage after one pass: a rate needs two")
	}
}

// TestAPassLogsOneLineForTheNodesWhoseStreaksChanged: twenty nodes failing in
// one pass are one info line (their number and the first five names), not
// twenty; so are twenty nodes answering again.
func TestAPassLogsOneLineForTheNodesWhoseStreaksChanged(t *testing.T) {
	var logs strings.Builder
	s, err := New(Config{
		Targets: func(context.Context) ([]Target, error) { return nil, nil },
		Client:  func(string) *http.Client { return http.DefaultClient },
		Clock:   clocktesting.NewFakeClock(time.Unix(1700000000, 0)),
		Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	var targets []Target
	tried := make([]bool, 20)
	errs := make([]error, 20)
	for i := range 20 {
		targets = append(targets, Target{Node: fmt.Sprintf("n%02d", i)})
		tried[i], errs[i] = true, fmt.Errorf("dial n%02d: connection refused", i)
	}
	s.noteFailures(targets, tried, errs)
	s.noteFailures(targets, tried, errs) // the streaks go on: nothing new
	want := `msg="resource metrics: scrape failed; retrying less often while it fails" nodes=20 first="[n00 n01 n02 n03 n04]" err="dial n00: connection refused"`
	if got := strings.TrimSpace(logs.String()); !strings.HasSuffix(got, want) || strings.Count(got, "\n") != 0 {
		t.Fatalf("logged:\n%s\nwant one line ending in\n%s", got, want)
	}
	logs.Reset()
	s.noteFailures(targets, tried, make([]error, 20))
	want = `msg="resource metrics: scrape works again" nodes=20 first="[n00 n01 n02 n03 n04]"`
	if got := strings.TrimSpace(logs.String()); !strings.HasSuffix(got, want) || strings.Count(got, "\n") != 0 {
		t.Fatalf("logged:\n%s\nwant one line ending in\n%s", got, want)
	}
}
