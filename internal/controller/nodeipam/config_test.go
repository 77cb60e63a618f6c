package nodeipam

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestParseOptions(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      Options
		wantMasks []int
		wantErr   string
	}{
		{name: "an IPv4 cluster gets /24 blocks by default", opts: Options{ClusterCIDR: "10.244.0.0/16"}, wantMasks: []int{24}},
		{name: "an IPv6 cluster gets /64 blocks by default", opts: Options{ClusterCIDR: "fd00::/48"}, wantMasks: []int{64}},
		{name: "a dual-stack pair gets both defaults", opts: Options{ClusterCIDR: "10.244.0.0/16,fd00::/48"}, wantMasks: []int{24, 64}},
		{name: "--node-cidr-mask-size sets a single-stack mask", opts: Options{ClusterCIDR: "10.244.0.0/16", NodeCIDRMaskSize: 26}, wantMasks: []int{26}},
		{name: "--node-cidr-mask-size-ipv4 sets a single-stack IPv4 mask", opts: Options{ClusterCIDR: "10.244.0.0/16", NodeCIDRMaskSizeIPv4: 25}, wantMasks: []int{25}},
		{name: "the family masks set a dual-stack pair", opts: Options{ClusterCIDR: "fd00::/48,10.0.0.0/8", NodeCIDRMaskSizeIPv4: 20, NodeCIDRMaskSizeIPv6: 60}, wantMasks: []int{60, 20}},
		{name: "--cluster-cidr is required", opts: Options{}, wantErr: "--cluster-cidr must be set when --allocate-node-cidrs is true"},
		{name: "a malformed --cluster-cidr is named", opts: Options{ClusterCIDR: "10.244.0.0/33"}, wantErr: "--cluster-cidr: invalid CIDR[0]"},
		{name: "two IPv4 cluster CIDRs are not dual stack", opts: Options{ClusterCIDR: "10.0.0.0/16,10.1.0.0/16"},
			wantErr: "--cluster-cidr: len of ClusterCIDRs==2 and they are not configured as dual stack (at least one from each IPFamily"},
		{name: "three cluster CIDRs are too many", opts: Options{ClusterCIDR: "10.0.0.0/16,fd00::/48,10.1.0.0/16"},
			wantErr: "--cluster-cidr: length of clusterCIDRs is:3 more than max allowed of 2"},
		{name: "--node-cidr-mask-size is refused with dual stack", opts: Options{ClusterCIDR: "10.244.0.0/16,fd00::/48", NodeCIDRMaskSize: 24},
			wantErr: "usage of --node-cidr-mask-size is not allowed with dual-stack clusters"},
		{name: "--node-cidr-mask-size and a family mask are refused together", opts: Options{ClusterCIDR: "10.244.0.0/16", NodeCIDRMaskSize: 24, NodeCIDRMaskSizeIPv4: 24},
			wantErr: "usage of --node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6 is not allowed if --node-cidr-mask-size is set"},
		{name: "an IPv4 mask for an IPv6 cluster is refused", opts: Options{ClusterCIDR: "fd00::/48", NodeCIDRMaskSizeIPv4: 24},
			wantErr: "usage of --node-cidr-mask-size-ipv4 is not allowed for a single-stack IPv6 cluster"},
		{name: "an IPv6 mask for an IPv4 cluster is refused", opts: Options{ClusterCIDR: "10.0.0.0/8", NodeCIDRMaskSizeIPv6: 64},
			wantErr: "usage of --node-cidr-mask-size-ipv6 is not allowed for a single-stack IPv4 cluster"},
		{name: "a node mask larger than the cluster range is refused", opts: Options{ClusterCIDR: "10.244.0.0/16", NodeCIDRMaskSize: 8},
			wantErr: "--node-cidr-mask-size: node CIDR mask /8 must be between the cluster CIDR 10.244.0.0/16's mask and /32"},
		{name: "an IPv6 cluster cut by more than 16 bits is refused", opts: Options{ClusterCIDR: "10.0.0.0/8,fd00::/32"},
			wantErr: "--node-cidr-mask-size-ipv6: New CIDR set failed; the node CIDR size is too big"},
		{name: "an unknown allocator type is refused", opts: Options{ClusterCIDR: "10.0.0.0/8", CIDRAllocatorType: "CloudAllocator"},
			wantErr: "--cidr-allocator-type: invalid CIDR allocator type: CloudAllocator"},
		{name: "three service ranges are refused", opts: Options{ClusterCIDR: "10.0.0.0/8", ServiceClusterIPRange: "10.96.0.0/12,fd01::/108,10.97.0.0/16"},
			wantErr: "--service-cluster-ip-range can not contain more than two entries"},
		{name: "a malformed service range is named", opts: Options{ClusterCIDR: "10.0.0.0/8", ServiceClusterIPRange: "10.96.0.0/99"},
			wantErr: "--service-cluster-ip-range: unsuccessful parsing of service CIDR"},
		{name: "two IPv4 service ranges are refused", opts: Options{ClusterCIDR: "10.0.0.0/8", ServiceClusterIPRange: "10.96.0.0/12,10.112.0.0/12"},
			wantErr: "--service-cluster-ip-range: serviceCIDR and secondaryServiceCIDR are not dualstack (from different IPfamiles)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			o.AllocateNodeCIDRs = true
			if o.CIDRAllocatorType == "" {
				o.CIDRAllocatorType = RangeAllocator
			}
			cfg, err := o.Parse()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse() error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(): %v", err)
			}
			if !slices.Equal(cfg.NodeMaskSizes, tc.wantMasks) {
				t.Fatalf("NodeMaskSizes = %v, want %v", cfg.NodeMaskSizes, tc.wantMasks)
			}
		})
	}
}

func TestParseMasksSloppyCIDRs(t *testing.T) {
	cfg, err := Options{ClusterCIDR: "10.244.7.9/16", CIDRAllocatorType: RangeAllocator}.Parse()
	if err != nil {
		t.Fatal(err)
	}
	if want := netip.MustParsePrefix("10.244.0.0/16"); cfg.ClusterCIDRs[0] != want {
		t.Fatalf("ClusterCIDRs[0] = %s, want %s", cfg.ClusterCIDRs[0], want)
	}
}
