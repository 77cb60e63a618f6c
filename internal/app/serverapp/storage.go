package serverapp

// The server's storage: the embedded etcd member or an external cluster,
// the in-memory lease store, and their compaction.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodeplane/nodeplane/internal/apiserver/registry"
	"github.com/nodeplane/nodeplane/internal/storage"
	"github.com/nodeplane/nodeplane/internal/storage/etcd"
	"github.com/nodeplane/nodeplane/internal/storage/memstore"
)

// backend is what the server does with every store besides serving the
// API: health checks and compaction.
type backend interface {
	CurrentRevision(ctx context.Context) (int64, error)
	Compact(ctx context.Context, revision int64) error
}

// openStores opens etcd (openStorage) and the stores over it, and the
// in-memory lease store when leases are soft state, and returns the
// function that closes them.
func (s *server) openStores(ctx context.Context) (func(), error) {
	configs, closeEtcd, err := openStorage(ctx, s.opts, s.log)
	if err != nil {
		return nil, err
	}
	var leases *memstore.Store
	closeStorage := func() {
		if leases != nil {
			// Before etcd: it writes the last snapshot of the leases.
			if err := leases.Close(); err != nil {
				s.log.Warn("close lease store", "err", err)
			}
		}
		closeEtcd()
	}
	// One histogram for every store; the backend label tells etcd's
	// requests from the lease store's.
	metrics, err := storage.NewMetrics(s.reg)
	if err != nil {
		closeStorage()
		return nil, err
	}
	etcdMetrics := metrics.Backend("etcd")
	// Events expire in storage (kube-apiserver's --event-ttl): etcd deletes
	// each event key when its lease runs out.
	var ttls []etcd.KeyTTL
	if s.opts.EventTTL > 0 {
		ttls = []etcd.KeyTTL{{Prefix: registry.Events().Prefix() + "/", TTL: s.opts.EventTTL}}
	}
	open := func(c etcd.Config) (*etcd.Store, error) {
		c.Metrics, c.Clock, c.TTLs = etcdMetrics, s.clock, ttls
		st, err := etcd.New(c)
		if err == nil {
			s.allStores = append(s.allStores, st)
		}
		return st, err
	}
	if s.store, err = open(configs.main); err != nil {
		closeStorage()
		return nil, err
	}
	s.overrides = map[schema.GroupResource]storage.Interface{}
	for gr, c := range configs.overrides {
		st, err := open(c)
		if err != nil {
			closeStorage()
			return nil, err
		}
		s.overrides[gr] = st
	}
	if configs.memLeases {
		if leases, err = s.openLeaseStore(ctx, metrics.Backend("memory")); err != nil {
			closeStorage()
			return nil, err
		}
		s.overrides[leasesResource] = leases
		s.allStores = append(s.allStores, leases)
	}
	return closeStorage, nil
}

// openLeaseStore opens the in-memory lease store in <data-dir>/leases
// (see storage/memstore for what survives a restart and a crash), recording
// its request latencies in metrics. Its
// revisions start above the main store's current one, so that a lease
// resourceVersion read from the main member (--durable-leases before) is
// never reused; a data dir that still holds the old no-fsync lease member
// is migrated by starting above any revision it can have reached (the
// clock in microseconds) and removing it.
func (s *server) openLeaseStore(ctx context.Context, metrics *storage.BackendMetrics) (*memstore.Store, error) {
	floor, err := s.store.CurrentRevision(ctx)
	if err != nil {
		return nil, fmt.Errorf("lease store: %w", err)
	}
	legacy := filepath.Join(s.opts.DataDir, legacyLeaseEtcdDir)
	if _, err := os.Stat(legacy); err == nil {
		floor = max(floor, s.clock.Now().UnixMicro())
		s.log.Info("removing the old lease etcd member; leases now live in memory (holders re-create them)", "dir", legacy)
		if err := os.RemoveAll(legacy); err != nil {
			return nil, fmt.Errorf("remove %s: %w", legacy, err)
		}
	}
	cfg := memstore.DefaultConfig()
	cfg.Dir = filepath.Join(s.opts.DataDir, leasesDir)
	cfg.InitialRevision = floor
	cfg.Clock = s.clock
	cfg.Logger = s.log
	cfg.Metrics = metrics
	st, err := memstore.Open(cfg)
	if err != nil {
		return nil, fmt.Errorf("lease store: %w", err)
	}
	return st, nil
}

// storageConfigs are the etcd stores the server uses.
type storageConfigs struct {
	main      etcd.Config
	overrides map[schema.GroupResource]etcd.Config
	// memLeases keeps leases in the in-memory lease store (embedded etcd
	// without --durable-leases).
	memLeases bool
}

// leasesResource is the resource kept in the in-memory lease store.
var leasesResource = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

// openStorage starts the embedded etcd member or dials the external
// cluster(s), and returns the store configurations and a close function.
//
// Embedded, leases are soft state (SPEC P3-1) kept in memory
// (storage/memstore, opened by openStores): a renewal waits for no disk; a
// clean restart keeps them, a crash may lose the renewals since the last
// snapshot, which the agents' next renewals rebuild. The embedded member
// serves one server only, so no other process needs to see those leases.
// --durable-leases keeps them in the main member. With --etcd-servers
// (possibly shared by several servers) they go where the user says.
func openStorage(ctx context.Context, o Options, log *slog.Logger) (storageConfigs, func(), error) {
	out := storageConfigs{overrides: map[schema.GroupResource]etcd.Config{}}
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	if len(o.EtcdServer) > 0 {
		dial := func(flag string, endpoints []string) (etcd.Config, error) {
			client, err := etcd.Dial(ctx, etcd.ExternalConfig{Endpoints: endpoints, CAFile: o.EtcdCA, CertFile: o.EtcdCert, KeyFile: o.EtcdKey, Logger: log})
			if err != nil {
				return etcd.Config{}, fmt.Errorf("%s: %w", flag, err)
			}
			closers = append(closers, func() { _ = client.Close() })
			return etcd.Config{Client: client}, nil
		}
		main, err := dial("--etcd-servers", o.EtcdServer)
		if err != nil {
			return out, nil, err
		}
		out.main = main
		for _, ov := range o.EtcdOverrides {
			gr, urls, _ := parseOverride(ov)
			c, err := dial("--etcd-servers-overrides", urls)
			if err != nil {
				closeAll()
				return out, nil, err
			}
			out.overrides[gr] = c
		}
		return out, closeAll, nil
	}
	ecfg := etcd.DefaultEmbeddedConfig()
	ecfg.Dir = filepath.Join(o.DataDir, etcdDir)
	ecfg.Logger = log
	member, err := etcd.StartEmbedded(ctx, ecfg)
	if err != nil {
		return out, nil, fmt.Errorf("embedded etcd: %w", err)
	}
	closers = append(closers, member.Close)
	out.main = member.StoreConfig()
	out.memLeases = !o.DurableLeases
	return out, closeAll, nil
}

// startCompactors compacts every store each --compaction-interval.
func (s *server) startCompactors(ctx context.Context) {
	if s.opts.CompactionInterval <= 0 {
		return
	}
	for _, st := range s.allStores {
		go etcd.RunCompactor(ctx, st, etcd.CompactorConfig{Interval: s.opts.CompactionInterval, Clock: s.clock, Logger: s.log})
	}
}
