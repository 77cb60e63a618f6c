// Package h2server serves HTTP/2 over TLS connections for net/http
// handlers, as a lighter replacement of Go's HTTP/2 server for an API whose
// requests are small and many.
//
// Go's HTTP/2 server keeps two goroutines per connection (a frame reader
// and a serve loop) and starts one more per request, hands every frame and
// every write between them over channels, and writes a response's HEADERS
// and DATA with separate write(2) calls. For a lease renewal (a few hundred
// bytes each way) that machinery cost about half of the server's CPU
// (docs/performance.md). Here a connection has one goroutine, which reads
// frames and starts handlers; a handler frames its own response into the
// connection's outgoing buffer, and whichever goroutine finds the buffer
// unflushed writes it, so a response is one write(2), and the responses of
// several streams finishing together share one. An idle connection holds no
// write buffer.
//
// Serve accepts the connections itself: it runs the TLS handshakes, serves
// those that chose h2 and hands the others to an http.Server (HTTP/1.1).
// Attach plugs it into an http.Server through TLSNextProto["h2"] instead,
// which keeps net/http's goroutine of each connection waiting. What it
// does not do: server push, trailers, and request priorities (all optional
// in HTTP/2; Kubernetes clients use none).
package h2server

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Config configures a Server. Zero values take the defaults named.
type Config struct {
	// MaxConcurrentStreams bounds the requests a connection has running,
	// counting those the client reset but whose handler has not returned
	// (so a client cannot pile up handlers by resetting streams); the
	// stream past it is refused with REFUSED_STREAM. Default 250, as Go's.
	MaxConcurrentStreams uint32
	// MaxHeaderListSize bounds a request's header block (decoded); a larger
	// one gets 431. Default 1 MiB, as net/http's MaxHeaderBytes.
	MaxHeaderListSize uint32
	// StreamWindow is the flow-control window of one request body, and
	// ConnWindow of all bodies on a connection. Defaults 1 MiB both.
	StreamWindow, ConnWindow uint32
	// PrefaceTimeout bounds the wait for the client's preface and first
	// SETTINGS. Default 30 s.
	PrefaceTimeout time.Duration
	// IdleTimeout closes a connection that has had no stream and received
	// no frame for this long. Default 90 s.
	IdleTimeout time.Duration
	// WriteTimeout bounds one write of the outgoing buffer to the socket; a
	// client that does not read for this long loses its connection.
	// Default 60 s.
	WriteTimeout time.Duration
	// Deadline, if set, is how long the handler of a request (its method
	// and URL) may run, from when its header block was read: the stream's
	// context ends then (0: it ends only with the stream). A handler chain
	// that would derive a context with the same deadline can use this one
	// instead (LimitInFlight in internal/apiserver does), saving a context
	// and a copy of the request.
	Deadline func(method string, u *url.URL) time.Duration
	// Go runs a request's handler; r is the request it serves. Default:
	// a new goroutine. The function must return promptly.
	Go func(r *http.Request, fn func())
	// Clock drives the idle sweep. Default: the real clock.
	Clock clock.WithTicker
	// Logger receives connection errors at debug level. Default: discard.
	Logger *slog.Logger
}

func (c *Config) defaults() {
	if c.MaxConcurrentStreams == 0 {
		c.MaxConcurrentStreams = 250
	}
	if c.MaxHeaderListSize == 0 {
		c.MaxHeaderListSize = 1 << 20
	}
	if c.StreamWindow == 0 {
		c.StreamWindow = 1 << 20
	}
	if c.ConnWindow == 0 {
		c.ConnWindow = 1 << 20
	}
	if c.PrefaceTimeout == 0 {
		c.PrefaceTimeout = 30 * time.Second
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 90 * time.Second
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 60 * time.Second
	}
	if c.Go == nil {
		c.Go = func(_ *http.Request, fn func()) { go fn() }
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Server serves HTTP/2 connections: those it accepts itself (Serve) or
// those net/http hands it (Attach, ServeConn).
type Server struct {
	cfg Config

	mu           sync.Mutex
	conns        map[*conn]struct{}
	active       sync.WaitGroup // one per tracked connection
	shuttingDown bool
	sweeping     bool
	stopSweep    chan struct{}
}

// New returns a Server.
func New(cfg Config) *Server {
	cfg.defaults()
	return &Server{cfg: cfg, conns: map[*conn]struct{}{}, stopSweep: make(chan struct{})}
}

// Attach makes hs serve HTTP/2 through s: it sets hs.TLSNextProto["h2"],
// offers h2 before http/1.1 in ALPN, and sends GOAWAY to every connection
// when hs.Shutdown is called. Call it before hs starts serving. h serves
// the HTTP/2 requests (it may differ from hs.Handler, which keeps serving
// HTTP/1.1).
func (s *Server) Attach(hs *http.Server, h http.Handler) {
	if hs.TLSConfig == nil {
		hs.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	} else {
		hs.TLSConfig = hs.TLSConfig.Clone()
	}
	hs.TLSConfig.NextProtos = []string{"h2", "http/1.1"}
	if hs.TLSNextProto == nil {
		hs.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	hs.TLSNextProto["h2"] = func(hs *http.Server, tc *tls.Conn, _ http.Handler) { s.ServeConn(hs, tc, h) }
	hs.RegisterOnShutdown(s.Shutdown)
}

// ServeConn serves one HTTP/2 connection whose TLS handshake (with ALPN
// h2) is done, on the calling goroutine, and returns when it is closed and
// its handlers have returned.
func (s *Server) ServeConn(hs *http.Server, tc *tls.Conn, h http.Handler) {
	ctx := context.WithValue(context.Background(), http.ServerContextKey, hs)
	ctx = context.WithValue(ctx, http.LocalAddrContextKey, tc.LocalAddr())
	c := newConn(s, tc, h, ctx)
	if !s.track(c) {
		_ = tc.Close()
		return
	}
	defer s.untrack(c)
	defer func() {
		// As net/http does for the connection's goroutine: a panic ends
		// the connection, not the process.
		if v := recover(); v != nil {
			s.cfg.Logger.Error("panic serving an HTTP/2 connection", "remote", c.remote, "panic", v, "stack", string(debug.Stack()))
			_ = tc.Close()
		}
	}()
	c.serve()
}

// wait waits until every connection has ended, or ctx has.
func (s *Server) wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		s.active.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closeAll closes every connection at once.
func (s *Server) closeAll() {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.mu.Lock()
		c.closeLocked()
		c.mu.Unlock()
	}
}

// Shutdown sends GOAWAY on every connection: each finishes the requests it
// has and then closes. New connections are refused.
func (s *Server) Shutdown() {
	s.mu.Lock()
	if s.shuttingDown {
		s.mu.Unlock()
		return
	}
	s.shuttingDown = true
	if s.sweeping {
		close(s.stopSweep)
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.goAway()
	}
}

func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shuttingDown {
		return false
	}
	s.conns[c] = struct{}{}
	s.active.Add(1)
	if !s.sweeping {
		s.sweeping = true
		go s.sweep()
	}
	return true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.active.Done()
}

// sweep closes idle connections: one with no stream whose last frame came
// more than IdleTimeout ago. One sweep for all connections replaces a
// read deadline per connection, which would be reset on every request.
func (s *Server) sweep() {
	t := s.cfg.Clock.NewTicker(s.cfg.IdleTimeout / 4)
	defer t.Stop()
	for {
		select {
		case <-s.stopSweep:
			return
		case <-t.C():
		}
		cutoff := s.cfg.Clock.Now().Add(-s.cfg.IdleTimeout).UnixNano()
		s.mu.Lock()
		var idle []*conn
		for c := range s.conns {
			if c.idleSince(cutoff) {
				idle = append(idle, c)
			}
		}
		s.mu.Unlock()
		for _, c := range idle {
			c.goAway()
		}
	}
}

// remoteAddr is net.Conn's RemoteAddr as a string, once per connection.
func remoteAddr(nc net.Conn) string {
	if a := nc.RemoteAddr(); a != nil {
		return a.String()
	}
	return ""
}
