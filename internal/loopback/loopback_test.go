package loopback

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nodeplane/nodeplane/internal/pki"
)

// newCluster is a real cluster CA in a temporary directory.
func newCluster(t *testing.T) *pki.Cluster {
	t.Helper()
	c, err := pki.EnsureCluster(pki.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newTransport serves h as the holder of a certificate for cn issued by a
// fresh cluster CA.
func newTransport(t *testing.T, h http.Handler, maxBuffered int) *Transport {
	t.Helper()
	c := newCluster(t)
	certPEM, _, err := c.IssueClientCert("system:kube-controller-manager", []string{"ops"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(Config{Handler: h, CertPEM: certPEM, Roots: c.CertPool(), MaxBuffered: maxBuffered})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// within fails the test unless ch is closed or receives before the deadline.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen within 10 s", what)
		var zero T
		return zero
	}
}

func TestARequestReachesTheHandlerAsTheCertificatesHolder(t *testing.T) {
	type seen struct {
		method, uri, host, remote, ct, body, cn string
		orgs                                    []string
		proto                                   int
	}
	got := make(chan seen, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s := seen{method: r.Method, uri: r.RequestURI, host: r.Host, remote: r.RemoteAddr, ct: r.Header.Get("Content-Type"), body: string(b), proto: r.ProtoMajor}
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
			s.cn = r.TLS.VerifiedChains[0][0].Subject.CommonName
			s.orgs = r.TLS.VerifiedChains[0][0].Subject.Organization
		}
		got <- s
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", "5")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "hello")
	})
	client := &http.Client{Transport: newTransport(t, h, 0)}
	req, err := http.NewRequest(http.MethodPut, "https://127.0.0.1:6443/api/v1/namespaces/a/pods/p?timeout=10s&x=%2F", strings.NewReader("body"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusCreated || string(b) != "hello" || resp.Header.Get("Content-Type") != "text/plain" || resp.ContentLength != 5 {
		t.Errorf("response: %d %q %q length %d, want 201 hello text/plain length 5", resp.StatusCode, b, resp.Header.Get("Content-Type"), resp.ContentLength)
	}
	s := <-got
	want := seen{method: "PUT", uri: "/api/v1/namespaces/a/pods/p?timeout=10s&x=%2F", host: "127.0.0.1:6443", remote: RemoteAddr, ct: "application/json", body: "body", cn: "system:kube-controller-manager", proto: 2}
	if s.method != want.method || s.uri != want.uri || s.host != want.host || s.remote != want.remote || s.ct != want.ct || s.body != want.body || s.cn != want.cn || s.proto != want.proto {
		t.Errorf("handler saw %+v, want %+v", s, want)
	}
	if len(s.orgs) != 1 || s.orgs[0] != "ops" {
		t.Errorf("groups %v, want [ops]", s.orgs)
	}
}

func TestAStreamedResponseIsReadableBeforeTheHandlerReturns(t *testing.T) {
	ended := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(ended)
		_, _ = io.WriteString(w, "event 1\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // a watch: runs until the client goes
	})
	resp, err := (&http.Client{Transport: newTransport(t, h, 0)}).Get("https://server/watch")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := resp.Body.Read(buf)
	if err != nil || string(buf[:n]) != "event 1\n" {
		t.Fatalf("read %q, %v; want the first event", buf[:n], err)
	}
	select {
	case <-ended:
		t.Fatal("the handler ended before the client closed the body")
	default:
	}
	_ = resp.Body.Close()
	within(t, ended, "the handler ending after the body was closed")
}

func TestWrittenBytesReachTheReaderAtTheFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		flush := make(chan struct{}) // made in the bubble: waiting on it is durable
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.(http.Flusher).Flush() // the header
			_, _ = io.WriteString(w, "event 1\n")
			<-flush
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		})
		tr := newTransport(t, h, 0)
		resp, err := (&http.Client{Transport: tr}).Get("https://server/watch")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		read := make(chan string, 1)
		go func() {
			buf := make([]byte, 64)
			n, _ := resp.Body.Read(buf)
			read <- string(buf[:n])
		}()
		// Every goroutine is blocked: the handler after its write, the
		// reader waiting. Like a socket's buffered writer, nothing is read
		// before the Flush.
		synctest.Wait()
		select {
		case got := <-read:
			t.Fatalf("read %q before the handler flushed", got)
		default:
		}
		close(flush)
		synctest.Wait()
		select {
		case got := <-read:
			if got != "event 1\n" {
				t.Errorf("read %q, want the event", got)
			}
		default:
			t.Fatal("nothing read after the Flush")
		}
	})
}

func TestTheClientsContextEndingBeforeTheHeaderEndsTheRequest(t *testing.T) {
	started, ended := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(ended)
		close(started)
		<-r.Context().Done()
	})
	tr := newTransport(t, h, 0)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://server/slow", nil)
	errc := make(chan error, 1)
	go func() {
		_, err := tr.RoundTrip(req)
		errc <- err
	}()
	within(t, started, "the handler starting")
	cancel()
	if err := within(t, errc, "RoundTrip returning"); !errors.Is(err, context.Canceled) {
		t.Errorf("RoundTrip: %v, want context.Canceled", err)
	}
	within(t, ended, "the handler ending")
}

func TestAHandlerThatPanicsFailsTheRequestAndNotTheServer(t *testing.T) {
	tests := []struct {
		name     string
		before   bool // write a part of the body before the panic
		wantBody string
	}{
		{name: "a panic before the header fails the round trip"},
		{name: "a panic after part of the body ends the body with an error", before: true, wantBody: "part"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.before {
					_, _ = io.WriteString(w, "part")
				}
				panic("boom")
			})
			resp, err := (&http.Client{Transport: newTransport(t, h, 0)}).Get("https://server/x")
			if !tt.before {
				if err == nil || !strings.Contains(err.Error(), "boom") {
					t.Fatalf("Get: %v, want an error naming the panic", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err == nil || string(b) != tt.wantBody {
				t.Errorf("body %q, %v; want %q and an error", b, err, tt.wantBody)
			}
		})
	}
}

func TestAReaderThatDoesNotReadHoldsTheHandlersWritesAtTheLimit(t *testing.T) {
	const limit, chunk = 1024, 512
	synctest.Test(t, func(t *testing.T) {
		var written atomic.Int64
		writeErr := make(chan error, 1)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := make([]byte, chunk)
			for range 100 {
				if _, err := w.Write(p); err != nil {
					writeErr <- err
					return
				}
				written.Add(chunk)
			}
			writeErr <- nil
		})
		tr := newTransport(t, h, limit)
		resp, err := (&http.Client{Transport: tr}).Get("https://server/big")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		// Nobody reads: once every goroutine is blocked, the handler has
		// written exactly up to the limit and waits in its next write.
		synctest.Wait()
		if n := written.Load(); n != limit {
			t.Fatalf("the handler wrote %d bytes with nobody reading, want %d", n, limit)
		}
		_ = resp.Body.Close()
		synctest.Wait()
		select {
		case err := <-writeErr:
			if !errors.Is(err, errBodyClosed) {
				t.Errorf("the waiting write returned %v, want %v", err, errBodyClosed)
			}
		default:
			t.Fatal("the handler's write still waits after Close")
		}
	})
}

func TestALargeWriteIsBufferedOnlyUpToTheLimit(t *testing.T) {
	const limit = 4096
	body := make([]byte, 256<<10)
	for i := range body {
		body[i] = byte(i % 251)
	}
	writers := make(chan *responseWriter, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writers <- w.(*responseWriter)
		_, _ = w.Write(body) // one write of 64 times the limit
	})
	resp, err := (&http.Client{Transport: newTransport(t, h, limit)}).Get("https://server/list")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	w := within(t, writers, "the handler starting")
	// Read slowly, checking after each read that the writer holds no more
	// than the limit unread.
	var got []byte
	buf := make([]byte, 1000)
	for {
		n, err := resp.Body.Read(buf)
		got = append(got, buf[:n]...)
		w.mu.Lock()
		unread, capacity := len(w.buf)-w.off, cap(w.buf)
		w.mu.Unlock()
		if unread > limit || capacity > 2*limit {
			t.Fatalf("%d bytes unread in a buffer of %d, want at most %d unread", unread, capacity, limit)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if string(got) != string(body) {
		t.Errorf("read %d bytes, want the %d written, in order", len(got), len(body))
	}
}

func TestTheWriteDeadlineEndsAWriteWaitingForTheReader(t *testing.T) {
	writeErr := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
		p := make([]byte, 4096)
		for {
			if _, err := w.Write(p); err != nil {
				writeErr <- err
				return
			}
		}
	})
	resp, err := (&http.Client{Transport: newTransport(t, h, 1024)}).Get("https://server/big")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	err = within(t, writeErr, "the write failing at its deadline")
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("write error %v, want a time-out", err)
	}
}

func TestAHeadResponseHasNoBody(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "3")
		_, _ = io.WriteString(w, "abc")
	})
	resp, err := (&http.Client{Transport: newTransport(t, h, 0)}).Head("https://server/x")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil || len(b) != 0 || resp.ContentLength != 3 {
		t.Errorf("HEAD body %q, %v, length %d; want empty, nil, 3", b, err, resp.ContentLength)
	}
}

func TestNewRefusesACertificateItCannotVerify(t *testing.T) {
	ours, other := newCluster(t), newCluster(t)
	foreign, _, err := other.IssueClientCert("system:kube-controller-manager", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	h := http.NotFoundHandler()
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{name: "a certificate from another CA", cfg: Config{Handler: h, CertPEM: foreign, Roots: ours.CertPool()}, want: "verify client certificate"},
		{name: "no certificate", cfg: Config{Handler: h, CertPEM: []byte("not a certificate"), Roots: ours.CertPool()}, want: "no CERTIFICATE block"},
		{name: "no handler", cfg: Config{CertPEM: foreign, Roots: other.CertPool()}, want: "no handler"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestRequestsStartThroughConfigGoWhoseWorkerOutlivesAPanic(t *testing.T) {
	// One long-lived worker, as a pool of warm workers would lend: it must
	// serve every request, and a handler's panic must not reach it.
	tasks := make(chan func())
	go func() {
		for fn := range tasks {
			fn()
		}
	}()
	defer close(tasks)
	var started []string
	goServe := func(r *http.Request, fn func()) {
		started = append(started, r.Method+" "+r.URL.Path) // RoundTrips below run one at a time
		tasks <- fn
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("boom")
		}
		_, _ = io.WriteString(w, "served "+r.URL.Path)
	})
	c := newCluster(t)
	certPEM, _, err := c.IssueClientCert("system:kube-controller-manager", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(Config{Handler: h, CertPEM: certPEM, Roots: c.CertPool(), Go: goServe})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: tr}
	get := func(path string) (string, error) {
		resp, err := client.Get("https://server" + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if body, err := get("/a"); err != nil || body != "served /a" {
		t.Fatalf("GET /a: %q, %v", body, err)
	}
	if _, err := get("/panic"); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("GET /panic: %v, want an error naming the panic", err)
	}
	if body, err := get("/b"); err != nil || body != "served /b" {
		t.Fatalf("GET /b after a panic: %q, %v", body, err)
	}
	if want := []string{"GET /a", "GET /panic", "GET /b"}; strings.Join(started, ",") != strings.Join(want, ",") {
		t.Errorf("Config.Go started %q, want %q", started, want)
	}
}
