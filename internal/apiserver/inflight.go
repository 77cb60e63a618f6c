package apiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
	"github.com/nodeplane/nodeplane/internal/apiserver/flowcontrol"
)

// InFlightConfig configures LimitInFlight.
type InFlightConfig struct {
	// Seats is the total budget of requests executing at once
	// (--max-requests-inflight + --max-mutating-requests-inflight, as
	// kube-apiserver with priority and fairness); flowcontrol splits it
	// between priority levels. 0 means no limit.
	Seats int
	// RequestTimeout bounds every request that is not long-running,
	// reading its body included (--request-timeout). 0 means none.
	RequestTimeout time.Duration
	// WriteGrace is how long past RequestTimeout a response may still be
	// written before the stream is cut (a client that does not read its
	// response must not hold a seat either). Default 5 s.
	WriteGrace time.Duration
	// QueueWait is the longest a request waits in the queue of a level
	// that has one (the server's own controllers) before its 429;
	// 0 means flowcontrol.DefaultQueueWait.
	QueueWait time.Duration
	// Registerer, if set, receives the apiserver_flowcontrol_* metrics.
	Registerer prometheus.Registerer
}

// Deadlines here are wall-clock by nature (connection deadlines, context
// deadlines), so LimitInFlight takes no injected clock: it reads the
// deadline off the request's context.

// LimitInFlight shares the server fairly between clients and bounds how
// long a request may hold its share.
//
// Each request is classified into a priority level (flowcontrol.Classify)
// and takes a seat in that level for its identity (flowcontrol.Controller):
// levels have separate seats, so node heartbeats and the server's own
// controllers never wait behind other clients, and one identity holds at
// most its share of a level. Past either limit the request gets 429
// TooManyRequests with Retry-After: 1 at once — except in the level of
// the server's own controllers, where it waits in a bounded queue for a
// seat first (flowcontrol.Controller.Wait) and gets its 429 only when the
// queue is full or it waited QueueWait. Watches and pod logs are
// long-running: they take no seat and get no deadline.
//
// An admitted request must be done within RequestTimeout: its body is read
// (into memory, bounded by the 3 MiB body limit) under that deadline before
// the handler runs, so a client that sends headers and then trickles or
// stalls its body loses its seat at the deadline with 504 Timeout (what
// kube-apiserver answers past --request-timeout), the handler's context
// ends at the deadline, and writing the response must end WriteGrace later.
func LimitInFlight(next http.Handler, cfg InFlightConfig) (http.Handler, error) {
	fc, err := flowcontrol.New(flowcontrol.Config{Seats: cfg.Seats, QueueWait: cfg.QueueWait})
	if err != nil {
		return nil, fmt.Errorf("flow control: %w", err)
	}
	if cfg.WriteGrace <= 0 {
		cfg.WriteGrace = 5 * time.Second
	}
	l := &inFlight{next: next, cfg: cfg, fc: fc}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(flowMetrics{l}); err != nil {
			return nil, fmt.Errorf("flow control metrics: %w", err)
		}
	}
	return l, nil
}

type inFlight struct {
	next         http.Handler
	cfg          InFlightConfig
	fc           *flowcontrol.Controller
	bodyTimeouts [flowcontrol.NumLevels]atomic.Uint64
}

func (l *inFlight) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if flowcontrol.IsLongRunning(r.Method, r.URL.Path, r.URL.RawQuery) {
		l.next.ServeHTTP(w, r)
		return
	}
	if err := r.Context().Err(); err != nil {
		// It waited past its deadline, or its client went away (a reset
		// HTTP/2 stream): serving it would be work nobody waits for.
		writeStatus(w, r, requestTimeout(l.cfg.RequestTimeout))
		return
	}
	req := flowcontrol.Request{Path: r.URL.Path}
	if u, ok := authn.UserFrom(r.Context()); ok {
		req.User, req.Groups = u.Name, u.Groups
	}
	lv := flowcontrol.Classify(req)
	seat, reason := l.fc.Wait(r.Context(), lv, req.User, flowcontrol.Width(r.Method, r.URL.Path, r.URL.RawQuery))
	if reason != flowcontrol.Admitted {
		// The body is not read. Over HTTP/1 net/http would wait for the
		// rest of it, after answering, to reuse the connection: close the
		// connection instead, and end the wait at once.
		unread := r.ContentLength != 0 && r.ProtoMajor == 1
		if unread {
			w.Header().Set("Connection", "close")
		}
		writeStatus(w, r, statusOf(apierrors.NewTooManyRequests("too many requests in flight for this client or this kind of request, please try again later", 1)))
		if unread {
			_ = http.NewResponseController(w).SetReadDeadline(longAgo)
		}
		return
	}
	defer seat.Release()
	if l.cfg.RequestTimeout <= 0 {
		l.next.ServeHTTP(w, r)
		return
	}

	// A deadline the request already has (Deadline, set by the HTTP/2
	// server) serves when it is no later than this one.
	ctx := r.Context()
	deadline, ok := ctx.Deadline()
	if !ok || time.Until(deadline) > l.cfg.RequestTimeout {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.cfg.RequestTimeout)
		defer cancel()
		deadline, _ = ctx.Deadline()
		r = r.WithContext(ctx)
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(deadline.Add(l.cfg.WriteGrace))
	if r.ProtoMajor == 1 {
		// An HTTP/1 connection outlives the request (keep-alive): the next
		// request on it, maybe a watch, must not inherit the deadline.
		defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	}
	if r.Body != nil && r.Body != http.NoBody {
		_ = rc.SetReadDeadline(deadline)
	}
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength <= maxBodyBytes {
		body, err := readBodyBuffered(r)
		if err != nil {
			if r.ProtoMajor == 1 {
				w.Header().Set("Connection", "close")
			}
			if isTimeout(err) || ctx.Err() != nil {
				l.bodyTimeouts[lv].Add(1)
				writeStatus(w, r, requestTimeout(l.cfg.RequestTimeout))
				return
			}
			writeStatus(w, r, statusOf(apierrors.NewBadRequest(fmt.Sprintf("read request body: %v", err))))
			return
		}
		defer body.free()
		// The request may be the caller's own (no copy was made for a
		// context): it is lent with its body swapped and given back as it
		// came, before the buffer goes back to the pool.
		orig := r.Body
		r.Body = body
		defer func() { r.Body = orig }()
	}
	l.next.ServeHTTP(w, r)
}

// Deadline is how long LimitInFlight lets the handler of a request (its
// method and URL) run:
// RequestTimeout for a request to the API (/api, /apis) that is not
// long-running, 0 (none given here) for any other. An HTTP/2 server that
// puts it on the stream's context (h2server.Config.Deadline) saves
// LimitInFlight a context and a copy of every request. Paths outside the
// API get none: not every one goes through LimitInFlight, and a long-running
// one among them (the zone view's event stream) must not end at it.
func (cfg InFlightConfig) Deadline(method string, u *url.URL) time.Duration {
	p := u.Path
	api := p == "/api" || p == "/apis" || strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/apis/")
	if cfg.RequestTimeout <= 0 || !api || flowcontrol.IsLongRunning(method, p, u.RawQuery) {
		return 0
	}
	return cfg.RequestTimeout
}

// longAgo is a read deadline that has passed: reads fail at once.
var longAgo = time.Unix(1, 0)

// requestTimeout is the Status of a request that did not finish in time:
// 504 with reason Timeout, as kube-apiserver's request timeout.
func requestTimeout(d time.Duration) *metav1.Status {
	return statusOf(apierrors.NewTimeoutError(fmt.Sprintf("request did not complete within --request-timeout (%v)", d), 0))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// bufferedBody is a request body read in full, from a pool.
type bufferedBody struct {
	bytes.Reader
	buf []byte
}

func (b *bufferedBody) Close() error { return nil }

// free returns b to the pool; the handler is done with the body (readBody
// copies it).
func (b *bufferedBody) free() {
	if cap(b.buf) > maxPooledBody {
		return // large buffers are left to the garbage collector
	}
	b.Reset(nil)
	b.buf = b.buf[:0]
	bodyPool.Put(b)
}

const maxPooledBody = 64 << 10

var bodyPool = sync.Pool{New: func() any { return &bufferedBody{buf: make([]byte, 0, 4<<10)} }}

// readBodyBuffered reads r's body, up to a little over maxBodyBytes (the
// handler refuses more with 413).
func readBodyBuffered(r *http.Request) (*bufferedBody, error) {
	b := bodyPool.Get().(*bufferedBody)
	buf := b.buf[:0]
	if n := r.ContentLength; n > 0 && int64(cap(buf)) < n {
		buf = make([]byte, 0, n)
	}
	for {
		if len(buf) == cap(buf) {
			if len(buf) > maxBodyBytes {
				break
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			b.buf = buf
			b.free()
			return nil, err
		}
	}
	b.buf = buf
	b.Reset(buf)
	return b, nil
}

// flowMetrics exports the flow control counters at scrape time, so the
// request path pays nothing for them. Names and labels follow
// kube-apiserver's apiserver_flowcontrol_* where one exists.
type flowMetrics struct{ l *inFlight }

var (
	descExecuting = prometheus.NewDesc("apiserver_flowcontrol_current_executing_requests",
		"Requests holding seats now, by priority level and flow schema.", []string{"priority_level", "flow_schema"}, nil)
	descExecutingSeats = prometheus.NewDesc("apiserver_flowcontrol_current_executing_seats",
		"Seats held now (a LIST holds up to 10: its work estimate), by priority level and flow schema.", []string{"priority_level", "flow_schema"}, nil)
	descDispatched = prometheus.NewDesc("apiserver_flowcontrol_dispatched_requests_total",
		"Requests admitted, by priority level and flow schema.", []string{"priority_level", "flow_schema"}, nil)
	descRejected = prometheus.NewDesc("apiserver_flowcontrol_rejected_requests_total",
		"Requests refused with 429, by priority level, flow schema and reason: concurrency-limit (every seat of a level without a queue taken), queue-full (the identity already holds its share of the level, or the level's queue is full), time-out (waited the longest a queue lets it) or cancelled (its client went away while it waited).",
		[]string{"priority_level", "flow_schema", "reason"}, nil)
	descInQueue = prometheus.NewDesc("apiserver_flowcontrol_current_inqueue_requests",
		"Requests waiting in a priority level's queue now, by priority level and flow schema.", []string{"priority_level", "flow_schema"}, nil)
	descQueueLimit = prometheus.NewDesc("apiserver_flowcontrol_queue_limit_requests",
		"Most requests that may wait in each priority level's queue (nodeplane; 0: the level has no queue).", []string{"priority_level"}, nil)
	descNominal = prometheus.NewDesc("apiserver_flowcontrol_nominal_limit_seats",
		"Seats of each priority level (0: no limit).", []string{"priority_level"}, nil)
	descFlowLimit = prometheus.NewDesc("apiserver_flowcontrol_flow_limit_seats",
		"Most seats one identity may hold in each priority level (nodeplane; 0: no limit).", []string{"priority_level"}, nil)
	descBodyTimeouts = prometheus.NewDesc("apiserver_flowcontrol_request_body_timeouts_total",
		"Admitted requests whose body did not arrive within --request-timeout, answered 504 (nodeplane).", []string{"priority_level", "flow_schema"}, nil)
)

func (m flowMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descExecuting, descExecutingSeats, descDispatched, descRejected, descInQueue, descQueueLimit, descNominal, descFlowLimit, descBodyTimeouts} {
		ch <- d
	}
}

func (m flowMetrics) Collect(ch chan<- prometheus.Metric) {
	for i := range flowcontrol.NumLevels {
		lv := flowcontrol.Level(i)
		st := m.l.fc.Stats(lv)
		name, schema := lv.String(), lv.FlowSchema()
		ch <- prometheus.MustNewConstMetric(descExecuting, prometheus.GaugeValue, float64(st.Requests), name, schema)
		ch <- prometheus.MustNewConstMetric(descExecutingSeats, prometheus.GaugeValue, float64(st.Executing), name, schema)
		ch <- prometheus.MustNewConstMetric(descDispatched, prometheus.CounterValue, float64(st.Dispatched), name, schema)
		// FlowFull and QueueFull share upstream's label "queue-full".
		byLabel := map[string]float64{}
		for _, reason := range flowcontrol.Reasons {
			byLabel[reason.String()] += float64(st.Rejected[reason])
		}
		for label, n := range byLabel {
			ch <- prometheus.MustNewConstMetric(descRejected, prometheus.CounterValue, n, name, schema, label)
		}
		ch <- prometheus.MustNewConstMetric(descInQueue, prometheus.GaugeValue, float64(st.Waiting), name, schema)
		ch <- prometheus.MustNewConstMetric(descQueueLimit, prometheus.GaugeValue, float64(st.QueueSeats), name)
		ch <- prometheus.MustNewConstMetric(descNominal, prometheus.GaugeValue, float64(st.Seats), name)
		ch <- prometheus.MustNewConstMetric(descFlowLimit, prometheus.GaugeValue, float64(st.FlowSeats), name)
		ch <- prometheus.MustNewConstMetric(descBodyTimeouts, prometheus.CounterValue, float64(m.l.bodyTimeouts[lv].Load()), name, schema)
	}
}
