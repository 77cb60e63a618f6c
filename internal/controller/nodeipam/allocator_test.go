package nodeipam

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// mustConfig parses options that are known to be good.
func mustConfig(t testing.TB, o Options) Config {
	t.Helper()
	o.AllocateNodeCIDRs = true
	if o.CIDRAllocatorType == "" {
		o.CIDRAllocatorType = RangeAllocator
	}
	cfg, err := o.Parse()
	if err != nil {
		t.Fatalf("Parse(%+v): %v", o, err)
	}
	return cfg
}

func mustAllocator(t testing.TB, o Options) *Allocator {
	t.Helper()
	a, err := NewAllocator(mustConfig(t, o), nil)
	if err != nil {
		t.Fatalf("NewAllocator: %v", err)
	}
	return a
}

// op is one step of an allocator scenario.
type op struct {
	reserve []string // expect Reserve to return these
	full    bool     // expect Reserve to fail with ErrNoCIDRs
	occupy  []string // Occupy these (node "n")
	release []string // Release these
}

func TestAllocatorScenarios(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		ops  []op
	}{
		{
			name: "blocks of a single IPv4 cluster CIDR are handed out in order",
			opts: Options{ClusterCIDR: "10.244.0.0/16"},
			ops:  []op{{reserve: []string{"10.244.0.0/24"}}, {reserve: []string{"10.244.1.0/24"}}, {reserve: []string{"10.244.2.0/24"}}},
		},
		{
			name: "a dual-stack pair gives one block of each family, IPv4 /24 and IPv6 /64 by default",
			opts: Options{ClusterCIDR: "10.244.0.0/16,fd00::/48"},
			ops: []op{
				{reserve: []string{"10.244.0.0/24", "fd00::/64"}},
				{reserve: []string{"10.244.1.0/24", "fd00:0:0:1::/64"}},
			},
		},
		{
			name: "the family order of --cluster-cidr is the order of podCIDRs",
			opts: Options{ClusterCIDR: "fd00::/48,10.244.0.0/16", NodeCIDRMaskSizeIPv6: 56, NodeCIDRMaskSizeIPv4: 26},
			ops:  []op{{reserve: []string{"fd00::/56", "10.244.0.0/26"}}, {reserve: []string{"fd00:0:0:100::/56", "10.244.0.64/26"}}},
		},
		{
			name: "an exhausted cluster CIDR refuses, and a released block is handed out again",
			opts: Options{ClusterCIDR: "10.0.0.0/23", NodeCIDRMaskSize: 24},
			ops: []op{
				{reserve: []string{"10.0.0.0/24"}}, {reserve: []string{"10.0.1.0/24"}}, {full: true},
				{release: []string{"10.0.0.0/24"}}, {reserve: []string{"10.0.0.0/24"}}, {full: true},
			},
		},
		{
			name: "a freed block is reused only after the search wraps around",
			opts: Options{ClusterCIDR: "10.0.0.0/22", NodeCIDRMaskSize: 24},
			ops: []op{
				{reserve: []string{"10.0.0.0/24"}}, {reserve: []string{"10.0.1.0/24"}},
				{release: []string{"10.0.0.0/24"}},
				{reserve: []string{"10.0.2.0/24"}}, {reserve: []string{"10.0.3.0/24"}},
				{reserve: []string{"10.0.0.0/24"}}, {full: true},
			},
		},
		{
			name: "the search skips used blocks and wraps past the end",
			opts: Options{ClusterCIDR: "10.0.0.0/22", NodeCIDRMaskSize: 24},
			ops: []op{
				{occupy: []string{"10.0.1.0/24"}}, {occupy: []string{"10.0.3.0/24"}},
				{reserve: []string{"10.0.0.0/24"}}, {reserve: []string{"10.0.2.0/24"}}, {full: true},
				{release: []string{"10.0.1.0/24"}}, {reserve: []string{"10.0.1.0/24"}},
			},
		},
		{
			name: "the service range is carved out of the cluster CIDR",
			opts: Options{ClusterCIDR: "10.0.0.0/16", NodeCIDRMaskSize: 18, ServiceClusterIPRange: "10.0.64.0/18"},
			ops: []op{
				{reserve: []string{"10.0.0.0/18"}}, {reserve: []string{"10.0.128.0/18"}}, {reserve: []string{"10.0.192.0/18"}}, {full: true},
			},
		},
		{
			name: "a service range smaller than a block still takes the whole block",
			opts: Options{ClusterCIDR: "10.0.0.0/23", NodeCIDRMaskSize: 24, ServiceClusterIPRange: "10.0.0.16/28"},
			ops:  []op{{reserve: []string{"10.0.1.0/24"}}, {full: true}},
		},
		{
			name: "a service range holding the whole cluster CIDR leaves nothing",
			opts: Options{ClusterCIDR: "10.96.0.0/16", ServiceClusterIPRange: "10.96.0.0/12"},
			ops:  []op{{full: true}},
		},
		{
			name: "a dual-stack service range is carved out of each family",
			opts: Options{ClusterCIDR: "10.0.0.0/23,fd00::/63", ServiceClusterIPRange: "10.0.0.0/24,fd00::/64"},
			ops:  []op{{reserve: []string{"10.0.1.0/24", "fd00:0:0:1::/64"}}, {full: true}},
		},
		{
			name: "a service range outside the cluster CIDR takes nothing",
			opts: Options{ClusterCIDR: "10.244.0.0/23", NodeCIDRMaskSize: 24, ServiceClusterIPRange: "10.96.0.0/12"},
			ops:  []op{{reserve: []string{"10.244.0.0/24"}}, {reserve: []string{"10.244.1.0/24"}}, {full: true}},
		},
		{
			name: "occupying the same block twice counts it once",
			opts: Options{ClusterCIDR: "10.0.0.0/23", NodeCIDRMaskSize: 24},
			ops: []op{
				{occupy: []string{"10.0.0.0/24"}}, {occupy: []string{"10.0.0.0/24"}},
				{release: []string{"10.0.0.0/24"}},
				{reserve: []string{"10.0.0.0/24"}}, {reserve: []string{"10.0.1.0/24"}}, {full: true},
			},
		},
		{
			name: "an IPv6 cluster cut into 2^16 blocks hands out the last one",
			opts: Options{ClusterCIDR: "fd00::/48"},
			ops:  []op{{occupy: []string{"fd00::/49"}}, {occupy: []string{"fd00:0:0:8000::/50"}}, {occupy: []string{"fd00:0:0:c000::/51"}}, {occupy: []string{"fd00:0:0:e000::/52"}}, {occupy: []string{"fd00:0:0:f000::/53"}}, {occupy: []string{"fd00:0:0:f800::/54"}}, {occupy: []string{"fd00:0:0:fc00::/55"}}, {occupy: []string{"fd00:0:0:fe00::/56"}}, {occupy: []string{"fd00:0:0:ff00::/57"}}, {occupy: []string{"fd00:0:0:ff80::/58"}}, {occupy: []string{"fd00:0:0:ffc0::/59"}}, {occupy: []string{"fd00:0:0:ffe0::/60"}}, {occupy: []string{"fd00:0:0:fff0::/61"}}, {occupy: []string{"fd00:0:0:fff8::/62"}}, {occupy: []string{"fd00:0:0:fffc::/63"}}, {occupy: []string{"fd00:0:0:fffe::/64"}}, {reserve: []string{"fd00:0:0:ffff::/64"}}, {full: true}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := mustAllocator(t, tc.opts)
			for i, o := range tc.ops {
				switch {
				case o.reserve != nil:
					got, err := a.Reserve()
					if err != nil || !slices.Equal(got, o.reserve) {
						t.Fatalf("step %d: Reserve() = %v, %v; want %v", i, got, err, o.reserve)
					}
				case o.full:
					got, err := a.Reserve()
					if !errors.Is(err, ErrNoCIDRs) {
						t.Fatalf("step %d: Reserve() = %v, %v; want ErrNoCIDRs", i, got, err)
					}
				case o.occupy != nil:
					if err := a.Occupy("n", o.occupy); err != nil {
						t.Fatalf("step %d: Occupy(%v): %v", i, o.occupy, err)
					}
				case o.release != nil:
					if err := a.Release(o.release); err != nil {
						t.Fatalf("step %d: Release(%v): %v", i, o.release, err)
					}
				}
			}
		})
	}
}

// TestExhaustedFamilyGivesBackTheOther: a dual-stack reservation is all or
// nothing.
func TestExhaustedFamilyGivesBackTheOther(t *testing.T) {
	a := mustAllocator(t, Options{ClusterCIDR: "10.0.0.0/16,fd00::/64"})
	if _, err := a.Reserve(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if got, err := a.Reserve(); !errors.Is(err, ErrNoCIDRs) || !strings.Contains(err.Error(), "at idx:1") {
			t.Fatalf("Reserve() with the IPv6 range used up = %v, %v; want ErrNoCIDRs at idx:1", got, err)
		}
	}
	if got := a.Stats(); got[0].Allocated != 1 || got[1].Allocated != 1 {
		t.Fatalf("Stats() = %+v; want one block of each family in use (the IPv4 blocks of the failed calls given back)", got)
	}
}

// TestRestartWithExistingNodes: a new allocator that occupies the ranges
// the nodes hold hands out only free blocks, lowest first (nextCandidate
// starts again at 0).
func TestRestartWithExistingNodes(t *testing.T) {
	opts := Options{ClusterCIDR: "10.244.0.0/16,fd00::/48"}
	first := mustAllocator(t, opts)
	held := map[string][]string{}
	for _, n := range []string{"a", "b", "c", "d"} {
		cidrs, err := first.Reserve()
		if err != nil {
			t.Fatal(err)
		}
		held[n] = cidrs
	}
	if err := first.Release(held["b"]); err != nil {
		t.Fatal(err)
	}
	delete(held, "b")

	restarted := mustAllocator(t, opts)
	for n, cidrs := range held {
		if err := restarted.Occupy(n, cidrs); err != nil {
			t.Fatalf("Occupy(%s, %v): %v", n, cidrs, err)
		}
	}
	for _, want := range [][]string{{"10.244.1.0/24", "fd00:0:0:1::/64"}, {"10.244.4.0/24", "fd00:0:0:4::/64"}} {
		got, err := restarted.Reserve()
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("Reserve() after restart = %v, %v; want %v", got, err, want)
		}
	}
	if got := restarted.Stats(); got[0].Allocated != 5 || got[1].Allocated != 5 || got[0].Max != 256 || got[1].Max != 65536 {
		t.Errorf("Stats() = %+v, want 5 of 256 and 5 of 65536", got)
	}
}

// TestOccupyRefusesWhatDoesNotFit: the rebuild errors of IPAM-3, with
// upstream's texts.
func TestOccupyRefusesWhatDoesNotFit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  Options
		cidrs []string
		want  string
	}{
		{"an unparsable podCIDR", Options{ClusterCIDR: "10.244.0.0/16"}, []string{"banana"}, "failed to parse node n, CIDR banana"},
		{"a podCIDR outside the cluster CIDR", Options{ClusterCIDR: "10.244.0.0/16"}, []string{"192.168.0.0/24"},
			"failed to mark cidr[192.168.0.0/24] at idx [0] as occupied for node: n: cidr 192.168.0.0/24 is out the range of cluster cidr 10.244.0.0/16"},
		{"an IPv6 podCIDR against an IPv4 cluster CIDR", Options{ClusterCIDR: "10.244.0.0/16"}, []string{"fd00::/64"}, "is out the range of cluster cidr 10.244.0.0/16"},
		{"more podCIDRs than cluster CIDRs", Options{ClusterCIDR: "10.244.0.0/16"}, []string{"10.244.0.0/24", "fd00::/64"},
			"node:n has an allocated cidr: fd00::/64 at index:1 that does not exist in cluster cidrs configuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := mustAllocator(t, tc.opts).Occupy("n", tc.cidrs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Occupy(%v) = %v, want an error containing %q", tc.cidrs, err, tc.want)
			}
		})
	}
}

func TestBlockArithmetic(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cluster  string
		mask     int
		index    int
		want     string
		wantBack int
	}{
		{"the first IPv4 block is the cluster's own address", "10.0.0.0/8", 24, 0, "10.0.0.0/24", 0},
		{"IPv4 block 257 crosses an octet", "10.0.0.0/8", 24, 257, "10.1.1.0/24", 257},
		{"an IPv4 /32 block", "10.0.0.0/16", 32, 65535, "10.0.255.255/32", 65535},
		{"an IPv6 /64 block sits in the high half", "fd00::/48", 64, 65535, "fd00:0:0:ffff::/64", 65535},
		{"an IPv6 block straddling the two halves", "fd00::/56", 72, 511, "fd00:0:0:1:ff00::/72", 511},
		{"an IPv6 block in the low half", "fd00::/112", 120, 255, "fd00::ff00/120", 255},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := newCIDRSet(netip.MustParsePrefix(tc.cluster), tc.mask, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := s.block(tc.index)
			if got.String() != tc.want {
				t.Fatalf("block(%d) = %s, want %s", tc.index, got, tc.want)
			}
			if back := s.index(got.Addr()); back != tc.wantBack {
				t.Fatalf("index(%s) = %d, want %d", got.Addr(), back, tc.wantBack)
			}
		})
	}
}
