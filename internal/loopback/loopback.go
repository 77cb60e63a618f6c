// Package loopback lets the server's own clients (its controllers and
// scheduler) reach the API in process. Transport is an http.RoundTripper
// that serves each request with the server's whole handler chain
// (authentication, authorization, flow control, admission, storage) but
// without TLS, TCP or HTTP/2 framing: the request and its response pass
// through memory. The requests carry the identity of a client certificate
// the server issued and verified itself, so they are authenticated exactly
// like the same client's requests over HTTPS would be.
//
// Nothing here is reachable from the network: the identity is set on
// requests that never crossed a socket.
package loopback

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"
)

// DefaultMaxBuffered is how many response bytes a handler may write ahead of
// its reader before its writes wait.
const DefaultMaxBuffered = 1 << 20

// RemoteAddr is the RemoteAddr of the requests a Transport serves.
const RemoteAddr = "loopback"

var (
	errBodyClosed  = errors.New("loopback: response body closed")
	errAfterReturn = errors.New("loopback: write after the handler returned")
)

// Config configures a Transport.
type Config struct {
	// Handler serves the requests: the same handler the server's HTTPS
	// listener serves.
	Handler http.Handler
	// CertPEM is the client certificate the requests present; Roots holds
	// the CA that issued it. New verifies it like a TLS server verifying a
	// client certificate would.
	CertPEM []byte
	Roots   *x509.CertPool
	// MaxBuffered is DefaultMaxBuffered when zero.
	MaxBuffered int
	// Logger receives handler panics; nil discards them.
	Logger *slog.Logger
	// Go starts fn, which serves r, and does not wait for it; nil starts
	// it on a goroutine of its own. The server passes its pool of warm
	// workers (apiserver.WarmWorkers.GoServe): on a new goroutine a
	// request through the whole chain grows the stack several times, each
	// growth a copy of every frame. fn recovers its own panics.
	Go func(r *http.Request, fn func())
}

// Transport serves requests in process (see the package comment).
type Transport struct {
	handler     http.Handler
	tls         *tls.ConnectionState
	maxBuffered int
	log         *slog.Logger
	goServe     func(r *http.Request, fn func())
	handoffs    handoffTable
}

// New verifies cfg's certificate and returns a Transport presenting it.
func New(cfg Config) (*Transport, error) {
	if cfg.Handler == nil {
		return nil, errors.New("loopback: no handler")
	}
	cert, err := parseCert(cfg.CertPEM)
	if err != nil {
		return nil, err
	}
	chains, err := cert.Verify(x509.VerifyOptions{Roots: cfg.Roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return nil, fmt.Errorf("loopback: verify client certificate: %w", err)
	}
	t := &Transport{
		handler: cfg.Handler,
		tls: &tls.ConnectionState{
			Version: tls.VersionTLS13, HandshakeComplete: true,
			PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: chains,
		},
		maxBuffered: cfg.MaxBuffered,
		log:         cfg.Logger,
		goServe:     cfg.Go,
	}
	if t.maxBuffered <= 0 {
		t.maxBuffered = DefaultMaxBuffered
	}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	if t.goServe == nil {
		t.goServe = func(_ *http.Request, fn func()) { go fn() }
	}
	return t, nil
}

func parseCert(certPEM []byte) (*x509.Certificate, error) {
	for rest := certPEM; len(rest) > 0; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type == "CERTIFICATE" {
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("loopback: parse client certificate: %w", err)
			}
			return cert, nil
		}
	}
	return nil, errors.New("loopback: no CERTIFICATE block in the client certificate")
}

// RoundTrip implements http.RoundTripper: it starts the handler (Config.Go)
// and returns once the handler has sent the response's header.
// The response body streams what the handler writes; closing it ends the
// request's context, which is how a watch is stopped.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	body := req.Body
	if body == nil {
		body = http.NoBody
	}
	if req.URL == nil {
		_ = body.Close()
		return nil, errors.New("loopback: request without a URL")
	}
	ctx, cancel := context.WithCancel(req.Context())
	w := &responseWriter{header: http.Header{}, cancel: cancel, max: t.maxBuffered, committed: make(chan struct{}), handoffs: &t.handoffs}
	w.cond.L = &w.mu
	ctx = context.WithValue(ctx, handoffKey{}, &Handoff{w: w})
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	sr := (&http.Request{
		Method:        req.Method,
		URL:           &url.URL{Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery},
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Header:        req.Header.Clone(),
		Body:          body,
		ContentLength: req.ContentLength,
		Host:          host,
		RemoteAddr:    RemoteAddr,
		RequestURI:    req.URL.RequestURI(),
		TLS:           t.tls,
	}).WithContext(ctx)
	if sr.Method == "" {
		sr.Method = http.MethodGet
	}
	if sr.Header == nil {
		sr.Header = http.Header{}
	}
	t.goServe(sr, func() { t.serve(w, sr) })

	select {
	case <-w.committed:
	case <-req.Context().Done():
		// The handler sees its context end too; whatever it writes now
		// is dropped.
		w.closeBody()
		return nil, req.Context().Err()
	}
	w.mu.Lock()
	failed, code, header := w.failed, w.code, w.sentHeader
	w.mu.Unlock()
	if failed != nil {
		return nil, failed
	}
	resp := &http.Response{
		Status:        strconv.Itoa(code) + " " + http.StatusText(code),
		StatusCode:    code,
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Header:        header,
		Body:          &responseBody{w: w},
		ContentLength: -1,
		Request:       req,
	}
	if n, err := strconv.ParseInt(header.Get("Content-Length"), 10, 64); err == nil && n >= 0 {
		resp.ContentLength = n
	}
	if req.Method == http.MethodHead {
		resp.Body = http.NoBody
		w.closeBody()
	}
	return resp, nil
}

// serve runs the handler for one request and ends its response.
func (t *Transport) serve(w *responseWriter, r *http.Request) {
	defer func() {
		var failure error
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				t.log.Error("panic serving an in-process request", "method", r.Method, "path", r.URL.Path, "panic", v)
			}
			failure = fmt.Errorf("loopback: handler for %s %s ended abnormally: %v", r.Method, r.URL.Path, v)
		}
		_ = r.Body.Close()
		w.finish(failure)
	}()
	t.handler.ServeHTTP(w, r)
}

// responseWriter is the handler's side of one response; responseBody is the
// client's. They share a buffer under mu.
type responseWriter struct {
	header http.Header
	cancel context.CancelFunc
	max    int

	committed chan struct{} // closed once the header is sent or the handler failed first

	mu         sync.Mutex
	cond       sync.Cond
	code       int
	sentHeader http.Header
	sent       bool  // the header is sent
	failed     error // the handler failed before sending the header
	buf        []byte
	off        int       // bytes of buf already read
	flushed    int       // bytes of buf the reader may read (up to the last flush)
	done       bool      // the handler returned
	err        error     // the body's end when the handler did not return normally
	closed     bool      // the client closed the body
	deadline   time.Time // write deadline; zero is none
	timer      *time.Timer

	// Objects the handler handed over (handoff.go), under handoffs.mu.
	handoffs *handoffTable
	handed   int  // handed and not yet taken
	released bool // the client closed the body: nothing more is kept
}

// Header implements http.ResponseWriter.
func (w *responseWriter) Header() http.Header { return w.header }

// WriteHeader implements http.ResponseWriter. Informational codes are not
// passed on (the client sees only the final response), a second final code
// is ignored, as net/http does.
func (w *responseWriter) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if code < 200 {
		return
	}
	w.mu.Lock()
	w.commitLocked(code)
	w.mu.Unlock()
}

// commitLocked sends the header with code unless it is sent. mu is held.
func (w *responseWriter) commitLocked(code int) {
	if w.sent {
		return
	}
	w.sent, w.code, w.sentHeader = true, code, w.header.Clone()
	close(w.committed)
}

// Write implements http.ResponseWriter. Like a socket's buffered writer,
// it does not wake the reader for every write: the reader gets the bytes
// at a Flush, when wakeBytes are unread, or when the handler returns (a
// watch writes its events one by one and flushes them together). At most
// the buffer's limit is unread: a larger write goes in parts, each waiting
// until the client reads, closes the body, or the write deadline passes.
func (w *responseWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.commitLocked(http.StatusOK)
	written := 0
	for len(p) > 0 {
		for len(w.buf)-w.off >= w.max {
			if err := w.writableLocked(); err != nil {
				return written, err
			}
			w.flushLocked() // the reader drains what is there
			w.cond.Wait()
		}
		if err := w.writableLocked(); err != nil {
			return written, err
		}
		part := p[:min(len(p), w.max-(len(w.buf)-w.off))]
		if w.off > 0 && len(w.buf)+len(part) > cap(w.buf) {
			n := copy(w.buf, w.buf[w.off:])
			w.buf, w.flushed, w.off = w.buf[:n], w.flushed-w.off, 0
		}
		w.buf = append(w.buf, part...)
		p, written = p[len(part):], written+len(part)
		if len(w.buf)-w.off >= wakeBytes {
			w.flushLocked()
		}
	}
	return written, nil
}

// wakeBytes unread bytes wake the reader without a Flush.
const wakeBytes = 32 << 10

// flushLocked makes what was written readable and wakes the reader. mu is
// held.
func (w *responseWriter) flushLocked() {
	w.flushed = len(w.buf)
	w.cond.Broadcast()
}

// writableLocked says why nothing more can be written, or nil. mu is held.
func (w *responseWriter) writableLocked() error {
	switch {
	case w.closed:
		return errBodyClosed
	case w.done:
		return errAfterReturn
	case !w.deadline.IsZero() && !time.Now().Before(w.deadline):
		return os.ErrDeadlineExceeded // as a socket's write past its deadline
	}
	return nil
}

// Flush implements http.Flusher: the header and what was written reach
// the reader.
func (w *responseWriter) Flush() {
	w.mu.Lock()
	w.commitLocked(http.StatusOK)
	w.flushLocked()
	w.mu.Unlock()
}

// SetWriteDeadline is what http.ResponseController calls: a write waiting
// for the reader past t fails. Like a socket's deadline, t is wall-clock
// time, so it is compared with the real clock, not an injected one.
func (w *responseWriter) SetWriteDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deadline = t
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if !t.IsZero() {
		w.timer = time.AfterFunc(time.Until(t), func() {
			w.mu.Lock()
			w.cond.Broadcast()
			w.mu.Unlock()
		})
	}
	return nil
}

// finish ends the response when the handler has returned; failure is set
// when it did not return normally.
func (w *responseWriter) finish(failure error) {
	w.mu.Lock()
	w.done = true
	if failure != nil {
		w.err = failure
		if !w.sent {
			w.failed = failure // RoundTrip returns it instead of a response
		}
	}
	w.commitLocked(http.StatusOK)
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.flushLocked()
	w.mu.Unlock()
	w.cancel()
}

// closeBody is the client closing the body: buffered bytes are dropped,
// the handler's writes fail and its context ends.
func (w *responseWriter) closeBody() {
	w.mu.Lock()
	w.closed = true
	w.buf, w.off, w.flushed = nil, 0, 0
	w.cond.Broadcast()
	w.mu.Unlock()
	w.handoffs.release(w)
	w.cancel()
}

// responseBody is the response body the client reads.
type responseBody struct{ w *responseWriter }

// Read implements io.Reader: it waits for bytes, the handler's end, or
// Close.
func (b *responseBody) Read(p []byte) (int, error) {
	w := b.w
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.off == w.flushed && !w.done && !w.closed {
		w.cond.Wait()
	}
	switch {
	case w.closed:
		return 0, errBodyClosed
	case w.off < w.flushed:
		n := copy(p, w.buf[w.off:w.flushed])
		w.off += n
		if w.off == len(w.buf) {
			w.buf, w.off, w.flushed = w.buf[:0], 0, 0
			if cap(w.buf) > maxKeptBuffer {
				w.buf = nil // an idle watch keeps no large buffer
			}
		}
		w.cond.Broadcast()
		return n, nil
	case w.err != nil:
		return 0, w.err
	}
	return 0, io.EOF
}

// maxKeptBuffer is the largest drained buffer a response keeps.
const maxKeptBuffer = 32 << 10

// Close implements io.Closer.
func (b *responseBody) Close() error {
	b.w.closeBody()
	return nil
}
