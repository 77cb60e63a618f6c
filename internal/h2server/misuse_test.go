package h2server

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	clocktesting "k8s.io/utils/clock/testing"
)

// rawClient speaks HTTP/2 frame by frame, to send what a well-behaved
// client would not.
type rawClient struct {
	t    testing.TB
	conn *tls.Conn
	fr   *http2.Framer
	henc *hpack.Encoder
	hbuf bytes.Buffer
}

func dialRaw(t testing.TB, url string) *rawClient {
	t.Helper()
	conn, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // a test server's own certificate
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN chose %q", p)
	}
	c := &rawClient{t: t, conn: conn, fr: http2.NewFramer(conn, conn)}
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.henc = hpack.NewEncoder(&c.hbuf)
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := c.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return c
}

// headers opens stream id with a request for path.
func (c *rawClient) headers(id uint32, method, path string, end bool, extra ...string) {
	c.t.Helper()
	c.hbuf.Reset()
	fields := append([]string{":method", method, ":scheme", "https", ":authority", "test", ":path", path}, extra...)
	for i := 0; i < len(fields); i += 2 {
		_ = c.henc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(), EndStream: end, EndHeaders: true}); err != nil {
		c.t.Fatal(err)
	}
}

// readUntil reads frames until match returns true, failing on
// a read error or after 10 s.
func (c *rawClient) readUntil(what string, match func(http2.Frame) bool) http2.Frame {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.t.Fatalf("waiting for %s: %v", what, err)
		}
		if match(f) {
			return f
		}
	}
}

// readToEOF reads frames until the server closes the connection and
// returns the GOAWAY it sent, if any.
func (c *rawClient) readToEOF() *http2.GoAwayFrame {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var ga *http2.GoAwayFrame
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			var ne interface{ Timeout() bool }
			if errors.As(err, &ne) && ne.Timeout() {
				c.t.Fatal("the server did not close the connection within 10 s")
			}
			return ga
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			ga = g
		}
	}
}

// responseStatus reads until the first response HEADERS and returns its
// status.
func (c *rawClient) responseStatus() string {
	c.t.Helper()
	f := c.readUntil("the response HEADERS", func(f http2.Frame) bool {
		_, ok := f.(*http2.MetaHeadersFrame)
		return ok
	})
	return f.(*http2.MetaHeadersFrame).PseudoValue("status")
}

// wantGoAway reads until the server closes the connection and fails unless
// it sent GOAWAY with code first.
func (c *rawClient) wantGoAway(code http2.ErrCode) {
	c.t.Helper()
	if ga := c.readToEOF(); ga == nil || ga.ErrCode != code {
		c.t.Fatalf("GOAWAY %v, want one with %v before the close", ga, code)
	}
}

func TestMisuse(t *testing.T) {
	floodEnded := make(chan error, 1)
	// block holds the /block handlers; each subtest that uses them
	// releases them before its server closes (cleanups run last first).
	var block chan struct{}
	blockUntilCleanup := func(t *testing.T) {
		block = make(chan struct{})
		t.Cleanup(func() { close(block) })
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/block":
			select {
			case <-block:
			case <-r.Context().Done():
				<-block // a reset stream keeps its handler: it still counts
			}
		case "/body-deadline":
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			if _, err := io.ReadAll(r.Body); err != nil {
				var ne interface{ Timeout() bool }
				if errors.As(err, &ne) && ne.Timeout() {
					w.WriteHeader(http.StatusRequestTimeout)
					return
				}
				w.WriteHeader(http.StatusBadRequest)
			}
		case "/flood":
			chunk := bytes.Repeat([]byte("x"), 64<<10)
			for {
				if _, err := w.Write(chunk); err != nil {
					floodEnded <- err
					return
				}
			}
		}
	})

	t.Run("a client that is not HTTP/2 is closed", func(t *testing.T) {
		url, _, _ := startServer(t, Config{}, h)
		conn, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // test
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, _ = io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n........")
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, conn); err != nil {
			t.Fatalf("the connection was not closed: %v", err)
		}
	})

	t.Run("streams past the limit are refused, including reset ones whose handler still runs", func(t *testing.T) {
		url, _, _ := startServer(t, Config{MaxConcurrentStreams: 4}, h)
		blockUntilCleanup(t)
		c := dialRaw(t, url)
		for id := uint32(1); id <= 7; id += 2 {
			c.headers(id, "GET", "/block", true)
			if err := c.fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
				t.Fatal(err)
			}
		}
		c.headers(9, "GET", "/block", true)
		f := c.readUntil("RST_STREAM of stream 9", func(f http2.Frame) bool {
			return f.Header().Type == http2.FrameRSTStream && f.Header().StreamID == 9
		})
		if code := f.(*http2.RSTStreamFrame).ErrCode; code != http2.ErrCodeRefusedStream {
			t.Fatalf("stream 9 reset with %v, want REFUSED_STREAM", code)
		}
	})

	t.Run("DATA past the connection window ends the connection with FLOW_CONTROL_ERROR", func(t *testing.T) {
		url, _, _ := startServer(t, Config{StreamWindow: 65535, ConnWindow: 65535}, h)
		blockUntilCleanup(t)
		c := dialRaw(t, url)
		c.headers(1, "POST", "/block", false)
		chunk := make([]byte, 16384)
		for range 5 {
			if err := c.fr.WriteData(1, false, chunk); err != nil {
				break // the server may close first
			}
		}
		c.wantGoAway(http2.ErrCodeFlowControl)
	})

	t.Run("a frame larger than the announced maximum ends the connection with FRAME_SIZE_ERROR", func(t *testing.T) {
		url, _, _ := startServer(t, Config{}, h)
		blockUntilCleanup(t)
		c := dialRaw(t, url)
		c.headers(1, "POST", "/block", false)
		_ = c.fr.WriteData(1, false, make([]byte, 64<<10)) // the server may close before it is all written
		c.wantGoAway(http2.ErrCodeFrameSize)
	})

	t.Run("an invalid setting ends the connection with PROTOCOL_ERROR", func(t *testing.T) {
		url, _, _ := startServer(t, Config{}, h)
		c := dialRaw(t, url)
		if err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 100}); err != nil {
			t.Fatal(err)
		}
		c.wantGoAway(http2.ErrCodeProtocol)
	})

	t.Run("late trailers on a stream answered early leave the connection serving", func(t *testing.T) {
		url, _, _ := startServer(t, Config{}, h)
		c := dialRaw(t, url)
		isResponse := func(id uint32) func(http2.Frame) bool {
			return func(f http2.Frame) bool {
				mh, ok := f.(*http2.MetaHeadersFrame)
				return ok && mh.StreamID == id
			}
		}
		c.headers(1, "POST", "/answer-early", false)
		c.readUntil("the early answer", isResponse(1))
		c.headers(1, "POST", "/answer-early", true) // trailers: END_STREAM
		c.headers(3, "GET", "/answer-early", true)
		c.readUntil("the next request's answer", isResponse(3))
	})

	t.Run("a header list past the limit gets 431", func(t *testing.T) {
		url, _, _ := startServer(t, Config{MaxHeaderListSize: 4 << 10}, h)
		c := dialRaw(t, url)
		c.headers(1, "GET", "/", true, "x-big-1", strings.Repeat("a", 3000), "x-big-2", strings.Repeat("b", 3000))
		if s := c.responseStatus(); s != "431" {
			t.Fatalf("status %s, want 431", s)
		}
	})

	t.Run("a body that does not come fails the read at the handler's read deadline", func(t *testing.T) {
		url, _, _ := startServer(t, Config{}, h)
		c := dialRaw(t, url)
		c.headers(1, "POST", "/body-deadline", false)
		if s := c.responseStatus(); s != "408" {
			t.Fatalf("status %s, want 408", s)
		}
	})

	t.Run("a client that does not read loses its connection and frees the handler", func(t *testing.T) {
		url, _, _ := startServer(t, Config{WriteTimeout: 300 * time.Millisecond}, h)
		c := dialRaw(t, url)
		// Open every window wide, then never read.
		_ = c.fr.WriteWindowUpdate(0, 1<<30)
		c.headers(1, "GET", "/flood", true)
		_ = c.fr.WriteWindowUpdate(1, 1<<30)
		// The flood handler returns only when its write fails, which
		// needs the write timeout to close the connection.
		select {
		case err := <-floodEnded:
			t.Logf("the handler's write failed: %v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("the handler still writes after 20 s of a client that does not read")
		}
		// The client then sees EOF once it drains what the kernel buffered.
		_ = c.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		n, err := io.Copy(io.Discard, c.conn)
		var ne interface{ Timeout() bool }
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the server kept the connection open (%d bytes read)", n)
		}
	})

	t.Run("an idle connection is closed after the idle timeout", func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Now())
		url, _, _ := startServer(t, Config{IdleTimeout: time.Minute, Clock: clk}, h)
		c := dialRaw(t, url)
		// The server's ACK of our SETTINGS: it has read every frame we sent,
		// so no later frame moves its idle clock.
		c.readUntil("the server's SETTINGS ACK", func(f http2.Frame) bool {
			sf, ok := f.(*http2.SettingsFrame)
			return ok && sf.IsAck()
		})
		for deadline := time.Now().Add(10 * time.Second); !clk.HasWaiters(); {
			if time.Now().After(deadline) {
				t.Fatal("the idle sweep never started")
			}
			runtime.Gosched()
		}
		clk.Step(61 * time.Second)
		clk.Step(15 * time.Second) // the sweep runs every quarter of the timeout
		c.wantGoAway(http2.ErrCodeNo)
	})
}
