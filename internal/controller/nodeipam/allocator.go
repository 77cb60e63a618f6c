package nodeipam

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"

	netutils "k8s.io/utils/net"
)

// Allocator holds one cidrSet per cluster CIDR (index i ↔ spec.podCIDRs[i]).
// It is safe for concurrent use; a reservation across families is atomic.
type Allocator struct {
	mu   sync.Mutex
	sets []*cidrSet
}

// NewAllocator builds the sets for cfg and marks the service ranges that
// overlap a cluster CIDR as used. m may be nil.
func NewAllocator(cfg Config, m *Metrics) (*Allocator, error) {
	if len(cfg.ClusterCIDRs) == 0 || len(cfg.ClusterCIDRs) != len(cfg.NodeMaskSizes) {
		return nil, errors.New("node IPAM: one node mask size per cluster CIDR is required")
	}
	a := &Allocator{}
	for i, c := range cfg.ClusterCIDRs {
		s, err := newCIDRSet(c, cfg.NodeMaskSizes[i], m)
		if err != nil {
			return nil, err
		}
		a.sets = append(a.sets, s)
	}
	for _, svc := range cfg.ServiceCIDRs {
		for _, s := range a.sets {
			if s.cluster.Overlaps(svc) {
				if err := s.occupy(svc); err != nil {
					return nil, fmt.Errorf("filter out service cidr %s: %w", svc, err)
				}
			}
		}
	}
	return a, nil
}

// Occupy marks a node's existing podCIDRs as used (idempotent). The errors
// are upstream's: unparsable, more CIDRs than cluster CIDRs, or outside the
// cluster CIDR of its index.
func (a *Allocator) Occupy(node string, cidrs []string) error {
	prefixes := make([]netip.Prefix, len(cidrs))
	for i, c := range cidrs {
		_, n, err := netutils.ParseCIDRSloppy(c)
		if err != nil {
			return fmt.Errorf("failed to parse node %s, CIDR %s", node, c)
		}
		if i >= len(a.sets) {
			return fmt.Errorf("node:%s has an allocated cidr: %v at index:%v that does not exist in cluster cidrs configuration", node, c, i)
		}
		prefixes[i] = toPrefix(n)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, p := range prefixes {
		if err := a.sets[i].occupy(p); err != nil {
			return fmt.Errorf("failed to mark cidr[%v] at idx [%v] as occupied for node: %v: %v", p, i, node, err)
		}
	}
	return nil
}

// Reserve takes the next free block of every cluster CIDR. When one family
// has none left it gives back what it took from the others and returns an
// error wrapping ErrNoCIDRs.
func (a *Allocator) Reserve() ([]string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]netip.Prefix, 0, len(a.sets))
	for i, s := range a.sets {
		p, err := s.allocateNext()
		if err != nil {
			for j, taken := range out {
				_ = a.sets[j].release(taken) // a block this call took: always in range
			}
			return nil, fmt.Errorf("failed to allocate cidr from cluster cidr at idx:%v: %w", i, err)
		}
		out = append(out, p)
	}
	strs := make([]string, len(out))
	for i, p := range out {
		strs[i] = p.String()
	}
	return strs, nil
}

// Release frees a node's podCIDRs. CIDRs beyond the configured families or
// outside their cluster CIDR are reported; the others are still freed.
func (a *Allocator) Release(cidrs []string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for i, c := range cidrs {
		_, n, err := netutils.ParseCIDRSloppy(c)
		if err != nil {
			errs = append(errs, fmt.Errorf("failed to parse CIDR %s: %w", c, err))
			continue
		}
		if i >= len(a.sets) {
			errs = append(errs, fmt.Errorf("cidr %s at index %d has no cluster cidr", c, i))
			continue
		}
		if err := a.sets[i].release(toPrefix(n)); err != nil {
			errs = append(errs, fmt.Errorf("release cidr %s: %w", c, err))
		}
	}
	return errors.Join(errs...)
}

// SetStats describes one cluster CIDR's use.
type SetStats struct {
	ClusterCIDR string
	Max         int
	Allocated   int
}

// Stats returns every cluster CIDR's use, in configuration order.
func (a *Allocator) Stats() []SetStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]SetStats, len(a.sets))
	for i, s := range a.sets {
		out[i] = SetStats{ClusterCIDR: s.label, Max: s.max, Allocated: s.allocated}
	}
	return out
}
