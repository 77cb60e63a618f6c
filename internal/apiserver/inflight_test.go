package apiserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
	"github.com/nodeplane/nodeplane/internal/apiserver/authz"
	"github.com/nodeplane/nodeplane/internal/apiserver/flowcontrol"
)

const nodeLeasePath = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/"

func nodeUser(name string) *authn.User {
	return &authn.User{Name: "system:node:" + name, Groups: []string{authn.GroupNodes, authn.GroupAuthenticated}}
}

var adminUser = &authn.User{Name: "admin", Groups: []string{authn.GroupMasters, authn.GroupAuthenticated}}

func asUser(r *http.Request, u *authn.User) *http.Request {
	return r.WithContext(authn.WithUser(r.Context(), u))
}

func mustLimit(t *testing.T, next http.Handler, cfg InFlightConfig) *inFlight {
	t.Helper()
	h, err := LimitInFlight(next, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h.(*inFlight)
}

// holdOneRequest returns a limiter with 20 seats over a handler that
// answers 200 at once, except for req (sent as u), which it holds in its
// seat until release is called; release returns once req is done.
func holdOneRequest(t *testing.T, req *http.Request, u *authn.User) (h *inFlight, release func()) {
	t.Helper()
	let := make(chan struct{})
	held := make(chan struct{})
	q := req.URL.Query()
	q.Set("hold", "1")
	req.URL.RawQuery = q.Encode()
	h = mustLimit(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("hold") == "1" {
			close(held)
			<-let
		}
	}), InFlightConfig{Seats: 20, RequestTimeout: time.Minute})
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), asUser(req, u))
	}()
	<-held
	return h, func() { close(let); <-done }
}

// With 20 seats: node heartbeats 4 (1 per node), other node requests 4 (1
// per node), admin 6.
func TestLimitInFlightSharesSeatsByLevelAndIdentity(t *testing.T) {
	h, release := holdOneRequest(t, httptest.NewRequest(http.MethodPut, nodeLeasePath+"n1", nil), nodeUser("n1")) // n1 holds its one heartbeat seat

	tests := []struct {
		name     string
		method   string
		url      string
		user     *authn.User
		wantCode int
	}{
		{"the same node's second renewal is refused with 429", http.MethodPut, nodeLeasePath + "n1", nodeUser("n1"), http.StatusTooManyRequests},
		{"another node renews", http.MethodPut, nodeLeasePath + "n2", nodeUser("n2"), http.StatusOK},
		{"the same node's other requests have their own seats", http.MethodGet, "/api/v1/nodes/n1", nodeUser("n1"), http.StatusOK},
		{"a watch is never counted", http.MethodGet, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?watch=true", nodeUser("n1"), http.StatusOK},
		{"a pod log is long-running and never counted", http.MethodGet, "/api/v1/namespaces/default/pods/p/log?follow=true", nodeUser("n1"), http.StatusOK},
		{"an administrator writes", http.MethodPost, "/api/v1/namespaces/default/configmaps", adminUser, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, asUser(httptest.NewRequest(tt.method, tt.url, nil), tt.user))
			if rec.Code != tt.wantCode {
				t.Fatalf("got %d, want %d", rec.Code, tt.wantCode)
			}
			if tt.wantCode == http.StatusTooManyRequests {
				if rec.Header().Get("Retry-After") != "1" {
					t.Errorf("Retry-After %q, want 1", rec.Header().Get("Retry-After"))
				}
				st := decodeStatus(t, rec.Body.Bytes())
				if st.Reason != metav1.StatusReasonTooManyRequests {
					t.Errorf("reason %q, want %q", st.Reason, metav1.StatusReasonTooManyRequests)
				}
			}
		})
	}
	release()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, asUser(httptest.NewRequest(http.MethodPut, nodeLeasePath+"n1", nil), nodeUser("n1")))
	if rec.Code != http.StatusOK {
		t.Errorf("after the seat is freed the node's renewal got %d, want 200", rec.Code)
	}
	if got := h.fc.Stats(flowcontrol.NodeHeartbeat).Rejected[flowcontrol.FlowFull]; got != 1 {
		t.Errorf("heartbeat rejections counted %d, want 1", got)
	}
}

func TestLimitInFlightDeadlines(t *testing.T) {
	tests := []struct {
		name         string
		url          string
		wantDeadline bool
	}{
		{"a request must finish within the request timeout", "/api/v1/nodes", true},
		{"a watch has no deadline", "/api/v1/nodes?watch=1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got bool
			h := mustLimit(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, got = r.Context().Deadline()
			}), InFlightConfig{Seats: 20, RequestTimeout: time.Minute})
			h.ServeHTTP(httptest.NewRecorder(), asUser(httptest.NewRequest(http.MethodGet, tt.url, nil), adminUser))
			if got != tt.wantDeadline {
				t.Errorf("deadline set: %v, want %v", got, tt.wantDeadline)
			}
		})
	}
}

func TestLimitInFlightUsesADeadlineTheRequestAlreadyHas(t *testing.T) {
	tests := []struct {
		name     string
		has      time.Duration // the request's own deadline from now; 0: none
		wantSame bool          // the handler gets the request's own context
	}{
		{"a deadline no later than the request timeout is kept, context and all", 30 * time.Second, true},
		{"a later deadline is cut to the request timeout", time.Hour, false},
		{"a request without one gets the request timeout", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := asUser(httptest.NewRequest(http.MethodPut, nodeLeasePath+"n1", strings.NewReader("the lease")), adminUser)
			if tt.has > 0 {
				ctx, cancel := context.WithTimeout(req.Context(), tt.has)
				defer cancel()
				req = req.WithContext(ctx)
			}
			sent := req.Body
			var got context.Context
			var read string
			h := mustLimit(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = r.Context()
				b, _ := io.ReadAll(r.Body)
				read = string(b)
			}), InFlightConfig{Seats: 20, RequestTimeout: time.Minute})
			start := time.Now()
			h.ServeHTTP(httptest.NewRecorder(), req)
			if read != "the lease" {
				t.Fatalf("the handler read %q", read)
			}
			if req.Body != sent {
				t.Fatal("the caller's request came back with another body")
			}
			if same := got == req.Context(); same != tt.wantSame {
				t.Fatalf("handler got the request's own context: %v, want %v", same, tt.wantSame)
			}
			d, ok := got.Deadline()
			if !ok || d.After(start.Add(time.Minute+time.Second)) {
				t.Fatalf("the handler's deadline %v (set %v) is not within the request timeout", d, ok)
			}
		})
	}
}

func TestInFlightDeadlineIsGivenOnlyToAPIRequestsThatAreNotLongRunning(t *testing.T) {
	cfg := InFlightConfig{RequestTimeout: time.Minute}
	tests := []struct {
		name   string
		method string
		url    string
		cfg    InFlightConfig
		want   time.Duration
	}{
		{"a lease renewal gets the request timeout", http.MethodPut, nodeLeasePath + "n1", cfg, time.Minute},
		{"discovery of the core group gets it", http.MethodGet, "/api", cfg, time.Minute},
		{"a list gets it", http.MethodGet, "/apis/apps/v1/deployments", cfg, time.Minute},
		{"a watch gets none", http.MethodGet, "/api/v1/pods?watch=true&fieldSelector=spec.nodeName%3Dn1", cfg, 0},
		{"a watch by path gets none", http.MethodGet, "/api/v1/watch/nodes", cfg, 0},
		{"pod logs get none", http.MethodGet, "/api/v1/namespaces/d/pods/p/log?follow=true", cfg, 0},
		{"the zone view's event stream gets none", http.MethodGet, "/ui/api/events", cfg, 0},
		{"metrics get none (they do not go through LimitInFlight)", http.MethodGet, "/metrics", cfg, 0},
		{"a path that only starts like the API gets none", http.MethodGet, "/apiary", cfg, 0},
		{"without a request timeout nothing gets one", http.MethodPut, nodeLeasePath + "n1", InFlightConfig{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.url, nil)
			if got := tt.cfg.Deadline(r.Method, r.URL); got != tt.want {
				t.Fatalf("Deadline = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLimitInFlightPassesTheBodyOn(t *testing.T) {
	var got string
	h := mustLimit(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := readBody(r)
		got = string(b)
	}), InFlightConfig{Seats: 20, RequestTimeout: time.Minute})
	body := strings.Repeat("lease ", 20000)
	h.ServeHTTP(httptest.NewRecorder(), asUser(httptest.NewRequest(http.MethodPut, nodeLeasePath+"n1", strings.NewReader(body)), nodeUser("n1")))
	if got != body {
		t.Errorf("handler read %d bytes, want the %d sent", len(got), len(body))
	}
}

// withUser stands in for authn.Middleware in front of a real listener.
func withUser(u *authn.User, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { next.ServeHTTP(w, asUser(r, u)) })
}

// stalledRequest sends headers announcing a 100,000-byte body, one byte of
// it, and nothing more; it returns the response's reader.
func stalledRequest(t *testing.T, addr, path string) (*bufio.Reader, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "PUT %s HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", path)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // the test's own bound
	return bufio.NewReader(c), c
}

// A client that sends headers and then stalls its body holds its seat only
// until the request timeout, then gets 504 Timeout; while it holds it, the
// same identity's next stalled request is refused at once (net/http must
// not wait for its unread body before answering).
func TestLimitInFlightStalledBodyLosesItsSeat(t *testing.T) {
	h := mustLimit(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := readBody(r); err != nil {
			t.Errorf("handler ran with a body that did not arrive: %v", err)
		}
	}), InFlightConfig{Seats: 20, RequestTimeout: 2 * time.Second})
	srv := httptest.NewServer(withUser(nodeUser("n1"), h))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	first, _ := stalledRequest(t, addr, nodeLeasePath+"n1")
	waitFor(t, "the stalled request holds its seat", func() bool { return h.fc.Stats(flowcontrol.NodeHeartbeat).Executing == 1 })

	second, _ := stalledRequest(t, addr, nodeLeasePath+"n1")
	resp, err := http.ReadResponse(second, nil)
	if err != nil {
		t.Fatalf("second request: %v", err)
	}
	if resp.StatusCode != http.StatusTooManyRequests || !resp.Close {
		t.Errorf("second request: %s, close %v; want 429 and the connection closed", resp.Status, resp.Close)
	}
	if h.fc.Stats(flowcontrol.NodeHeartbeat).Executing != 1 {
		t.Fatal("the first request no longer holds its seat: the 429 was not immediate")
	}

	resp, err = http.ReadResponse(first, nil)
	if err != nil {
		t.Fatalf("first request: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	st := decodeStatus(t, b)
	if resp.StatusCode != http.StatusGatewayTimeout || st.Reason != metav1.StatusReasonTimeout {
		t.Errorf("first request: %s %s, want 504 Timeout", resp.Status, b)
	}
	waitFor(t, "the seat is free again", func() bool { return h.fc.Stats(flowcontrol.NodeHeartbeat).Executing == 0 })
	if n := h.bodyTimeouts[flowcontrol.NodeHeartbeat].Load(); n != 1 {
		t.Errorf("body timeouts counted %d, want 1", n)
	}
}

// The same over HTTP/2, where the deadline is per stream.
func TestLimitInFlightStalledBodyLosesItsSeatOverHTTP2(t *testing.T) {
	h := mustLimit(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = readBody(r)
	}), InFlightConfig{Seats: 20, RequestTimeout: time.Second})
	srv := httptest.NewUnstartedServer(withUser(nodeUser("n1"), h))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	client := srv.Client()
	client.Transport.(*http.Transport).TLSClientConfig.NextProtos = []string{"h2"}
	client.Transport.(*http.Transport).ForceAttemptHTTP2 = true
	client.Timeout = 30 * time.Second // the test's own bound

	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write([]byte("{")) }() // one byte, then nothing
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPut, srv.URL+nodeLeasePath+"n1", pr)
	req.ContentLength = 100000
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("protocol %s, want HTTP/2", resp.Proto)
	}
	if resp.StatusCode != http.StatusGatewayTimeout {
		t.Errorf("got %s, want 504", resp.Status)
	}
	waitFor(t, "the seat is free again", func() bool { return h.fc.Stats(flowcontrol.NodeHeartbeat).Executing == 0 })
}

// With 20 seats the controllers' level has 4 and a queue of 16: a fifth
// request waits for a seat instead of its 429, a request that waited
// QueueWait gets its 429 then, and the metrics show who waits.
func TestLimitInFlightQueuesTheControllersRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		controllers := &authn.User{Name: authz.UserControllerManager}
		reg := newTestRegistry()
		let := make(chan struct{})
		h, err := LimitInFlight(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("hold") == "1" {
				<-let
			}
		}), InFlightConfig{Seats: 20, RequestTimeout: time.Hour, QueueWait: time.Minute, Registerer: reg})
		if err != nil {
			t.Fatal(err)
		}
		serve := func(url string) <-chan int {
			code := make(chan int, 1)
			go func() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, asUser(httptest.NewRequest(http.MethodPut, url, nil), controllers))
				code <- rec.Code
			}()
			return code
		}
		held := make([]<-chan int, 4)
		for i := range held {
			held[i] = serve("/api/v1/nodes/n1/status?hold=1")
		}
		synctest.Wait()
		queued := serve("/api/v1/nodes/n2/status")
		synctest.Wait()
		select {
		case c := <-queued:
			t.Fatalf("a fifth controller request beside four held ones was answered %d, want it to wait", c)
		default:
		}
		if text := gatherText(t, reg); !strings.Contains(text, `apiserver_flowcontrol_current_inqueue_requests{flow_schema="system-controllers",priority_level="system"} 1`) {
			t.Errorf("metrics do not show the waiting request\n%s", text)
		}
		close(let) // the held requests end; the queued one gets a seat
		for _, c := range append(held, queued) {
			if code := <-c; code != http.StatusOK {
				t.Errorf("got %d, want 200", code)
			}
		}

		// Four held again, and one more that waits a minute in vain.
		let = make(chan struct{})
		for i := range held {
			held[i] = serve("/api/v1/nodes/n1/status?hold=1")
		}
		synctest.Wait()
		start := time.Now()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, asUser(httptest.NewRequest(http.MethodPut, "/api/v1/nodes/n2/status", nil), controllers))
		if rec.Code != http.StatusTooManyRequests || time.Since(start) != time.Minute {
			t.Errorf("after waiting %v: got %d, want 429 after the queue wait of 1m", time.Since(start), rec.Code)
		}
		if text := gatherText(t, reg); !strings.Contains(text, `apiserver_flowcontrol_rejected_requests_total{flow_schema="system-controllers",priority_level="system",reason="time-out"} 1`) {
			t.Errorf("metrics do not count the time-out\n%s", text)
		}
		close(let)
		for _, c := range held {
			<-c
		}
	})
}

func TestLimitInFlightMetrics(t *testing.T) {
	reg := newTestRegistry()
	h, err := LimitInFlight(http.NotFoundHandler(), InFlightConfig{Seats: 600, RequestTimeout: time.Minute, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	h.ServeHTTP(httptest.NewRecorder(), asUser(httptest.NewRequest(http.MethodPut, nodeLeasePath+"n1", nil), nodeUser("n1")))
	text := gatherText(t, reg)
	for _, want := range []string{
		`apiserver_flowcontrol_dispatched_requests_total{flow_schema="node-heartbeat",priority_level="node-heartbeat"} 1`,
		`apiserver_flowcontrol_nominal_limit_seats{priority_level="node-heartbeat"} 120`,
		`apiserver_flowcontrol_flow_limit_seats{priority_level="node-heartbeat"} 6`,
		`apiserver_flowcontrol_rejected_requests_total{flow_schema="node-heartbeat",priority_level="node-heartbeat",reason="queue-full"} 0`,
		`apiserver_flowcontrol_current_executing_requests{flow_schema="leader-election",priority_level="exempt"} 0`,
		`apiserver_flowcontrol_queue_limit_requests{priority_level="system"} 480`,
		`apiserver_flowcontrol_queue_limit_requests{priority_level="node-heartbeat"} 0`,
		`apiserver_flowcontrol_rejected_requests_total{flow_schema="system-controllers",priority_level="system",reason="cancelled"} 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s\n%s", want, text)
		}
	}
}

func decodeStatus(t *testing.T, b []byte) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("body %q is not a Status: %v", b, err)
	}
	return st
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after 30s", what)
		}
		time.Sleep(5 * time.Millisecond) // poll interval: real HTTP requests in flight, bounded by the deadline
	}
}

func newTestRegistry() *prometheus.Registry { return prometheus.NewRegistry() }

func gatherText(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}

// With 20 seats the admin level has 6: one unpaginated LIST (10 seats, cut
// to the level's 6) fills it, so the administrator's next request is
// refused, while a node's renewal — another level — goes through.
func TestLimitInFlightListTakesTheWidthOfItsWorkEstimate(t *testing.T) {
	h, release := holdOneRequest(t, httptest.NewRequest(http.MethodGet, "/api/v1/nodes", nil), adminUser)
	if st := h.fc.Stats(flowcontrol.Admin); st.Executing != 6 || st.Requests != 1 {
		t.Fatalf("one LIST holds %d seats in %d requests, want 6 (the whole admin level) in 1", st.Executing, st.Requests)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, asUser(httptest.NewRequest(http.MethodGet, "/api/v1/nodes/n1", nil), adminUser))
	if rec.Code != http.StatusTooManyRequests {
		t.Errorf("an administrator's GET beside the LIST: got %d, want 429", rec.Code)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, asUser(httptest.NewRequest(http.MethodPut, nodeLeasePath+"n1", nil), nodeUser("n1")))
	if rec.Code != http.StatusOK {
		t.Errorf("a node's renewal beside the LIST: got %d, want 200", rec.Code)
	}
	release()
	if got := h.fc.Stats(flowcontrol.Admin).Executing; got != 0 {
		t.Errorf("seats held after the LIST: got %d, want 0", got)
	}
}

func TestLimitInFlightDropsARequestWhoseContextEndedWhileItWaited(t *testing.T) {
	tests := []struct {
		name string
		end  func(context.Context) (context.Context, context.CancelFunc)
	}{
		{"its deadline passed", func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithDeadline(ctx, time.Now().Add(-time.Second))
		}},
		{"its client went away", func(ctx context.Context) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			return ctx, cancel
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := asUser(httptest.NewRequest(http.MethodPut, nodeLeasePath+"n1", strings.NewReader("the lease")), adminUser)
			ctx, cancel := tt.end(req.Context())
			defer cancel()
			served := false
			h := mustLimit(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true }),
				InFlightConfig{Seats: 20, RequestTimeout: time.Minute})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req.WithContext(ctx))
			if served {
				t.Fatal("the handler served a request nobody waits for")
			}
			if rec.Code != http.StatusGatewayTimeout {
				t.Errorf("status %d, want 504", rec.Code)
			}
		})
	}
}
