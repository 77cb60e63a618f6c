package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc"
	"go.etcd.io/etcd/server/v3/proxy/grpcproxy/adapter"
	"go.uber.org/zap"

	"github.com/nodeplane/nodeplane/internal/privdir"
)

// EmbeddedConfig configures an etcd member that runs inside the nodeplane
// process. The zero value of every field except Dir means its default (see
// DefaultEmbeddedConfig).
type EmbeddedConfig struct {
	// Dir holds the member's WAL, snapshots and database. Required; created
	// with mode 0700 if missing, and tightened to 0700 (with a warning) if
	// it exists with a looser mode: the database holds every Secret. A
	// member restarted on the same Dir keeps its data and cluster
	// membership, and ignores InitialCluster.
	Dir string
	// Name of the member in the cluster. Default "nodeplane".
	Name string
	// Logger receives etcd's log entries at LogLevel and above, with
	// component=etcd. Default slog.Default().
	Logger *slog.Logger
	// LogLevel is the least severe etcd entry logged. Default slog.LevelWarn:
	// etcd logs dozens of lines at info on every start.
	LogLevel slog.Leveler

	// PeerURL is where the member serves raft traffic to other members, e.g.
	// "http://10.0.0.1:2380"; plain http only (no peer TLS yet), so it
	// belongs on a private network. Port 0 picks a free port. Empty, the
	// default, means no peer listener at all: a single-member cluster has
	// no peer to talk to, and a listener would only let any local user read
	// the member list and speak raft to it. A member of a multi-member
	// cluster (InitialCluster set) needs one.
	PeerURL string
	// ClientURL, when set, also serves the etcd gRPC API on this URL (for
	// etcdctl or other processes); port 0 picks a free port. Empty means no
	// client listener: Embedded.Client talks to the member in-process, and
	// nothing else on the host can reach the data without going through the
	// API server.
	ClientURL string
	// ClientCertFile and ClientKeyFile are the serving certificate for an
	// https ClientURL. Both or neither.
	ClientCertFile, ClientKeyFile string
	// ClientCAFile, when set, makes the client listener require client
	// certificates signed by this CA.
	ClientCAFile string

	// InitialCluster lists every member of a new cluster as
	// "name=peerURL,name=peerURL". Empty means a single-member cluster of
	// this member. Members of one new cluster must be started together: each
	// waits for a quorum before StartEmbedded returns.
	InitialCluster string
	// ClusterToken distinguishes clusters started with the same
	// InitialCluster. Default "nodeplane".
	ClusterToken string

	// HeartbeatInterval is the raft heartbeat (etcd --heartbeat-interval).
	// Default 100ms.
	HeartbeatInterval time.Duration
	// ElectionTimeout (etcd --election-timeout) must be at least 5
	// heartbeats; a follower that hears no leader for this long starts an
	// election. A single member also waits up to this long to elect itself
	// when it starts. Default 1s.
	ElectionTimeout time.Duration

	// QuotaBackendBytes is the database size at which etcd raises a NOSPACE
	// alarm and refuses writes until compacted and defragmented. Default
	// 8 GiB, etcd's recommended maximum.
	QuotaBackendBytes int64
	// SnapshotCount is the number of applied entries between raft
	// snapshots; lower means less memory for the in-memory raft log and
	// faster restarts, more snapshot I/O. Default 10,000.
	SnapshotCount uint64
	// SnapshotCatchUpEntries is how many applied raft entries stay in
	// memory after each compaction of the raft log, for a slow follower to
	// catch up from. Default: etcd's 5,000 in a multi-member cluster;
	// 100 for a single member, which has no follower (at ~3 KB per Node
	// write, the 5,000 would keep ~15 MB for nobody).
	SnapshotCatchUpEntries uint64
	// AutoCompactionMode is "periodic" (AutoCompactionRetention is a
	// duration such as "5m") or "revision" (a revision count). Default
	// "periodic".
	AutoCompactionMode string
	// AutoCompactionRetention configures etcd's own compactor; "0", the
	// default, disables it. Use either this or RunCompactor, not both.
	AutoCompactionRetention string
	// WatchProgressNotifyInterval is how often a quiet watch that asked for
	// progress (storage.WatchOptions.ProgressNotify) gets an EventProgress.
	// Default 5s; etcd's own default of 10 minutes is too coarse to tell a
	// quiet store from a stalled one. etcd keeps this in a process-wide
	// variable: with several members in one process, the member whose
	// client or watch server was created last sets it for all.
	WatchProgressNotifyInterval time.Duration
	// UnsafeNoFsync skips fsync of the WAL and database: an OS crash or
	// power loss can lose acknowledged writes or corrupt the member (a
	// process crash cannot: writes reach the OS first). Only for data that
	// can be rebuilt: tests, simulations, soft state such as leases.
	UnsafeNoFsync bool
}

// DefaultEmbeddedConfig returns the defaults; set Dir before use.
func DefaultEmbeddedConfig() EmbeddedConfig {
	return EmbeddedConfig{
		Name:                        "nodeplane",
		LogLevel:                    slog.LevelWarn,
		ClusterToken:                "nodeplane",
		HeartbeatInterval:           100 * time.Millisecond,
		ElectionTimeout:             time.Second,
		QuotaBackendBytes:           8 << 30,
		SnapshotCount:               10_000,
		AutoCompactionMode:          embed.CompactorModePeriodic,
		AutoCompactionRetention:     "0",
		WatchProgressNotifyInterval: 5 * time.Second,
	}
}

func (c EmbeddedConfig) withDefaults() EmbeddedConfig {
	d := DefaultEmbeddedConfig()
	setDefault(&c.Name, d.Name)
	setDefault(&c.LogLevel, d.LogLevel)
	setDefault(&c.ClusterToken, d.ClusterToken)
	setDefault(&c.HeartbeatInterval, d.HeartbeatInterval)
	setDefault(&c.ElectionTimeout, d.ElectionTimeout)
	setDefault(&c.QuotaBackendBytes, d.QuotaBackendBytes)
	setDefault(&c.SnapshotCount, d.SnapshotCount)
	if c.InitialCluster == "" {
		setDefault(&c.SnapshotCatchUpEntries, singleMemberCatchUpEntries)
	}
	setDefault(&c.AutoCompactionMode, d.AutoCompactionMode)
	setDefault(&c.AutoCompactionRetention, d.AutoCompactionRetention)
	setDefault(&c.WatchProgressNotifyInterval, d.WatchProgressNotifyInterval)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// singleMemberCatchUpEntries is SnapshotCatchUpEntries' default for a
// single member: a few compactions' worth, nothing follows it.
const singleMemberCatchUpEntries = 100

func setDefault[T comparable](field *T, value T) {
	var zero T
	if *field == zero {
		*field = value
	}
}

func (c EmbeddedConfig) validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("no data dir"))
	}
	if c.HeartbeatInterval < time.Millisecond {
		errs = append(errs, fmt.Errorf("heartbeat interval %v is under 1ms", c.HeartbeatInterval))
	}
	if c.ElectionTimeout < 5*c.HeartbeatInterval {
		errs = append(errs, fmt.Errorf("election timeout %v is under 5 heartbeats of %v", c.ElectionTimeout, c.HeartbeatInterval))
	}
	if c.AutoCompactionMode != embed.CompactorModePeriodic && c.AutoCompactionMode != embed.CompactorModeRevision {
		errs = append(errs, fmt.Errorf("auto-compaction mode %q is neither %q nor %q", c.AutoCompactionMode, embed.CompactorModePeriodic, embed.CompactorModeRevision))
	}
	if c.QuotaBackendBytes < 0 {
		errs = append(errs, fmt.Errorf("negative backend quota %d", c.QuotaBackendBytes))
	}
	if c.PeerURL == "" {
		if c.InitialCluster != "" {
			errs = append(errs, errors.New("a member of a multi-member cluster needs a peer URL with the fixed port named in the initial cluster"))
		}
	} else if u, err := parseListenURL(c.PeerURL); err != nil {
		errs = append(errs, fmt.Errorf("peer URL: %w", err))
	} else if u.Scheme != "http" {
		errs = append(errs, fmt.Errorf("peer URL %s: only http is supported", c.PeerURL))
	} else if c.InitialCluster != "" && u.Port() == "0" {
		errs = append(errs, fmt.Errorf("peer URL %s: a member of a multi-member cluster needs the fixed port named in the initial cluster", c.PeerURL))
	}
	if c.ClientURL != "" {
		u, err := parseListenURL(c.ClientURL)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("client URL: %w", err))
		case u.Scheme == "https" && (c.ClientCertFile == "" || c.ClientKeyFile == ""):
			errs = append(errs, fmt.Errorf("client URL %s needs a certificate and key file", c.ClientURL))
		}
	}
	if (c.ClientCertFile == "") != (c.ClientKeyFile == "") {
		errs = append(errs, errors.New("client certificate and key files must be given together"))
	}
	if (c.ClientCertFile != "" || c.ClientCAFile != "") && !strings.HasPrefix(c.ClientURL, "https://") {
		errs = append(errs, errors.New("client TLS files given without an https client URL"))
	}
	return errors.Join(errs...)
}

func parseListenURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%s: scheme must be http or https", raw)
	}
	if _, _, err := net.SplitHostPort(u.Host); err != nil {
		return nil, fmt.Errorf("%s: %w", raw, err)
	}
	return u, nil
}

// Embedded is a running etcd member.
type Embedded struct {
	closing   *atomic.Bool // demotes etcd's log entries while closing
	etcd      *embed.Etcd
	client    *clientv3.Client
	kv        pb.KVClient // raw in-process KV API for Store writes
	peerURL   string
	clientURL string
	closeOnce sync.Once
}

// portPickAttempts bounds retries when a free port picked for a URL with
// port 0 is taken by someone else before etcd binds it.
const portPickAttempts = 3

// StartEmbedded starts an etcd member and returns once it has joined its
// cluster and can serve requests (for a new multi-member cluster, once a
// quorum of members is up), or ctx is done. On error nothing is left
// running.
func StartEmbedded(ctx context.Context, cfg EmbeddedConfig) (_ *Embedded, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("embedded etcd config: %w", err)
	}
	loosened, err := privdir.Ensure(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd data dir: %w", err)
	}
	if loosened != 0 {
		cfg.Logger.Warn("tightened the etcd data dir to 0700", "dir", cfg.Dir, "was", fmt.Sprintf("%#o", loosened))
	}

	// etcd reports the teardown of its own listeners as warnings and
	// errors; Close sets closing so that they are logged at debug level.
	closing := new(atomic.Bool)
	attrs := []slog.Attr{slog.String("component", "etcd"), slog.String("member", cfg.Name)}
	zl := newZapLogger(slog.New(cfg.Logger.Handler().WithAttrs(attrs)), cfg.LogLevel, closing)

	var e *embed.Etcd
	var peerURL, clientURL string
	for attempt := 1; ; attempt++ {
		var picked bool
		var ecfg *embed.Config
		ecfg, peerURL, clientURL, picked, err = cfg.etcdConfig(zl)
		if err != nil {
			return nil, fmt.Errorf("embedded etcd config: %w", err)
		}
		e, err = embed.StartEtcd(ecfg)
		if err == nil {
			break
		}
		if !picked || !errors.Is(err, syscall.EADDRINUSE) || attempt == portPickAttempts {
			return nil, fmt.Errorf("start embedded etcd in %s: %w", cfg.Dir, err)
		}
	}
	defer func() {
		if err != nil {
			closing.Store(true)
			e.Close()
		}
	}()

	select {
	case <-e.Server.ReadyNotify():
	case err = <-e.Err():
		return nil, fmt.Errorf("start embedded etcd in %s: %w", cfg.Dir, err)
	case <-e.Server.StopNotify():
		return nil, fmt.Errorf("start embedded etcd in %s: member stopped before it was ready", cfg.Dir)
	case <-ctx.Done():
		return nil, fmt.Errorf("start embedded etcd in %s: waiting for the cluster: %w", cfg.Dir, ctx.Err())
	}
	return &Embedded{
		closing:   closing,
		etcd:      e,
		client:    v3client.New(e.Server),
		kv:        adapter.KvServerToKvClient(v3rpc.NewQuotaKVServer(e.Server)),
		peerURL:   peerURL,
		clientURL: clientURL,
	}, nil
}

// etcdConfig translates cfg into etcd's configuration, picking a free
// loopback port for every URL with port 0 (picked reports whether it did).
func (c EmbeddedConfig) etcdConfig(logger *zap.Logger) (ecfg *embed.Config, peerURL, clientURL string, picked bool, err error) {
	ecfg = embed.NewConfig()
	ecfg.Name = c.Name
	ecfg.Dir = c.Dir
	ecfg.LogLevel = "warn" // unused: ZapLoggerBuilder decides
	ecfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger)
	// No etcd users or roles: nodeplane authenticates its own clients, and
	// the client listener, if any, authenticates by certificate.
	ecfg.AuthToken = ""

	var pickedPeer bool
	if c.PeerURL == "" {
		// No peer listener. etcd still needs a peer URL to name the member
		// in its cluster; port 0 can never be dialled, and no other member
		// exists to try.
		ecfg.ListenPeerUrls = nil
		ecfg.AdvertisePeerUrls = []url.URL{{Scheme: "http", Host: unreachablePeerHost}}
	} else {
		var peer *url.URL
		peer, pickedPeer, err = resolvePort(c.PeerURL)
		if err != nil {
			return nil, "", "", false, fmt.Errorf("peer URL: %w", err)
		}
		ecfg.ListenPeerUrls = []url.URL{*peer}
		ecfg.AdvertisePeerUrls = []url.URL{*peer}
		peerURL = peer.String()
	}
	ecfg.ListenClientUrls, ecfg.AdvertiseClientUrls = nil, nil
	var pickedClient bool
	if c.ClientURL != "" {
		var client *url.URL
		client, pickedClient, err = resolvePort(c.ClientURL)
		if err != nil {
			return nil, "", "", false, fmt.Errorf("client URL: %w", err)
		}
		ecfg.ListenClientUrls = []url.URL{*client}
		ecfg.AdvertiseClientUrls = []url.URL{*client}
		clientURL = client.String()
		ecfg.ClientTLSInfo.CertFile = c.ClientCertFile
		ecfg.ClientTLSInfo.KeyFile = c.ClientKeyFile
		ecfg.ClientTLSInfo.TrustedCAFile = c.ClientCAFile
		ecfg.ClientTLSInfo.ClientCertAuth = c.ClientCAFile != ""
	}
	ecfg.EnableGRPCGateway = false
	ecfg.ListenMetricsUrls = nil

	ecfg.InitialCluster = c.InitialCluster
	if ecfg.InitialCluster == "" {
		ecfg.InitialCluster = c.Name + "=" + ecfg.AdvertisePeerUrls[0].String()
	}
	ecfg.InitialClusterToken = c.ClusterToken
	ecfg.ClusterState = embed.ClusterStateFlagNew

	ecfg.TickMs = uint(c.HeartbeatInterval / time.Millisecond)
	ecfg.ElectionMs = uint(c.ElectionTimeout / time.Millisecond)
	ecfg.QuotaBackendBytes = c.QuotaBackendBytes
	ecfg.SnapshotCount = c.SnapshotCount
	if c.SnapshotCatchUpEntries > 0 {
		ecfg.SnapshotCatchUpEntries = c.SnapshotCatchUpEntries
	}
	ecfg.AutoCompactionMode = c.AutoCompactionMode
	ecfg.AutoCompactionRetention = c.AutoCompactionRetention
	ecfg.WatchProgressNotifyInterval = c.WatchProgressNotifyInterval
	ecfg.UnsafeNoFsync = c.UnsafeNoFsync
	return ecfg, peerURL, clientURL, pickedPeer || pickedClient, nil
}

// unreachablePeerHost is the peer address a member without a peer listener
// advertises.
const unreachablePeerHost = "127.0.0.1:0"

// resolvePort returns raw as a URL, with a free loopback port in place of
// port 0. The port is free when picked; another process may take it before
// etcd binds it, which StartEmbedded handles by picking again.
func resolvePort(raw string) (u *url.URL, picked bool, err error) {
	u, err = parseListenURL(raw)
	if err != nil {
		return nil, false, err
	}
	host, port, _ := net.SplitHostPort(u.Host)
	if port != "0" {
		return u, false, nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, false, fmt.Errorf("pick a free port on %s: %w", host, err)
	}
	u.Host = l.Addr().String()
	if err := l.Close(); err != nil {
		return nil, false, fmt.Errorf("pick a free port on %s: %w", host, err)
	}
	return u, true, nil
}

// Client returns the in-process client of this member: requests are
// function calls into the server, without gRPC or sockets. The member owns
// it; Close closes it (closing it earlier, e.g. through Store.Close, is
// harmless).
func (m *Embedded) Client() *clientv3.Client { return m.client }

// StoreConfig returns the Config of a Store over this member's in-process
// client; add Metrics as needed.
func (m *Embedded) StoreConfig() Config { return Config{Client: m.client, KV: m.kv} }

// PeerURL is the URL the member serves raft traffic on, or "" when it has
// no peer listener.
func (m *Embedded) PeerURL() string { return m.peerURL }

// ClientURL is the URL of the client listener, or "" when there is none.
func (m *Embedded) ClientURL() string { return m.clientURL }

// Err delivers errors that stop the member's listeners after start-up.
func (m *Embedded) Err() <-chan error { return m.etcd.Err() }

// Close closes the client, then stops the member: in-flight requests get up
// to etcd's request timeout to finish and the data is flushed to Dir. It is
// safe to call more than once.
func (m *Embedded) Close() {
	m.closeOnce.Do(func() {
		m.closing.Store(true)
		// The in-process client's Close only reports its own cancellation.
		_ = m.client.Close()
		m.etcd.Close()
	})
}
