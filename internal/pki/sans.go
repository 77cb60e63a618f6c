package pki

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
)

// builtinDNSNames are the names every serving certificate carries: the
// loopback name and the in-cluster names clients use for the API server.
var builtinDNSNames = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}

// sans is a set of subject alternative names.
type sans struct {
	dnsNames []string
	ips      []net.IP
}

func (s *sans) add(host string) {
	if ip := net.ParseIP(host); ip != nil {
		if !slices.ContainsFunc(s.ips, ip.Equal) {
			s.ips = append(s.ips, ip)
		}
		return
	}
	host = strings.ToLower(host)
	if !slices.Contains(s.dnsNames, host) {
		s.dnsNames = append(s.dnsNames, host)
	}
}

// missingFrom lists the names of s that cert does not carry.
func (s sans) missingFrom(dnsNames []string, ips []net.IP) []string {
	var missing []string
	for _, name := range s.dnsNames {
		if !slices.ContainsFunc(dnsNames, func(have string) bool { return strings.EqualFold(have, name) }) {
			missing = append(missing, name)
		}
	}
	for _, ip := range s.ips {
		if !slices.ContainsFunc(ips, ip.Equal) {
			missing = append(missing, ip.String())
		}
	}
	return missing
}

// servingSANs is the set of names the serving certificate must carry: the
// built-in names, the loopback addresses, this machine's hostname and
// interface addresses, and the operator's extra hosts.
func servingSANs(extra []string) (sans, error) {
	var s sans
	for _, name := range builtinDNSNames {
		s.add(name)
	}
	s.add("127.0.0.1")
	s.add("::1")
	for _, host := range localHosts() {
		s.add(host)
	}
	for _, host := range extra {
		h, err := normalizeHost(host)
		if err != nil {
			return sans{}, err
		}
		s.add(h)
	}
	return s, nil
}

// normalizeHost accepts a DNS name (wildcards allowed), an IP address or a
// bracketed IPv6 address.
func normalizeHost(host string) (string, error) {
	h := strings.TrimSpace(host)
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if ip := net.ParseIP(h); ip != nil {
		return ip.String(), nil
	}
	if !validDNSName(h) {
		return "", fmt.Errorf("invalid host %q: want a DNS name or an IP address", host)
	}
	return strings.ToLower(h), nil
}

func validDNSName(name string) bool {
	if name == "" || len(name) > 253 || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, "..") {
		return false
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
		case r == '*' && i == 0 && strings.HasPrefix(name, "*."):
		default:
			return false
		}
	}
	return true
}

// localHosts returns this machine's hostname and the addresses of its
// interfaces, skipping loopback (covered by the built-ins) and link-local
// addresses (scoped to one link, useless in a certificate). Lookup failures
// only shrink the list: the certificate is still valid for the built-in
// names and the operator's extra hosts.
func localHosts() []string {
	var hosts []string
	if name, err := os.Hostname(); err == nil && validDNSName(name) {
		hosts = append(hosts, strings.ToLower(name))
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return hosts
	}
	for _, addr := range addrs {
		ipNet, ok := addr.(*net.IPNet)
		if !ok {
			continue
		}
		ip := ipNet.IP
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() {
			continue
		}
		hosts = append(hosts, ip.String())
	}
	return hosts
}
