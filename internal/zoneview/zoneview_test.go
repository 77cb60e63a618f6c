package zoneview

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
	"github.com/nodeplane/nodeplane/internal/controller/nodelifecycle"
)

func sample(i int) nodelifecycle.Summary {
	return nodelifecycle.Summary{
		Time:  time.Date(2026, 7, 1, 12, 0, i, 0, time.UTC),
		Nodes: i,
		Zones: []nodelifecycle.ZoneSummary{{Name: "r/a", State: nodelifecycle.StateNormal, Size: i}},
	}
}

type snapshot struct {
	Leading bool                    `json:"leading"`
	Samples []nodelifecycle.Summary `json:"samples"`
}

func TestRingKeepsTheLatestSamples(t *testing.T) {
	tests := []struct {
		name     string
		capacity int
		recorded int
		want     []int // Nodes of the samples kept, oldest first
	}{
		{"an empty ring has no samples", 3, 0, nil},
		{"a ring not yet full keeps all", 3, 2, []int{0, 1}},
		{"a full ring drops the oldest", 3, 7, []int{4, 5, 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := New(Config{Samples: tt.capacity})
			for i := 0; i < tt.recorded; i++ {
				a.Record(sample(i))
			}
			rec := httptest.NewRecorder()
			a.API().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, ZonesPath, nil))
			var s snapshot
			if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
				t.Fatalf("%v: %s", err, rec.Body)
			}
			var got []int
			for _, x := range s.Samples {
				got = append(got, x.Nodes)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) || !s.Leading {
				t.Errorf("samples %v leading %v, want %v and true", got, s.Leading, tt.want)
			}
		})
	}
}

func TestAPIRefusesWritesAndUnknownPaths(t *testing.T) {
	tests := []struct {
		name   string
		method string
		path   string
		want   int
	}{
		{"a POST to the zones is refused", http.MethodPost, ZonesPath, http.StatusMethodNotAllowed},
		{"a DELETE of the events is refused", http.MethodDelete, EventsPath, http.StatusMethodNotAllowed},
		{"an unknown path is not found", http.MethodGet, APIPrefix + "nodes", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			New(Config{}).API().ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
			if rec.Code != tt.want || !strings.Contains(rec.Body.String(), `"kind":"Status"`) {
				t.Errorf("got %d %s, want %d with a Status", rec.Code, rec.Body, tt.want)
			}
		})
	}
}

// events reads server-sent events from body, sending each "event data"
// pair on the returned channel.
func events(body io.Reader) <-chan [2]string {
	out := make(chan [2]string, 64)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 1<<20), 1<<22)
		var ev string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				out <- [2]string{ev, strings.TrimPrefix(line, "data: ")}
			}
		}
	}()
	return out
}

func next(t *testing.T, ch <-chan [2]string) [2]string {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("stream ended")
		}
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
	}
	return [2]string{}
}

func TestEventsStreamTheSnapshotThenEachSample(t *testing.T) {
	a := New(Config{})
	a.Record(sample(1))
	srv := httptest.NewServer(a.API())
	defer srv.Close()
	resp, err := http.Get(srv.URL + EventsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	ch := events(resp.Body)
	first := next(t, ch)
	var s snapshot
	if err := json.Unmarshal([]byte(first[1]), &s); first[0] != "snapshot" || err != nil || len(s.Samples) != 1 {
		t.Fatalf("first event %v (%v)", first, err)
	}
	for i := 2; i <= 4; i++ {
		a.Record(sample(i))
		e := next(t, ch)
		var got nodelifecycle.Summary
		if err := json.Unmarshal([]byte(e[1]), &got); e[0] != "sample" || err != nil || got.Nodes != i {
			t.Fatalf("event %v (%v), want sample %d", e, err, i)
		}
	}
}

// asUser puts the user named in the X-Test-User header on the request, as
// the server's authentication does.
func asUser(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := &authn.User{Name: r.Header.Get("X-Test-User")}
		h.ServeHTTP(w, r.WithContext(authn.WithUser(r.Context(), u)))
	})
}

// TestOneUserCannotTakeEveryStream: a user at MaxPerUser streams gets 429,
// another user still gets a stream, and a closed stream frees its place.
func TestOneUserCannotTakeEveryStream(t *testing.T) {
	a := New(Config{MaxSubscribers: 10, MaxPerUser: 2})
	srv := httptest.NewServer(asUser(a.API()))
	defer srv.Close()
	open := func(user string) (*http.Response, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+EventsPath, nil)
		req.Header.Set("X-Test-User", user)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, cancel
	}
	var cancels []context.CancelFunc
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	for i := 0; i < 2; i++ {
		resp, cancel := open("mallory")
		cancels = append(cancels, cancel)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("mallory's stream %d: %d", i, resp.StatusCode)
		}
	}
	resp, cancel := open("mallory")
	cancel()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("mallory's third stream: %d, want 429", resp.StatusCode)
	}
	resp, cancel = open("alice")
	cancels = append(cancels, cancel)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("alice while mallory holds her share: %d", resp.StatusCode)
	}
	cancels[0]()
	deadline := time.Now().Add(10 * time.Second)
	for a.Subscribers() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams after mallory closed one, want 2", a.Subscribers())
		}
		runtime.Gosched()
	}
	resp, cancel = open("mallory")
	cancels = append(cancels, cancel)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("mallory after closing a stream: %d", resp.StatusCode)
	}
}

func TestStreamsAreBounded(t *testing.T) {
	a := New(Config{MaxSubscribers: 2})
	srv := httptest.NewServer(a.API())
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := 0; i < 2; i++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+EventsPath, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %v %v", i, resp, err)
		}
		defer resp.Body.Close()
	}
	resp, err := http.Get(srv.URL + EventsPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("third stream: %d %v, want 429 with Retry-After", resp.StatusCode, resp.Header)
	}
}

// TestASlowReaderDoesNotHoldUpOthers: one client opens the event stream and
// never reads; samples large enough to fill the socket buffers keep coming.
// Record never blocks, a reading client gets every sample, and the slow
// one is disconnected (dropped from the fan-out, its handler gone).
func TestASlowReaderDoesNotHoldUpOthers(t *testing.T) {
	a := New(Config{Buffer: 2, WriteTimeout: time.Second})
	srv := httptest.NewServer(a.API())
	defer srv.Close()

	slow, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if tc, ok := slow.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096)
	}
	fmt.Fprintf(slow, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", EventsPath)

	resp, err := http.Get(srv.URL + EventsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	fast := events(resp.Body)
	next(t, fast) // snapshot
	deadline := time.Now().Add(10 * time.Second)
	for a.Subscribers() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the slow client's stream never opened")
		}
		runtime.Gosched()
	}

	// Samples of ~200 kB each: keep recording until the slow client's
	// socket buffers (their size is the kernel's business: up to several
	// MB on loopback) are full and its queue overflows; at most 500 (100
	// MB), each one read in order by the fast client.
	big := sample(0)
	for i := 0; i < 1000; i++ {
		big.Worst = append(big.Worst, nodelifecycle.NodeAge{Name: strings.Repeat("n", 200) + fmt.Sprint(i), Zone: "r/a"})
	}
	const most = 500
	for i := 1; a.Dropped() == 0; i++ {
		if i > most {
			t.Fatalf("the slow client was not dropped after %d samples", most)
		}
		big.Nodes = i
		done := make(chan struct{})
		go func() { a.Record(big); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("Record %d blocked", i)
		}
		e := next(t, fast)
		var got nodelifecycle.Summary
		if err := json.Unmarshal([]byte(e[1]), &got); err != nil || got.Nodes != i {
			t.Fatalf("reading client: sample %d is %v (%v)", i, got.Nodes, err)
		}
	}
	if a.Dropped() != 1 {
		t.Errorf("dropped %d subscribers, want the slow one", a.Dropped())
	}
	deadline = time.Now().Add(10 * time.Second)
	for a.Subscribers() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d subscribers, want only the reading one", a.Subscribers())
		}
		runtime.Gosched()
	}
}

func TestAssetsAreThePageWithAStrictPolicy(t *testing.T) {
	tests := []struct {
		name, path, want string
	}{
		{"the index is the page", Prefix, `<script src="app.js"`},
		{"the script is served", Prefix + "app.js", "api/events"},
		{"the style sheet is served", Prefix + "app.css", "FullDisruption"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			Assets().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
			if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), tt.want) {
				t.Fatalf("%d %.200s", rec.Code, rec.Body)
			}
			csp := rec.Header().Get("Content-Security-Policy")
			if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
				t.Errorf("CSP %q", csp)
			}
		})
	}
	rec := httptest.NewRecorder()
	Assets().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Prefix, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST %s: %d", Prefix, rec.Code)
	}
}
