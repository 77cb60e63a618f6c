package nodeipam

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	netutils "k8s.io/utils/net"
)

// ControllerName is the upstream kube-controller-manager name.
const ControllerName = "node-ipam-controller"

// RangeAllocator is the one --cidr-allocator-type nodeplane implements.
const RangeAllocator = "RangeAllocator"

// Upstream defaults of the node mask sizes.
const (
	DefaultNodeMaskIPv4 = 24
	DefaultNodeMaskIPv6 = 64
)

// Options are the raw flags, with kube-controller-manager's names:
// --allocate-node-cidrs, --cidr-allocator-type, --cluster-cidr,
// --service-cluster-ip-range, --node-cidr-mask-size(-ipv4|-ipv6). A mask
// size of 0 means "not set".
type Options struct {
	AllocateNodeCIDRs     bool
	CIDRAllocatorType     string
	ClusterCIDR           string
	ServiceClusterIPRange string
	NodeCIDRMaskSize      int
	NodeCIDRMaskSizeIPv4  int
	NodeCIDRMaskSizeIPv6  int
}

// DefaultOptions are the upstream defaults (allocation off).
func DefaultOptions() Options { return Options{CIDRAllocatorType: RangeAllocator} }

// Config is the allocator's validated configuration.
type Config struct {
	// ClusterCIDRs are one range, or an IPv4 and an IPv6 range (dual
	// stack); a node's spec.podCIDRs[i] comes from ClusterCIDRs[i].
	ClusterCIDRs []netip.Prefix
	// NodeMaskSizes[i] is the prefix length of the blocks cut from
	// ClusterCIDRs[i]; it is at least ClusterCIDRs[i].Bits().
	NodeMaskSizes []int
	// ServiceCIDRs are never handed to nodes where they overlap a
	// cluster CIDR (at most two).
	ServiceCIDRs []netip.Prefix
}

// Validate checks the options that upstream checks whether or not
// allocation is on.
func (o Options) Validate() []error {
	if strings.Count(o.ServiceClusterIPRange, ",") > 1 {
		return []error{errors.New("--service-cluster-ip-range can not contain more than two entries")}
	}
	return nil
}

// Parse validates the options of an enabled allocator into a Config. Every
// error names the flag and carries upstream's text.
func (o Options) Parse() (Config, error) {
	if errs := o.Validate(); len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	if o.CIDRAllocatorType != RangeAllocator {
		return Config{}, fmt.Errorf("--cidr-allocator-type: invalid CIDR allocator type: %v (nodeplane implements %s)", o.CIDRAllocatorType, RangeAllocator)
	}
	if strings.TrimSpace(o.ClusterCIDR) == "" {
		return Config{}, errors.New("--cluster-cidr must be set when --allocate-node-cidrs is true")
	}
	clusterNets, err := netutils.ParseCIDRs(strings.Split(strings.TrimSpace(o.ClusterCIDR), ","))
	if err != nil {
		return Config{}, fmt.Errorf("--cluster-cidr: %w", err)
	}
	dualStack, _ := netutils.IsDualStackCIDRs(clusterNets)
	if len(clusterNets) > 1 && !dualStack {
		return Config{}, fmt.Errorf("--cluster-cidr: len of ClusterCIDRs==%v and they are not configured as dual stack (at least one from each IPFamily", len(clusterNets))
	}
	if len(clusterNets) > 2 {
		return Config{}, fmt.Errorf("--cluster-cidr: length of clusterCIDRs is:%v more than max allowed of 2", len(clusterNets))
	}
	var cfg Config
	for _, n := range clusterNets {
		cfg.ClusterCIDRs = append(cfg.ClusterCIDRs, toPrefix(n))
	}
	if cfg.ServiceCIDRs, err = o.serviceCIDRs(); err != nil {
		return Config{}, err
	}
	if cfg.NodeMaskSizes, err = o.nodeMaskSizes(cfg.ClusterCIDRs); err != nil {
		return Config{}, err
	}
	for i, c := range cfg.ClusterCIDRs {
		if err := checkMask(c, cfg.NodeMaskSizes[i]); err != nil {
			return Config{}, fmt.Errorf("%s: %w", o.maskFlag(c, len(cfg.ClusterCIDRs) > 1), err)
		}
	}
	return cfg, nil
}

// serviceCIDRs parses --service-cluster-ip-range: a primary and an optional
// secondary range of the other family. Upstream only logs an unparsable
// range and goes on without it; nodeplane refuses it, since carving out
// nothing would hand service addresses to pods.
func (o Options) serviceCIDRs() ([]netip.Prefix, error) {
	if strings.TrimSpace(o.ServiceClusterIPRange) == "" {
		return nil, nil
	}
	var out []netip.Prefix
	var nets []*net.IPNet
	for _, s := range strings.Split(o.ServiceClusterIPRange, ",") {
		if strings.TrimSpace(s) == "" {
			continue
		}
		_, n, err := netutils.ParseCIDRSloppy(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("--service-cluster-ip-range: unsuccessful parsing of service CIDR %q: %w", s, err)
		}
		nets = append(nets, n)
		out = append(out, toPrefix(n))
	}
	if len(nets) == 2 {
		dual, err := netutils.IsDualStackCIDRs(nets)
		if err != nil {
			return nil, fmt.Errorf("--service-cluster-ip-range: failed to perform dualstack check on serviceCIDR and secondaryServiceCIDR error:%v", err)
		}
		if !dual {
			return nil, errors.New("--service-cluster-ip-range: serviceCIDR and secondaryServiceCIDR are not dualstack (from different IPfamiles)")
		}
	}
	return out, nil
}

// nodeMaskSizes is upstream's setNodeCIDRMaskSizes: the mask of each
// cluster CIDR's blocks, by family.
func (o Options) nodeMaskSizes(clusters []netip.Prefix) ([]int, error) {
	sized := func(v4, v6 int) []int {
		out := make([]int, len(clusters))
		for i, c := range clusters {
			out[i] = v4
			if c.Addr().Is6() {
				out[i] = v6
			}
		}
		return out
	}
	v4, v6 := DefaultNodeMaskIPv4, DefaultNodeMaskIPv6
	if len(clusters) > 1 {
		if o.NodeCIDRMaskSize != 0 {
			return nil, errors.New("usage of --node-cidr-mask-size is not allowed with dual-stack clusters")
		}
		if o.NodeCIDRMaskSizeIPv4 != 0 {
			v4 = o.NodeCIDRMaskSizeIPv4
		}
		if o.NodeCIDRMaskSizeIPv6 != 0 {
			v6 = o.NodeCIDRMaskSizeIPv6
		}
		return sized(v4, v6), nil
	}
	singleV6 := clusters[0].Addr().Is6()
	if o.NodeCIDRMaskSize != 0 {
		if o.NodeCIDRMaskSizeIPv4 != 0 || o.NodeCIDRMaskSizeIPv6 != 0 {
			return nil, errors.New("usage of --node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6 is not allowed if --node-cidr-mask-size is set. For dual-stack clusters please unset it and use IPFamily specific flags")
		}
		return sized(o.NodeCIDRMaskSize, o.NodeCIDRMaskSize), nil
	}
	if o.NodeCIDRMaskSizeIPv4 != 0 {
		if singleV6 {
			return nil, errors.New("usage of --node-cidr-mask-size-ipv4 is not allowed for a single-stack IPv6 cluster")
		}
		v4 = o.NodeCIDRMaskSizeIPv4
	}
	if o.NodeCIDRMaskSizeIPv6 != 0 {
		if !singleV6 {
			return nil, errors.New("usage of --node-cidr-mask-size-ipv6 is not allowed for a single-stack IPv4 cluster")
		}
		v6 = o.NodeCIDRMaskSizeIPv6
	}
	return sized(v4, v6), nil
}

// maskFlag names the flag that set the mask of cluster c.
func (o Options) maskFlag(c netip.Prefix, dual bool) string {
	switch {
	case !dual && o.NodeCIDRMaskSize != 0:
		return "--node-cidr-mask-size"
	case c.Addr().Is6():
		return "--node-cidr-mask-size-ipv6"
	default:
		return "--node-cidr-mask-size-ipv4"
	}
}

// checkMask: the node mask lies between the cluster mask and the address
// length, and an IPv6 cluster is cut into at most 2^16 blocks (upstream's
// clusterSubnetMaxDiff).
func checkMask(cluster netip.Prefix, mask int) error {
	if mask < cluster.Bits() || mask > cluster.Addr().BitLen() {
		return fmt.Errorf("node CIDR mask /%d must be between the cluster CIDR %s's mask and /%d", mask, cluster, cluster.Addr().BitLen())
	}
	if cluster.Addr().Is6() && mask-cluster.Bits() > clusterSubnetMaxDiff {
		return fmt.Errorf("%w (/%d from %s: more than %d bits)", ErrSubNetTooBig, mask, cluster, clusterSubnetMaxDiff)
	}
	return nil
}

// toPrefix converts a parsed network to a masked netip.Prefix (IPv4 as a
// 4-byte address).
func toPrefix(n *net.IPNet) netip.Prefix {
	addr, _ := netip.AddrFromSlice(n.IP)
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(addr.Unmap(), ones).Masked()
}
