package join_test

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
	"github.com/nodeplane/nodeplane/internal/join"
	"github.com/nodeplane/nodeplane/internal/pki"
)

// start is the fake clocks' time: far from the real one, so that any check
// that reads the real clock instead of the injected one fails.
var start = time.Date(2031, 3, 14, 15, 9, 26, 0, time.UTC)

const secret = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// fixture is a join server and a whoami endpoint behind the API server's
// authentication, on real HTTPS with the cluster's serving TLS config.
type fixture struct {
	clock   *testclock.FakeClock
	cluster *pki.Cluster
	server  *join.Server
	url     string
	logs    *syncBuffer

	mu       sync.Mutex
	requests map[string]int // by path
	// unavailable makes the next n requests to a path answer 503.
	unavailable map[string]int
	// connections counts accepted TCP connections.
	connections int
}

type fixtureOptions struct {
	certTTL time.Duration
	// tokens, identities and nodes are the join server's state (see
	// fakes_test.go); nil leaves them out.
	tokens     join.TokenStore
	identities join.IdentityStore
	nodes      join.NodeReader
}

func newFixture(t *testing.T, opts fixtureOptions) *fixture {
	t.Helper()
	f := &fixture{clock: testclock.NewFakeClock(start), logs: &syncBuffer{}, requests: map[string]int{}, unavailable: map[string]int{}}
	var err error
	f.cluster, err = pki.EnsureCluster(pki.Config{Dir: t.TempDir(), Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	f.server, err = join.NewServer(join.ServerConfig{
		Cluster: f.cluster,
		Token:   secret,
		CertTTL: opts.certTTL,
		Clock:   f.clock,

		Tokens:     opts.tokens,
		Identities: opts.identities,
		Nodes:      opts.nodes,
		Logger:     slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(join.PathPrefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests[r.URL.Path]++
		fail := f.unavailable[r.URL.Path] > 0
		if fail {
			f.unavailable[r.URL.Path]--
		}
		f.mu.Unlock()
		if fail {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		f.server.ServeHTTP(w, r)
	}))
	mux.Handle("/whoami", authn.Middleware(authn.Union{authn.ClientCert{Clock: f.clock}, f.server.NodeTokens()}, http.HandlerFunc(whoami), nil))

	srv := httptest.NewUnstartedServer(mux)
	tlsCfg := f.cluster.ServingTLSConfig()
	tlsCfg.Time = f.clock.Now
	// Wrapping the listener (instead of StartTLS) serves the cluster's
	// certificate to clients that connect by IP address, as ServeTLS does.
	srv.Listener = tls.NewListener(srv.Listener, tlsCfg)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			f.mu.Lock()
			f.connections++
			f.mu.Unlock()
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	f.url = pki.ClientURL(srv.Listener.Addr())
	return f
}

// count returns how many requests reached path (relative to PathPrefix,
// e.g. "v1/certificate").
func (f *fixture) count(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[join.PathPrefix+path]
}

// connectionCount returns how many connections the server accepted.
func (f *fixture) connectionCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.connections
}

// failNext makes the next n requests to path (relative to PathPrefix)
// answer 503.
func (f *fixture) failNext(path string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unavailable[join.PathPrefix+path] = n
}

// clientConfig is an agent's configuration for this server.
func (f *fixture) clientConfig(t *testing.T, nodeName string) join.ClientConfig {
	return join.ClientConfig{
		Server:   f.url,
		Token:    secret,
		DataDir:  t.TempDir(),
		NodeName: nodeName,
		Clock:    f.clock,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// httpClient trusts the cluster CA (at the fake time) and presents certs.
func (f *fixture) httpClient(t *testing.T, certs ...tls.Certificate) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.cluster.CertPool(), Certificates: certs, Time: f.clock.Now}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// post sends body as JSON and returns the status code and the raw answer.
func post(t *testing.T, c *http.Client, url string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	resp, err := c.Post(url, "application/json", rd)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

func decodeStatus(t *testing.T, data []byte) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatalf("not a Status: %s: %v", data, err)
	}
	if st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusFailure {
		t.Errorf("kind/apiVersion/status = %s/%s/%s, want Status/v1/Failure", st.Kind, st.APIVersion, st.Status)
	}
	return st
}

// whoamiAnswer is what /whoami says about the caller.
type whoamiAnswer struct {
	User   authn.User `json:"user"`
	Serial string     `json:"serial"`
}

func whoami(w http.ResponseWriter, r *http.Request) {
	u, _ := authn.UserFrom(r.Context())
	a := whoamiAnswer{User: *u}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		a.Serial = r.TLS.PeerCertificates[0].SerialNumber.String()
	}
	_ = json.NewEncoder(w).Encode(a)
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// eventually waits (on the real clock) for cond, which depends on work
// done over the network by another goroutine.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // poll interval: work over the real network, bounded by the deadline
	}
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }
