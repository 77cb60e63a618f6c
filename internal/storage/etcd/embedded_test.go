package etcd

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
)

func TestStartEmbeddedRejectsInvalidConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  EmbeddedConfig
		want string
	}{
		{"a config without a data dir", EmbeddedConfig{}, "no data dir"},
		{"an election timeout under five heartbeats", EmbeddedConfig{Dir: "d", HeartbeatInterval: time.Second, ElectionTimeout: 2 * time.Second}, "election timeout"},
		{"an unknown auto-compaction mode", EmbeddedConfig{Dir: "d", AutoCompactionMode: "hourly"}, "auto-compaction mode"},
		{"a peer URL without a port", EmbeddedConfig{Dir: "d", PeerURL: "http://127.0.0.1"}, "peer URL"},
		{"an https peer URL", EmbeddedConfig{Dir: "d", PeerURL: "https://127.0.0.1:0"}, "only http"},
		{"an https client URL without a certificate", EmbeddedConfig{Dir: "d", ClientURL: "https://127.0.0.1:0"}, "certificate and key"},
		{"TLS files for a plain http client URL", EmbeddedConfig{Dir: "d", ClientURL: "http://127.0.0.1:0", ClientCAFile: "ca.pem"}, "without an https client URL"},
		{"a cluster member without a fixed peer port", EmbeddedConfig{Dir: "d", InitialCluster: "a=http://127.0.0.1:2380,b=http://127.0.0.1:2381"}, "fixed port"},
		{"a certificate without its key", EmbeddedConfig{Dir: "d", ClientURL: "https://127.0.0.1:0", ClientCertFile: "c.pem"}, "given together"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := StartEmbedded(t.Context(), tt.cfg)
			if err == nil {
				m.Close()
				t.Fatal("StartEmbedded succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

func TestEmbeddedMemberKeepsItsDataAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	// The first start has a peer listener, as members of older versions
	// did; the restart has none, and a single member does not mind.
	first := startMember(t, EmbeddedConfig{Dir: dir, PeerURL: "http://127.0.0.1:0"})
	s := newTestStore(t, first)
	rev, err := s.Create(t.Context(), "/restart/k", []byte("kept"))
	if err != nil {
		t.Fatal(err)
	}
	first.Close()

	second := startMember(t, EmbeddedConfig{Dir: dir})
	got, err := newTestStore(t, second).Get(t.Context(), "/restart/k")
	if err != nil || string(got.Value) != "kept" || got.ModRevision != rev {
		t.Errorf("Get after restart = %+v, %v; want kept at %d", got, err, rev)
	}
}

func TestStartEmbeddedReleasesEverythingWhenTheClusterNeverForms(t *testing.T) {
	peer, _, err := resolvePort("http://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	absent, _, err := resolvePort("http://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err = StartEmbedded(ctx, EmbeddedConfig{
		Dir:            t.TempDir(),
		Name:           "lonely",
		Logger:         testLogger(t),
		PeerURL:        peer.String(),
		InitialCluster: "lonely=" + peer.String() + ",absent=" + absent.String(),
	})
	if err == nil || !strings.Contains(err.Error(), "waiting for the cluster") {
		t.Fatalf("StartEmbedded = %v, want a timeout waiting for the cluster", err)
	}
	l, err := net.Listen("tcp", peer.Host)
	if err != nil {
		t.Fatalf("peer port still taken after a failed start: %v", err)
	}
	l.Close()
}

func TestStartEmbeddedOnATakenPortFailsWithEADDRINUSE(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// StartEmbedded retries ports it picked itself on this error; a port
	// the caller chose is reported.
	_, err = StartEmbedded(t.Context(), EmbeddedConfig{Dir: t.TempDir(), Logger: testLogger(t), PeerURL: "http://" + l.Addr().String()})
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("StartEmbedded on a taken port = %v, want EADDRINUSE", err)
	}
}

func TestEmbeddedSingleMemberOpensNoTCPListener(t *testing.T) {
	before := listeningTCPInodes(t)
	m := startMember(t, EmbeddedConfig{})
	if m.ClientURL() != "" || m.PeerURL() != "" || len(m.etcd.Clients) != 0 || len(m.etcd.Peers) != 0 {
		t.Errorf("ClientURL = %q, PeerURL = %q with %d client and %d peer listeners, want none",
			m.ClientURL(), m.PeerURL(), len(m.etcd.Clients), len(m.etcd.Peers))
	}
	for inode, addr := range listeningTCPInodes(t) {
		if _, ok := before[inode]; !ok {
			t.Errorf("the member opened a TCP listener on %s", addr)
		}
	}
	// The in-process client still works.
	if _, err := m.Client().Put(t.Context(), "/no-listener", "v"); err != nil {
		t.Errorf("Put through the in-process client = %v", err)
	}
}

func TestStartEmbeddedTightensALooseDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etcd")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // past the umask
		t.Fatal(err)
	}
	var buf syncBuffer
	startMember(t, EmbeddedConfig{Dir: dir, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		t.Errorf("data dir mode = %#o, want 0700", perm)
	}
	if !strings.Contains(buf.String(), "tightened the etcd data dir to 0700") {
		t.Errorf("log does not say the data dir was tightened:\n%s", buf.String())
	}
}

// listeningTCPInodes returns the socket inodes of this process that listen
// on TCP (v4 or v6), with their local addresses as /proc shows them.
func listeningTCPInodes(t *testing.T) map[string]string {
	t.Helper()
	owned := map[string]bool{}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") {
			owned[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	out := map[string]string{}
	for _, table := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			// sl local_address rem_address st ... inode is field 9; st 0A is LISTEN.
			if len(f) > 9 && f[3] == "0A" && owned[f[9]] {
				out[f[9]] = f[1]
			}
		}
	}
	return out
}

func TestEmbeddedMemberLogsThroughSlog(t *testing.T) {
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m := startMember(t, EmbeddedConfig{Logger: logger, LogLevel: slog.LevelDebug})
	m.Close()
	out := buf.String()
	for _, want := range []string{
		`level=INFO msg="starting an etcd server" component=etcd member=nodeplane`,
		// Shutdown is logged, but never above debug level.
		`level=DEBUG msg="closing etcd server"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log output lacks %s:\n%s", want, out)
		}
	}
}

func TestEmbeddedMemberLogsOnlyFromLogLevel(t *testing.T) {
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m := startMember(t, EmbeddedConfig{Logger: logger})
	m.Close()
	var kept []string
	for _, line := range strings.Split(buf.String(), "\n") {
		// etcd sometimes tries to record its storage version before the
		// first raft term exists and logs that at warn/error; it retries on
		// its own. That is etcd's start-up race, not our shutdown noise.
		if strings.Contains(line, "failed to update storage version") || strings.Contains(line, "Failed to detect schema version") {
			continue
		}
		kept = append(kept, line)
	}
	if out := strings.Join(kept, "\n"); strings.Contains(out, "level=INFO") || strings.Contains(out, "level=DEBUG") || strings.Contains(out, "level=ERROR") {
		t.Errorf("entries below the default warn level, or shutdown errors, were logged:\n%s", out)
	}
}

// syncBuffer is a bytes.Buffer safe for etcd's concurrent loggers.
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

func TestRaftEntriesKeptForFollowersDependOnTheCluster(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  EmbeddedConfig
		want uint64
	}{
		{"a single member keeps a hundred", EmbeddedConfig{}, 100},
		{"a member of a three-member cluster keeps etcd's default", EmbeddedConfig{
			PeerURL:        "http://127.0.0.1:23801",
			InitialCluster: "a=http://127.0.0.1:23801,b=http://127.0.0.1:23802,c=http://127.0.0.1:23803",
			Name:           "a",
		}, 5000},
		{"an explicit count wins", EmbeddedConfig{SnapshotCatchUpEntries: 777}, 777},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Dir = t.TempDir()
			ecfg, _, _, _, err := tc.cfg.withDefaults().etcdConfig(zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			if ecfg.SnapshotCatchUpEntries != tc.want {
				t.Fatalf("SnapshotCatchUpEntries %d, want %d", ecfg.SnapshotCatchUpEntries, tc.want)
			}
		})
	}
}
