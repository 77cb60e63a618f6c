package etcd

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/utils/clock"
)

// KeyTTL gives the keys under Prefix a time to live: each write of such a
// key attaches an etcd lease, so etcd itself deletes the key TTL after its
// last write (kube-apiserver's --event-ttl does the same for events). The
// deletion is an ordinary delete: watchers see it, and it happens exactly
// once whichever of several API servers wrote the key.
type KeyTTL struct {
	Prefix string
	TTL    time.Duration
}

// leases hands out etcd leases for keys with a TTL. Granting a lease per
// write would double the cost of each write, so a lease is shared by the
// writes of a short window: a lease granted at g lives TTL+window, and
// serves writes until g+window, so a key written at t is deleted between
// t+TTL and t+TTL+window. window is a tenth of the TTL, at most a minute.
type leases struct {
	lease clientv3.Lease
	clock clock.PassiveClock
	ttls  []KeyTTL

	mu      sync.Mutex
	current map[time.Duration]grantedLease
}

type grantedLease struct {
	id      clientv3.LeaseID
	granted time.Time
}

func newLeases(lease clientv3.Lease, clk clock.PassiveClock, ttls []KeyTTL) (*leases, error) {
	for _, t := range ttls {
		if t.Prefix == "" || t.TTL < time.Second {
			return nil, fmt.Errorf("etcd store: key TTL %q %v: the prefix must be set and the TTL at least a second", t.Prefix, t.TTL)
		}
	}
	return &leases{lease: lease, clock: clk, ttls: ttls, current: map[time.Duration]grantedLease{}}, nil
}

// leaseWindow is how long one lease serves new writes for keys with ttl.
func leaseWindow(ttl time.Duration) time.Duration {
	return min(ttl/10, time.Minute)
}

// ttl returns the time to live of key (0: none).
func (l *leases) ttl(key string) time.Duration {
	for _, t := range l.ttls {
		if strings.HasPrefix(key, t.Prefix) {
			return t.TTL
		}
	}
	return 0
}

// forKey returns the lease to attach to a write of key (0: none).
func (l *leases) forKey(ctx context.Context, key string) (int64, error) {
	if l == nil {
		return 0, nil
	}
	ttl := l.ttl(key)
	if ttl == 0 {
		return 0, nil
	}
	window := leaseWindow(ttl)
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.current[ttl]; ok && now.Sub(cur.granted) < window {
		return int64(cur.id), nil
	}
	seconds := int64((ttl + window + time.Second - 1) / time.Second)
	resp, err := l.lease.Grant(ctx, seconds)
	if err != nil {
		return 0, fmt.Errorf("grant a %ds lease for %q: %w", seconds, key, err)
	}
	l.current[ttl] = grantedLease{id: resp.ID, granted: now}
	return int64(resp.ID), nil
}

// drop forgets lease after etcd no longer knew it (revoked, or lost in a
// restore from backup), so the next write grants a new one.
func (l *leases) drop(lease int64) {
	if l == nil || lease == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for ttl, cur := range l.current {
		if int64(cur.id) == lease {
			delete(l.current, ttl)
		}
	}
}

// leaseLost reports an error saying a write's lease no longer exists.
func leaseLost(err error) bool {
	return err != nil && strings.Contains(err.Error(), rpctypes.ErrLeaseNotFound.Error())
}
