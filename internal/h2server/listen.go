package h2server

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Serving is an http.Server whose HTTP/2 connections a Server serves from
// its own accept path (see Serve). Shutdown and Close act on both.
type Serving struct {
	hs *http.Server
	s  *Server
}

// Serve serves TLS connections accepted on ln (a plain TCP listener): it
// runs each TLS handshake itself, serves the connections that chose h2 on
// a goroutine of their own, and hands the others to hs (HTTP/1.1). hs
// needs TLSConfig; h serves the HTTP/2 requests (it may differ from
// hs.Handler). Serve sets hs.TLSConfig's NextProtos (h2, http/1.1) and an
// empty hs.TLSNextProto. The channel receives what ends hs.Serve.
//
// Unlike Attach (net/http's TLSNextProto), no net/http goroutine stays
// behind an HTTP/2 connection: net/http runs the handshake on the
// connection's goroutine and must keep that goroutine until the connection
// ends. A handshake with a client certificate grows a stack to 16 KB; here
// the handshake's goroutine ends with it, and the connection's one
// goroutine starts small (docs/performance.md).
func (s *Server) Serve(hs *http.Server, ln net.Listener, h http.Handler) (*Serving, <-chan error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if hs.TLSConfig != nil {
		cfg = hs.TLSConfig.Clone()
	}
	cfg.NextProtos = []string{"h2", "http/1.1"}
	hs.TLSConfig = cfg
	// A non-nil TLSNextProto keeps net/http from setting up its own
	// HTTP/2: it never sees an h2 connection anyway.
	hs.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	hs.RegisterOnShutdown(s.Shutdown)
	ctx, cancel := context.WithCancel(context.Background())
	sl := &splitListener{
		inner:  ln,
		s:      s,
		hs:     hs,
		h:      h,
		ctx:    ctx,
		cancel: cancel,
		conns:  make(chan net.Conn),
		failed: make(chan struct{}),
	}
	go sl.acceptLoop()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(sl) }()
	return &Serving{hs: hs, s: s}, errc
}

// Shutdown stops accepting, sends GOAWAY on every HTTP/2 connection and
// waits, until ctx ends, for every connection of either kind to finish
// its requests (parked responses included) and close.
func (v *Serving) Shutdown(ctx context.Context) error {
	err := v.hs.Shutdown(ctx)
	v.s.Shutdown() // hs.Shutdown runs it too, on a goroutine of its own
	if werr := v.s.wait(ctx); err == nil {
		err = werr
	}
	return err
}

// Close closes the listener and every connection of either kind at once.
func (v *Serving) Close() error {
	err := v.hs.Close()
	v.s.Shutdown()
	v.s.closeAll()
	return err
}

// splitListener is what hs.Serve accepts from: the connections whose
// handshake did not choose h2.
type splitListener struct {
	inner  net.Listener
	s      *Server
	hs     *http.Server
	h      http.Handler
	ctx    context.Context // ends when the listener is closed
	cancel context.CancelFunc

	conns     chan net.Conn
	failed    chan struct{} // closed when the accept loop has ended
	closeOnce sync.Once
	err       error // why the accept loop ended; set before failed is closed
}

// Accept implements net.Listener.
func (l *splitListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.failed:
		return nil, l.err
	}
}

// Close implements net.Listener.
func (l *splitListener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		l.cancel()
		err = l.inner.Close()
	})
	return err
}

// Addr implements net.Listener.
func (l *splitListener) Addr() net.Addr { return l.inner.Addr() }

func (l *splitListener) acceptLoop() {
	var delay time.Duration
	for {
		rc, err := l.inner.Accept()
		if err != nil {
			if l.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				l.err = net.ErrClosed
				close(l.failed)
				return
			}
			// Out of file descriptors, a connection aborted before it was
			// accepted: back off and go on, as net/http does, up to a
			// second between tries; the server keeps serving what it has.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			if l.hs.ErrorLog != nil {
				l.hs.ErrorLog.Printf("http: Accept error: %v; retrying in %v", err, delay)
			}
			select {
			case <-l.s.cfg.Clock.After(delay):
			case <-l.ctx.Done():
			}
			continue
		}
		delay = 0
		go l.handshake(rc)
	}
}

// handshake runs the TLS handshake of one accepted connection, within the
// time net/http would give it, and sends the connection where its
// protocol is served.
func (l *splitListener) handshake(rc net.Conn) {
	tc := tls.Server(rc, l.hs.TLSConfig)
	if d := handshakeTimeout(l.hs); d > 0 {
		// A socket deadline is wall-clock time (the runtime's poller
		// enforces it), not the injected clock's.
		_ = tc.SetDeadline(time.Now().Add(d))
	}
	if err := tc.HandshakeContext(l.ctx); err != nil {
		if !errors.Is(err, io.EOF) && l.hs.ErrorLog != nil {
			l.hs.ErrorLog.Printf("http: TLS handshake error from %s: %v", rc.RemoteAddr(), err)
		}
		_ = rc.Close()
		return
	}
	_ = tc.SetDeadline(time.Time{})
	if tc.ConnectionState().NegotiatedProtocol == "h2" {
		// This goroutine, its stack grown by the handshake, ends here.
		go l.s.ServeConn(l.hs, tc, l.h)
		return
	}
	select {
	case l.conns <- tc:
	case <-l.failed:
		_ = tc.Close()
	case <-l.ctx.Done():
		_ = tc.Close()
	}
}

// handshakeTimeout is net/http's: the shortest of the read-header, read
// and write timeouts that are set.
func handshakeTimeout(hs *http.Server) time.Duration {
	var d time.Duration
	for _, t := range []time.Duration{hs.ReadHeaderTimeout, hs.ReadTimeout, hs.WriteTimeout} {
		if t > 0 && (d == 0 || t < d) {
			d = t
		}
	}
	return d
}
