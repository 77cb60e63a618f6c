package host

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Interface is one network interface and the addresses assigned to it.
type Interface struct {
	Name     string
	Up       bool
	Loopback bool
	Addrs    []net.IP
}

// SystemInterfaces lists this machine's network interfaces.
func SystemInterfaces() ([]Interface, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list network interfaces: %w", err)
	}
	out := make([]Interface, 0, len(ifaces))
	for _, ifc := range ifaces {
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, fmt.Errorf("list addresses of %s: %w", ifc.Name, err)
		}
		i := Interface{
			Name:     ifc.Name,
			Up:       ifc.Flags&net.FlagUp != 0,
			Loopback: ifc.Flags&net.FlagLoopback != 0,
		}
		for _, a := range addrs {
			if ipnet, ok := a.(*net.IPNet); ok {
				i.Addrs = append(i.Addrs, ipnet.IP)
			}
		}
		out = append(out, i)
	}
	return out, nil
}

// Hostname returns the node's hostname, trimmed and lower-cased:
// Config.HostnameOverride when set, else the machine's —
// /proc/sys/kernel/hostname, or os.Hostname when Root is "/" and that file
// cannot be read. An empty hostname is an error.
func (h *Host) Hostname() (string, error) {
	if o := h.cfg.HostnameOverride; o != nil {
		name := strings.ToLower(strings.TrimSpace(*o))
		if name == "" {
			return "", errors.New("--hostname-override is empty")
		}
		return name, nil
	}
	name, err := h.readString("/proc/sys/kernel/hostname")
	if err != nil && h.live() {
		name, err = os.Hostname()
	}
	if err != nil {
		return "", fmt.Errorf("read hostname: %w", err)
	}
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "" {
		return "", errors.New("hostname is empty")
	}
	return name, nil
}

// Addresses returns the node's status addresses: InternalIP entries, then
// one Hostname entry when hostname is not empty.
//
// With nodeIPs (the --node-ip values: one address, or a dual-stack pair of
// one IPv4 and one IPv6) the InternalIPs are exactly those, in order; each
// must be a usable unicast address assigned to an interface of this machine.
// Without them, the InternalIP is the first global unicast address of the
// interface holding the default route (IPv4 route first, then IPv6, read
// from /proc/net/route and /proc/net/ipv6_route), else the first global
// unicast address of any up, non-loopback interface (IPv4 preferred), else
// 127.0.0.1. Unlike upstream, the hostname is not resolved through DNS.
func (h *Host) Addresses(nodeIPs []net.IP, hostname string) ([]corev1.NodeAddress, error) {
	ifaces, err := h.cfg.Interfaces()
	if err != nil {
		return nil, err
	}
	var ips []net.IP
	if len(nodeIPs) > 0 {
		if err := validateNodeIPs(nodeIPs, ifaces); err != nil {
			return nil, err
		}
		ips = nodeIPs
	} else {
		ips = []net.IP{h.detectIP(ifaces)}
	}
	out := make([]corev1.NodeAddress, 0, len(ips)+1)
	for _, ip := range ips {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip.String()})
	}
	if hostname != "" {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeHostName, Address: hostname})
	}
	return out, nil
}

func validateNodeIPs(ips []net.IP, ifaces []Interface) error {
	if len(ips) > 2 {
		return fmt.Errorf("--node-ip: at most two addresses (one IPv4, one IPv6), got %d", len(ips))
	}
	if len(ips) == 2 && (ips[0].To4() != nil) == (ips[1].To4() != nil) {
		return fmt.Errorf("--node-ip %s,%s: a pair must be one IPv4 and one IPv6 address", ips[0], ips[1])
	}
	for _, ip := range ips {
		var problem string
		switch {
		case ip == nil:
			return fmt.Errorf("--node-ip: empty address")
		case ip.IsUnspecified():
			problem = "is the unspecified address"
		case ip.IsLoopback():
			problem = "is a loopback address"
		case ip.IsMulticast():
			problem = "is a multicast address"
		case ip.IsLinkLocalUnicast():
			problem = "is a link-local address"
		case !assigned(ip, ifaces):
			problem = "is not assigned to any network interface of this machine"
		}
		if problem != "" {
			return fmt.Errorf("--node-ip %s %s", ip, problem)
		}
	}
	return nil
}

func assigned(ip net.IP, ifaces []Interface) bool {
	for _, ifc := range ifaces {
		for _, a := range ifc.Addrs {
			if a.Equal(ip) {
				return true
			}
		}
	}
	return false
}

// detectIP picks the node's InternalIP when --node-ip is not given.
func (h *Host) detectIP(ifaces []Interface) net.IP {
	byName := make(map[string]Interface, len(ifaces))
	for _, ifc := range ifaces {
		byName[ifc.Name] = ifc
	}
	if name, ok := h.defaultRouteV4(); ok {
		if ip := firstGlobal(byName[name], true); ip != nil {
			return ip
		}
	}
	if name, ok := h.defaultRouteV6(); ok {
		if ip := firstGlobal(byName[name], false); ip != nil {
			return ip
		}
	}
	for _, v4 := range []bool{true, false} {
		for _, ifc := range ifaces {
			if !ifc.Up || ifc.Loopback {
				continue
			}
			if ip := firstGlobal(ifc, v4); ip != nil {
				return ip
			}
		}
	}
	return net.IPv4(127, 0, 0, 1)
}

// firstGlobal returns the interface's first global unicast address of the
// given family.
func firstGlobal(ifc Interface, v4 bool) net.IP {
	for _, ip := range ifc.Addrs {
		if ip.IsGlobalUnicast() && (ip.To4() != nil) == v4 {
			return ip
		}
	}
	return nil
}

// Route flags from linux/route.h.
const (
	rtfUp     = 0x0001
	rtfReject = 0x0200
)

// defaultRouteV4 returns the interface of the lowest-metric IPv4 default
// route in /proc/net/route. Columns: Iface Destination Gateway Flags RefCnt
// Use Metric Mask …, numbers in hex.
func (h *Host) defaultRouteV4() (string, bool) {
	return h.defaultRoute("/proc/net/route", func(f []string) (string, uint64, bool) {
		if len(f) < 8 || f[0] == "Iface" || f[1] != "00000000" || f[7] != "00000000" {
			return "", 0, false
		}
		flags, err := strconv.ParseUint(f[3], 16, 32)
		if err != nil || flags&rtfUp == 0 {
			return "", 0, false
		}
		metric, err := strconv.ParseUint(f[6], 10, 32)
		if err != nil {
			return "", 0, false
		}
		return f[0], metric, true
	})
}

// defaultRouteV6 returns the interface of the lowest-metric IPv6 default
// route in /proc/net/ipv6_route. Columns: destination, prefix length,
// source, source prefix length, next hop, metric, refcount, use, flags,
// interface; numbers in hex.
func (h *Host) defaultRouteV6() (string, bool) {
	return h.defaultRoute("/proc/net/ipv6_route", func(f []string) (string, uint64, bool) {
		if len(f) < 10 || strings.Trim(f[0], "0") != "" || f[1] != "00" || f[9] == "lo" {
			return "", 0, false
		}
		flags, err := strconv.ParseUint(f[8], 16, 32)
		if err != nil || flags&rtfUp == 0 || flags&rtfReject != 0 {
			return "", 0, false
		}
		metric, err := strconv.ParseUint(f[5], 16, 32)
		if err != nil {
			return "", 0, false
		}
		return f[9], metric, true
	})
}

// defaultRoute scans a route table, keeping the lowest-metric line that
// parse accepts. An unreadable table means no default route.
func (h *Host) defaultRoute(p string, parse func(fields []string) (iface string, metric uint64, ok bool)) (string, bool) {
	f, err := os.Open(h.path(p))
	if err != nil {
		return "", false
	}
	defer f.Close()
	best, bestMetric, found := "", uint64(0), false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		iface, metric, ok := parse(strings.Fields(sc.Text()))
		if ok && (!found || metric < bestMetric) {
			best, bestMetric, found = iface, metric, true
		}
	}
	return best, found
}
