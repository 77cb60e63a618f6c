package etcd

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"

	"github.com/nodeplane/nodeplane/internal/storage"
	"github.com/nodeplane/nodeplane/internal/storage/storagetest"
)

// testProgressInterval keeps the progress-notification conformance test
// short.
const testProgressInterval = 100 * time.Millisecond

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
}

// startMember starts a member that stops with the test.
func startMember(t testing.TB, cfg EmbeddedConfig) *Embedded {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	if cfg.WatchProgressNotifyInterval == 0 {
		cfg.WatchProgressNotifyInterval = testProgressInterval
	}
	if cfg.HeartbeatInterval == 0 && cfg.InitialCluster == "" {
		// A single member elects itself within one election timeout of
		// starting; keep that short.
		cfg.HeartbeatInterval, cfg.ElectionTimeout = 10*time.Millisecond, 100*time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := StartEmbedded(ctx, cfg)
	if err != nil {
		t.Fatalf("StartEmbedded = %v", err)
	}
	t.Cleanup(m.Close)
	return m
}

// newTestStore returns a Store with its own in-process client of m, closed
// with the test.
func newTestStore(t testing.TB, m *Embedded) *Store {
	t.Helper()
	s, err := New(Config{Client: v3client.New(m.etcd.Server), KV: m.kv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	})
	return s
}

func TestEmbeddedMemberConformance(t *testing.T) {
	m := startMember(t, EmbeddedConfig{})
	storagetest.RunConformance(t, func(t *testing.T) storage.Interface {
		return newTestStore(t, m)
	})
}

func TestThreeMemberClusterOverTLS(t *testing.T) {
	files := writeTestPKI(t)
	members := startCluster(t, 3, files)
	var endpoints []string
	for _, m := range members {
		endpoints = append(endpoints, m.ClientURL())
	}
	dial := func(t *testing.T) *Store {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		client, err := Dial(ctx, ExternalConfig{
			Endpoints: endpoints,
			CAFile:    files.ca, CertFile: files.clientCert, KeyFile: files.clientKey,
			Logger: testLogger(t),
		})
		if err != nil {
			t.Fatalf("Dial = %v", err)
		}
		s, err := New(Config{Client: client})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}

	storagetest.RunConformance(t, func(t *testing.T) storage.Interface { return dial(t) })

	t.Run("writes succeed after the leader stops", func(t *testing.T) {
		s := dial(t)
		rev, err := s.Create(t.Context(), "/cluster/k", []byte("0"))
		if err != nil {
			t.Fatal(err)
		}
		stopped := stopLeader(t, members)
		// The first requests may hit the stopped member or find no leader
		// while the others elect one; the client moves on to them.
		failover, cancel := context.WithTimeout(t.Context(), 15*time.Second)
		defer cancel()
		for i := 1; i <= 5; {
			ctx, cancelTry := context.WithTimeout(failover, 2*time.Second)
			next, err := s.Update(ctx, "/cluster/k", fmt.Append(nil, i), rev)
			cancelTry()
			if err == nil {
				rev, i = next, i+1
				continue
			}
			if failover.Err() != nil {
				t.Fatalf("update %d with %s stopped: %v", i, stopped, err)
			}
		}
		got, err := s.Get(t.Context(), "/cluster/k")
		if err != nil || string(got.Value) != "5" {
			t.Errorf("Get = %+v, %v; want 5", got, err)
		}
	})
}

// startCluster starts n members of one new cluster, each with an https
// client URL, and waits for all of them.
func startCluster(t *testing.T, n int, files testPKI) []*Embedded {
	t.Helper()
	var peers, clients, initial []string
	for i := range n {
		peer, _, err := resolvePort("http://127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		client, _, err := resolvePort("https://127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		peers = append(peers, peer.String())
		clients = append(clients, client.String())
		initial = append(initial, fmt.Sprintf("m%d=%s", i, peer))
	}
	members := make([]*Embedded, n)
	errs := make([]error, n)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range n {
		cfg := EmbeddedConfig{
			Dir:               t.TempDir(),
			Name:              fmt.Sprintf("m%d", i),
			Logger:            testLogger(t),
			PeerURL:           peers[i],
			ClientURL:         clients[i],
			ClientCertFile:    files.serverCert,
			ClientKeyFile:     files.serverKey,
			ClientCAFile:      files.ca,
			InitialCluster:    strings.Join(initial, ","),
			ClusterToken:      t.Name(),
			HeartbeatInterval: 50 * time.Millisecond,
			ElectionTimeout:   500 * time.Millisecond,

			WatchProgressNotifyInterval: testProgressInterval,
		}
		// Each member waits for a quorum, so they must start together.
		wg.Go(func() { members[i], errs[i] = StartEmbedded(ctx, cfg) })
	}
	wg.Wait()
	for i, m := range members {
		if m != nil {
			t.Cleanup(m.Close)
		}
		if errs[i] != nil {
			t.Fatalf("start member %d: %v", i, errs[i])
		}
	}
	return members
}

// stopLeader stops the member that leads the cluster and returns its name.
func stopLeader(t *testing.T, members []*Embedded) string {
	t.Helper()
	for _, m := range members {
		if m.etcd.Server.Leader() == m.etcd.Server.MemberID() {
			name := m.etcd.Config().Name
			m.Close()
			return name
		}
	}
	t.Fatal("no member is the leader")
	return ""
}

func TestNewRejectsIncompleteConfig(t *testing.T) {
	m := startMember(t, EmbeddedConfig{})
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"a config without a client", Config{}, "no client"},
		{"an in-process client without its KV", Config{Client: m.Client()}, "StoreConfig"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New = %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

func TestRequestProgressReachesEveryWatchOnceCaughtUp(t *testing.T) {
	// Periodic notifications are an hour away: whatever arrives was requested.
	m := startMember(t, EmbeddedConfig{WatchProgressNotifyInterval: time.Hour})
	s := newTestStore(t, m)
	rev, err := s.Create(t.Context(), "/progress/k", []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	var watches []<-chan storage.Event
	for _, opts := range []storage.WatchOptions{{}, {ProgressNotify: true}, {FromRevision: rev, ProgressNotify: true}} {
		ch, err := s.Watch(t.Context(), "/progress/", opts)
		if err != nil {
			t.Fatal(err)
		}
		watches = append(watches, ch)
	}
	// etcd answers only once every watch on the stream has caught up (it
	// checks every 100ms), so ask until each watch has its answer.
	ticker := time.NewTicker(50 * time.Millisecond)
	defer ticker.Stop()
	timeout := time.After(5 * time.Second)
	for i, ch := range watches {
		for got := false; !got; {
			if err := s.RequestProgress(t.Context()); err != nil {
				t.Fatalf("RequestProgress = %v", err)
			}
			select {
			case ev := <-ch:
				if ev.Type != storage.EventProgress || ev.Revision < rev {
					t.Errorf("watch %d: got %+v, want progress at >= %d", i, ev, rev)
				}
				got = true
			case <-ticker.C:
			case <-timeout:
				t.Fatalf("watch %d: no progress within 5s of asking", i)
			}
		}
	}
}
