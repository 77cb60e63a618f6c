// Package etcd implements storage.Interface over etcd v3 and can run the etcd
// member that backs it inside the nodeplane process.
//
// It owns the translation between the storage contract and etcd: transaction
// shapes (one round trip per write, compare-and-swap on ModRevision), prefix
// ranges, watch event mapping and error classification. It also owns the
// lifecycle of an embedded member (StartEmbedded), connections to an external
// cluster (Dial) and the history compactor (RunCompactor).
//
// It must not know about Kubernetes objects or resourceVersions: keys are
// strings and values opaque bytes, exactly as in package storage.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/storage"
)

// revisionProbeKey is read count-only to learn the store's current revision.
// It need not exist; the response header carries the revision either way.
const revisionProbeKey = "/nodeplane/revision-probe"

// Config configures a Store. For an embedded member start from
// Embedded.StoreConfig; for a cluster, set Client from Dial.
type Config struct {
	// Client talks to etcd. Required. Store.Close closes it.
	Client *clientv3.Client
	// KV is etcd's raw KV API, which writes use to send transactions
	// without clientv3's request builders (about 15% more lease renewals
	// per core). Default: a KV client over Client's gRPC connection.
	// Client has no connection when it is in-process; then KV is required
	// (Embedded.StoreConfig sets it).
	KV pb.KVClient
	// Metrics records request latencies when set: storage.Metrics.Backend
	// ("etcd").
	Metrics *storage.BackendMetrics
	// Clock times requests for Metrics. Default: the real clock.
	Clock clock.PassiveClock
	// TTLs give the keys under some prefixes a time to live (see KeyTTL).
	TTLs []KeyTTL
}

// Store is the etcd implementation of storage.Interface.
type Store struct {
	client *clientv3.Client
	kv     clientv3.KV
	// rawKV and callOpts serve the writes (see write.go).
	rawKV    pb.KVClient
	callOpts []grpc.CallOption
	watcher  clientv3.Watcher
	metrics  *storage.BackendMetrics
	clock    clock.PassiveClock
	// leases attach the TTL leases; nil when no key has a TTL.
	leases *leases
}

var _ storage.Interface = (*Store)(nil)

// New returns a Store over cfg.Client.
func New(cfg Config) (*Store, error) {
	if cfg.Client == nil {
		return nil, errors.New("etcd store: config has no client")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	var callOpts []grpc.CallOption
	if cfg.KV == nil {
		conn := cfg.Client.ActiveConnection()
		if conn == nil {
			return nil, errors.New("etcd store: in-process client without a KV; use Embedded.StoreConfig")
		}
		cfg.KV = pb.NewKVClient(conn)
		// What clientv3 passes on every call: wait for a connection to
		// become ready instead of failing fast, and its message limits.
		callOpts = []grpc.CallOption{
			grpc.WaitForReady(true),
			grpc.MaxCallSendMsgSize(2 << 20),
			grpc.MaxCallRecvMsgSize(math.MaxInt32),
		}
	}
	var ls *leases
	if len(cfg.TTLs) > 0 {
		var err error
		if ls, err = newLeases(cfg.Client.Lease, cfg.Clock, cfg.TTLs); err != nil {
			return nil, err
		}
	}
	return &Store{
		leases:   ls,
		client:   cfg.Client,
		kv:       cfg.Client.KV,
		rawKV:    cfg.KV,
		callOpts: callOpts,
		watcher:  cfg.Client.Watcher,
		metrics:  cfg.Metrics,
		clock:    cfg.Clock,
	}, nil
}

// observe records the latency of one request started at start. Called with
// defer so the clock is read when the request begins.
func (s *Store) observe(op storage.Operation, start time.Time) {
	if s.metrics != nil {
		s.metrics.Observe(op, s.clock.Since(start))
	}
}

// Get returns the key's current value (a linearizable read).
func (s *Store) Get(ctx context.Context, key string) (storage.KeyValue, error) {
	defer s.observe(storage.OpGet, s.clock.Now())
	resp, err := s.kv.Get(ctx, key)
	if err != nil {
		return storage.KeyValue{}, wrapError("get", key, err)
	}
	if len(resp.Kvs) == 0 {
		return storage.KeyValue{}, fmt.Errorf("get %q: %w", key, storage.ErrNotFound)
	}
	return toKeyValue(resp.Kvs[0]), nil
}

// List returns one page of the keys under prefix in key order. Callers that
// mean a directory pass a prefix ending in "/", so "/a/b/" does not match
// "/a/bc".
func (s *Store) List(ctx context.Context, prefix string, opts storage.ListOptions) (storage.ListResult, error) {
	defer s.observe(storage.OpList, s.clock.Now())
	start, err := opts.Start(prefix)
	if err != nil {
		return storage.ListResult{}, err
	}
	key, end := prefixRange(start, prefix)
	resp, err := s.kv.Get(ctx, key,
		clientv3.WithRange(end),
		clientv3.WithLimit(opts.Limit),
		clientv3.WithRev(opts.Revision),
	)
	if err != nil {
		return storage.ListResult{}, wrapError("list", prefix, err)
	}
	items := make([]storage.KeyValue, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		items[i] = toKeyValue(kv)
	}
	rev := opts.Revision
	if rev == 0 {
		rev = resp.Header.Revision
	}
	// Count is the number of keys in [start, end) regardless of the limit.
	return storage.ListResult{
		Items:     items,
		Revision:  rev,
		More:      resp.More,
		Remaining: resp.Count - int64(len(resp.Kvs)),
	}, nil
}

// Count returns the number of keys under prefix without reading their values.
func (s *Store) Count(ctx context.Context, prefix string) (int64, error) {
	defer s.observe(storage.OpCount, s.clock.Now())
	key, end := prefixRange(prefix, prefix)
	resp, err := s.kv.Get(ctx, key, clientv3.WithRange(end), clientv3.WithCountOnly())
	if err != nil {
		return 0, wrapError("count", prefix, err)
	}
	return resp.Count, nil
}

// CurrentRevision returns the store's latest revision with a linearizable,
// count-only read of one key.
func (s *Store) CurrentRevision(ctx context.Context) (int64, error) {
	defer s.observe(storage.OpCurrentRevision, s.clock.Now())
	resp, err := s.kv.Get(ctx, revisionProbeKey, clientv3.WithCountOnly())
	if err != nil {
		return 0, annotate("read current revision", err)
	}
	return resp.Header.Revision, nil
}

// Compact discards the history before revision. It returns once etcd has
// applied the compaction (reads and watches below revision then fail with
// ErrCompacted); freeing the space happens in the background.
func (s *Store) Compact(ctx context.Context, revision int64) error {
	defer s.observe(storage.OpCompact, s.clock.Now())
	if _, err := s.kv.Compact(ctx, revision); err != nil {
		return annotate(fmt.Sprintf("compact to revision %d", revision), err)
	}
	return nil
}

// Close closes the etcd client. It does not stop an embedded member; see
// Embedded.Close.
func (s *Store) Close() error {
	// An in-process client reports its own cancelled context on Close.
	if err := s.client.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("close etcd client: %w", err)
	}
	return nil
}

// prefixRange returns the etcd range [key, end) that starts at start and
// covers every key with the given prefix.
func prefixRange(start, prefix string) (key, end string) {
	end = clientv3.GetPrefixRangeEnd(prefix)
	if start == "" {
		// etcd rejects the empty key; "\x00" is the smallest valid one.
		start = "\x00"
	}
	return start, end
}

func toKeyValue(kv *mvccpb.KeyValue) storage.KeyValue {
	return storage.KeyValue{
		Key:            string(kv.Key),
		Value:          kv.Value,
		ModRevision:    kv.ModRevision,
		CreateRevision: kv.CreateRevision,
	}
}
