package nodeipam

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// clusterSubnetMaxDiff bounds how many bits an IPv6 cluster CIDR may be cut
// by (upstream: the bitmap is uncompressed).
const clusterSubnetMaxDiff = 16

var (
	// ErrNoCIDRs: every block of a cluster CIDR is in use (upstream text).
	ErrNoCIDRs = errors.New("CIDR allocation failed; there are no remaining CIDRs left to allocate in the accepted range")
	// ErrSubNetTooBig: an IPv6 cluster CIDR cut into more than 2^16
	// blocks (upstream text).
	ErrSubNetTooBig = errors.New("New CIDR set failed; the node CIDR size is too big")
)

// cidrSet hands out the node-sized blocks of one cluster CIDR. Block i is
// the i-th /nodeBits subnet of the cluster CIDR. Not safe for concurrent
// use: the Allocator serializes.
type cidrSet struct {
	cluster  netip.Prefix
	nodeBits int
	// shift is the number of host bits of a block.
	shift int
	max   int
	// allocated counts set bits of used.
	allocated int
	// next is where the search for a free block starts; after block i is
	// allocated it is i+1, so freed blocks are reused only after the
	// search wraps around.
	next int
	// used is a bitmap of blocks, grown as higher blocks are used.
	used    []uint64
	label   string
	metrics *Metrics
}

func newCIDRSet(cluster netip.Prefix, nodeBits int, m *Metrics) (*cidrSet, error) {
	cluster = cluster.Masked()
	if err := checkMask(cluster, nodeBits); err != nil {
		return nil, err
	}
	s := &cidrSet{
		cluster: cluster, nodeBits: nodeBits, shift: cluster.Addr().BitLen() - nodeBits,
		max: 1 << (nodeBits - cluster.Bits()), label: cluster.String(), metrics: m,
	}
	s.metrics.setMax(s.label, s.max)
	s.metrics.setUsage(s.label, 0)
	return s, nil
}

func (s *cidrSet) bit(i int) bool {
	w := i / 64
	return w < len(s.used) && s.used[w]&(1<<(i%64)) != 0
}

func (s *cidrSet) set(i int, on bool) {
	w := i / 64
	if w >= len(s.used) {
		if !on {
			return
		}
		grown := make([]uint64, max(w+1, 2*len(s.used)))
		copy(grown, s.used)
		s.used = grown
	}
	if on {
		s.used[w] |= 1 << (i % 64)
	} else {
		s.used[w] &^= 1 << (i % 64)
	}
}

// allocateNext takes the first free block at or after next, wrapping
// around, and returns it with the number of used blocks passed over.
func (s *cidrSet) allocateNext() (netip.Prefix, error) {
	if s.allocated == s.max {
		return netip.Prefix{}, ErrNoCIDRs
	}
	candidate, tries := s.next, 0
	for tries < s.max {
		// A whole word of used blocks is passed over at once.
		if w := candidate / 64; candidate%64 == 0 && candidate+64 <= s.max && w < len(s.used) && s.used[w] == ^uint64(0) {
			tries += 64
			candidate = (candidate + 64) % s.max
			continue
		}
		if !s.bit(candidate) {
			break
		}
		tries++
		candidate = (candidate + 1) % s.max
	}
	s.next = (candidate + 1) % s.max
	s.set(candidate, true)
	s.allocated++
	s.metrics.allocated(s.label, 1)
	s.metrics.tries(s.label, tries)
	s.metrics.setUsage(s.label, float64(s.allocated)/float64(s.max))
	return s.block(candidate), nil
}

// occupy marks every block p covers as used (p may be a node block, a
// larger range such as a service range, or a smaller one).
func (s *cidrSet) occupy(p netip.Prefix) error {
	begin, end, err := s.indices(p)
	if err != nil {
		return err
	}
	n := 0
	for i := begin; i <= end; i++ {
		if !s.bit(i) {
			s.set(i, true)
			s.allocated++
			n++
		}
	}
	s.metrics.allocated(s.label, n)
	s.metrics.setUsage(s.label, float64(s.allocated)/float64(s.max))
	return nil
}

// release frees every block p covers.
func (s *cidrSet) release(p netip.Prefix) error {
	begin, end, err := s.indices(p)
	if err != nil {
		return err
	}
	n := 0
	for i := begin; i <= end; i++ {
		if s.bit(i) {
			s.set(i, false)
			s.allocated--
			n++
		}
	}
	s.metrics.released(s.label, n)
	s.metrics.setUsage(s.label, float64(s.allocated)/float64(s.max))
	return nil
}

// indices is the first and last block p covers.
func (s *cidrSet) indices(p netip.Prefix) (int, int, error) {
	p = p.Masked()
	if !p.IsValid() || !s.cluster.Overlaps(p) {
		return -1, -1, fmt.Errorf("cidr %v is out the range of cluster cidr %v", p, s.cluster)
	}
	if p.Bits() <= s.cluster.Bits() {
		return 0, s.max - 1, nil
	}
	first := s.index(p.Addr())
	hostBits := p.Addr().BitLen() - p.Bits()
	last := s.index(addrFrom(u128of(p.Addr()).or(ones(hostBits)), p.Addr().Is4()))
	return first, last, nil
}

// index is the block holding addr (which lies in the cluster CIDR).
func (s *cidrSet) index(addr netip.Addr) int {
	off := u128of(addr).xor(u128of(s.cluster.Addr())).shr(s.shift)
	return int(off.lo)
}

// block is the prefix of block i.
func (s *cidrSet) block(i int) netip.Prefix {
	a := u128of(s.cluster.Addr()).or(u128{lo: uint64(i)}.shl(s.shift))
	return netip.PrefixFrom(addrFrom(a, s.cluster.Addr().Is4()), s.nodeBits)
}

// u128 is an address as a 128-bit number (IPv4 in the low 32 bits).
type u128 struct{ hi, lo uint64 }

func u128of(a netip.Addr) u128 {
	if a.Is4() {
		b := a.As4()
		return u128{lo: uint64(binary.BigEndian.Uint32(b[:]))}
	}
	b := a.As16()
	return u128{hi: binary.BigEndian.Uint64(b[:8]), lo: binary.BigEndian.Uint64(b[8:])}
}

func addrFrom(x u128, v4 bool) netip.Addr {
	if v4 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(x.lo))
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], x.hi)
	binary.BigEndian.PutUint64(b[8:], x.lo)
	return netip.AddrFrom16(b)
}

func (x u128) or(y u128) u128  { return u128{x.hi | y.hi, x.lo | y.lo} }
func (x u128) xor(y u128) u128 { return u128{x.hi ^ y.hi, x.lo ^ y.lo} }

func (x u128) shr(n int) u128 {
	switch {
	case n == 0:
		return x
	case n >= 128:
		return u128{}
	case n >= 64:
		return u128{lo: x.hi >> (n - 64)}
	}
	return u128{hi: x.hi >> n, lo: x.lo>>n | x.hi<<(64-n)}
}

func (x u128) shl(n int) u128 {
	switch {
	case n == 0:
		return x
	case n >= 128:
		return u128{}
	case n >= 64:
		return u128{hi: x.lo << (n - 64)}
	}
	return u128{hi: x.hi<<n | x.lo>>(64-n), lo: x.lo << n}
}

// ones is a number with the low n bits set.
func ones(n int) u128 {
	switch {
	case n <= 0:
		return u128{}
	case n >= 128:
		return u128{^uint64(0), ^uint64(0)}
	case n >= 64:
		return u128{hi: ^uint64(0) >> (128 - n), lo: ^uint64(0)}
	}
	return u128{lo: ^uint64(0) >> (64 - n)}
}
