package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
	"github.com/nodeplane/nodeplane/internal/apiserver/registry"
	"github.com/nodeplane/nodeplane/internal/storage"
	"github.com/nodeplane/nodeplane/internal/storage/etcd"
)

// These tests run the real handler over an embedded etcd member of their
// own. Requests carry their user in test headers instead of certificates.

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newStorage starts an etcd member that stops with the test.
func newStorage(t testing.TB) storage.Interface { return startStorage(t, false) }

// startStorage starts an etcd member that stops with the test: with fast
// raft and watch-progress timing for tests, or, if soft, configured like
// the server's former lease member (default timing, no WAL fsync).
func startStorage(t testing.TB, soft bool) storage.Interface {
	t.Helper()
	cfg := etcd.DefaultEmbeddedConfig()
	cfg.Dir = t.TempDir()
	cfg.Logger = quietLogger()
	if soft {
		cfg.UnsafeNoFsync = true
	} else {
		cfg.HeartbeatInterval, cfg.ElectionTimeout = 10*time.Millisecond, 100*time.Millisecond
		cfg.WatchProgressNotifyInterval = 100 * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := etcd.StartEmbedded(ctx, cfg)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(m.Close)
	st, err := etcd.New(m.StoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// newTestServer builds a server over new storage (unless cfg has one)
// with every resource, starts its caches and waits until it is ready and
// the system namespaces exist. The handler authenticates from test headers.
func newTestServer(t testing.TB, cfg Config) (*Server, http.Handler) {
	t.Helper()
	if cfg.Storage == nil {
		cfg.Storage = newStorage(t)
	}
	cfg.Resources = registry.All()
	cfg.Logger = quietLogger()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	t.Cleanup(func() {
		s.Stop()
		cancel()
		<-done
	})
	// A bounded readiness poll (at most 20s): the caches load from etcd in
	// the background.
	for attempt := 0; s.Ready() != nil || s.EnsureSystemNamespaces(ctx) != nil; attempt++ {
		if attempt == 2000 {
			t.Fatalf("server not ready: %v", s.Ready())
		}
		time.Sleep(10 * time.Millisecond) // poll interval: caches load from a real etcd, bounded by 2000 attempts
	}
	return s, withTestUser(s)
}

// Test headers naming the requester.
const (
	headerUser   = "X-Test-User"
	headerGroups = "X-Test-Groups"
)

// withTestUser puts the user named by the test headers on the context.
func withTestUser(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name := r.Header.Get(headerUser); name != "" {
			u := &authn.User{Name: name, Groups: []string{authn.GroupAuthenticated}}
			if g := r.Header.Get(headerGroups); g != "" {
				u.Groups = append(u.Groups, strings.Split(g, ",")...)
			}
			r = r.WithContext(authn.WithUser(r.Context(), u))
		}
		next.ServeHTTP(w, r)
	})
}

// requester is a user of the test server.
type requester struct {
	name   string
	groups []string
}

var (
	admin     = requester{"admin", []string{authn.GroupMasters}}
	plainUser = requester{"alice", nil}
)

func asNode(name string) requester {
	return requester{"system:node:" + name, []string{authn.GroupNodes}}
}

// response is a recorded answer.
type response struct {
	code int
	body []byte
}

// status decodes the answer as a metav1.Status.
func (r response) status(t *testing.T) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(r.body, &st); err != nil {
		t.Fatalf("answer %d is not a Status: %s", r.code, r.body)
	}
	return st
}

// do sends a request as u through h. body is JSON-encoded unless it is a
// string (sent as is); patches are merge patches.
func do(t *testing.T, h http.Handler, u requester, method, path string, body any) response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req := httptest.NewRequest(method, path, rd)
	if body != nil {
		ct := "application/json"
		if method == http.MethodPatch {
			ct = "application/merge-patch+json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if u.name != "" {
		req.Header.Set(headerUser, u.name)
		req.Header.Set(headerGroups, strings.Join(u.groups, ","))
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return response{code: rec.Code, body: rec.Body.Bytes()}
}

// mustDo is do that fails the test unless the answer has code want.
func mustDo(t *testing.T, h http.Handler, u requester, method, path string, body any, want int) response {
	t.Helper()
	resp := do(t, h, u, method, path, body)
	if resp.code != want {
		t.Fatalf("%s %s as %s: got %d %s, want %d", method, path, u.name, resp.code, resp.body, want)
	}
	return resp
}
