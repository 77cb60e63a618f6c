package h2server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// serving is a server started with Serve, and clients for it.
type serving struct {
	url    string
	v      *Serving
	errc   <-chan error
	h2, h1 *http.Client
	logs   *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startServing serves h through Serve on a loopback listener, with the
// certificate of net/http/httptest; wrap, when given, wraps the listener.
func startServing(t *testing.T, cfg Config, h http.Handler, wrap ...func(net.Listener) net.Listener) *serving {
	t.Helper()
	certSrc := httptest.NewTLSServer(http.NotFoundHandler())
	cert, pool := certSrc.TLS.Certificates[0], x509.NewCertPool()
	pool.AddCert(certSrc.Certificate())
	certSrc.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range wrap {
		ln = w(ln)
	}
	logs := &lockedBuffer{}
	hs := &http.Server{
		Handler:           h,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}},
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          log.New(logs, "", 0),
	}
	v, errc := New(cfg).Serve(hs, ln, h)
	t.Cleanup(func() { _ = v.Close() })
	tr2 := &http2.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	tr1 := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	t.Cleanup(tr2.CloseIdleConnections)
	t.Cleanup(tr1.CloseIdleConnections)
	return &serving{
		url: "https://" + ln.Addr().String(), v: v, errc: errc,
		h2: &http.Client{Transport: tr2}, h1: &http.Client{Transport: tr1}, logs: logs,
	}
}

func protoHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.Proto)
	})
}

func get(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestServeAnswersBothProtocolsOnOneListener(t *testing.T) {
	sv := startServing(t, Config{}, protoHandler())
	if got := get(t, sv.h2, sv.url+"/"); got != "HTTP/2.0" {
		t.Errorf("an h2 client was served over %q", got)
	}
	if got := get(t, sv.h1, sv.url+"/"); got != "HTTP/1.1" {
		t.Errorf("an HTTP/1.1 client was served over %q", got)
	}
}

func TestServeSurvivesFailedHandshakes(t *testing.T) {
	sv := startServing(t, Config{}, protoHandler())
	addr := strings.TrimPrefix(sv.url, "https://")
	// Not TLS at all, then a client that does not trust the certificate.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	_, _ = io.ReadAll(c) // the server closes it
	c.Close()
	if _, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "example.com", MinVersion: tls.VersionTLS12}); err == nil {
		t.Fatal("a client that does not trust the certificate completed a handshake")
	}
	if got := get(t, sv.h2, sv.url+"/"); got != "HTTP/2.0" {
		t.Errorf("after failed handshakes: %q", got)
	}
	if !strings.Contains(sv.logs.String(), "TLS handshake error from") {
		t.Errorf("the failed handshakes were not logged: %q", sv.logs.String())
	}
}

// goroutinesIn counts the goroutines running fn (on their stack, not as
// the function that created them).
func goroutinesIn(fn string) int {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, line := range strings.Split(g, "\n") {
			if strings.Contains(line, fn) && !strings.HasPrefix(line, "created by ") {
				n++
				break
			}
		}
	}
	return n
}

// flakyListener fails its first Accept calls as a process out of file
// descriptors does.
type flakyListener struct {
	net.Listener
	failures atomic.Int32
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.failures.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

func TestServeGoesOnAfterAcceptErrors(t *testing.T) {
	sv := startServing(t, Config{}, protoHandler(), func(ln net.Listener) net.Listener {
		fl := &flakyListener{Listener: ln}
		fl.failures.Store(3)
		return fl
	})
	if got := get(t, sv.h2, sv.url+"/"); got != "HTTP/2.0" {
		t.Errorf("after accept errors: %q", got)
	}
	if !strings.Contains(sv.logs.String(), "too many open files; retrying in") {
		t.Errorf("the accept errors were not logged: %q", sv.logs.String())
	}
}

func TestServeKeepsOneGoroutinePerHTTP2Connection(t *testing.T) {
	sv := startServing(t, Config{}, protoHandler())
	const conns = 20
	for range conns {
		c := dialRaw(t, sv.url) // a TLS connection, preface and SETTINGS sent
		c.headers(1, "GET", "/", true)
		c.readUntil("the response", func(f http2.Frame) bool {
			return f.Header().StreamID == 1 && f.Header().Flags.Has(http2.FlagDataEndStream)
		})
	}
	// Each connection is read by one goroutine; none is left in net/http
	// (Attach keeps net/http's goroutine of each connection waiting) and
	// the handshakes' goroutines have ended.
	var readers, netHTTP, handshakes int
	waitUntil(t, func() bool {
		readers = goroutinesIn("h2server.(*conn).readLoop")
		netHTTP = goroutinesIn("net/http.(*conn).serve")
		handshakes = goroutinesIn("h2server.(*splitListener).handshake")
		return readers == conns && netHTTP == 0 && handshakes == 0
	}, runtime.Gosched, func() string {
		return fmt.Sprintf("%d idle HTTP/2 connections: %d readers, %d net/http connection goroutines, %d handshakes still running; want %d, 0, 0",
			conns, readers, netHTTP, handshakes, conns)
	})
}

func TestServingShutdownWaitsForParkedResponses(t *testing.T) {
	h, ch := parkingHandler()
	sv := startServing(t, Config{}, h)
	checkShutdownWaits(t, parkOne(t, sv.h2, sv.url, ch), sv.v.Shutdown)
	select {
	case err := <-sv.errc:
		if !errors.Is(err, http.ErrServerClosed) {
			t.Fatalf("Serve ended with %v, want ErrServerClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not end after Shutdown")
	}
	if _, err := net.DialTimeout("tcp", strings.TrimPrefix(sv.url, "https://"), time.Second); err == nil {
		t.Fatal("the listener still accepts after Shutdown")
	}
}

func TestServingCloseEndsHTTP2Connections(t *testing.T) {
	h, ch := parkingHandler()
	sv := startServing(t, Config{}, h)
	p := parkOne(t, sv.h2, sv.url, ch)
	defer p.finish(false)
	if err := sv.v.Close(); err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(p.resp.Body)
		read <- err
	}()
	select {
	case err := <-read:
		if err == nil {
			t.Fatal("the parked response ended cleanly after Close, want a broken connection")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the HTTP/2 connection")
	}
}
