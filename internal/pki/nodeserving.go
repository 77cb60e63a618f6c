package pki

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"
)

// Identities around a node agent's log endpoint.
const (
	// NodeUserPrefix starts the user name of a node: system:node:<name>.
	// A node's client certificate and its agent's serving certificate both
	// carry CN=NodeUserPrefix+<name>, O=NodesGroup; the extended key usage
	// tells them apart (client or server authentication, never both).
	NodeUserPrefix = "system:node:"
	// NodesGroup is the group of every node.
	NodesGroup = "system:nodes"
	// KubeletClientUser is the identity the API server presents to node
	// agents when it reads logs. It is in no group: the API server's
	// authorizer grants it nothing beyond discovery, and an agent's log
	// endpoint admits it (and administrators) and nobody else.
	KubeletClientUser = "system:kube-apiserver-kubelet-client"
)

// ErrNotThatNode: a certificate chains to the cluster CA but is not the
// serving certificate of the node that was expected.
var ErrNotThatNode = errors.New("not the serving certificate of the expected node")

// SignNodeServingCert issues the serving certificate of node nodeName's
// agent for pub (the agent keeps the private key): CN=system:node:<name>,
// O=system:nodes, server authentication only, valid for ttl but never past
// the CA's own expiry.
//
// Its subject alternative names are decided here, not by the requester:
// the node name, and those of hosts (IP addresses or DNS names the agent
// asks for) that no other party's certificate relies on. Refused, and
// listed in refused with the reason: names that the API server's serving
// certificate covers (localhost, kubernetes.default.svc, the server's
// addresses…; otherwise a node could pose as the API server to every
// client that trusts the cluster CA), loopback, unspecified, link-local and
// multicast addresses, and anything that is not a plain host name
// (wildcards included). An address of another node is not refused — the
// server cannot tell who owns an address — and that is harmless because
// the API server checks the certificate's identity, not the address it
// dialled (see VerifyNodeServingCert).
func (c *Cluster) SignNodeServingCert(pub crypto.PublicKey, nodeName string, hosts []string, ttl time.Duration) (certPEM []byte, refused []string, err error) {
	if !isHostName(nodeName) {
		return nil, nil, fmt.Errorf("sign serving certificate: node name %q is not a host name", nodeName)
	}
	if ttl <= 0 {
		return nil, nil, fmt.Errorf("sign serving certificate of node %q: ttl %s is not positive", nodeName, ttl)
	}
	if err := checkPublicKey(pub); err != nil {
		return nil, nil, fmt.Errorf("sign serving certificate of node %q: %w", nodeName, err)
	}
	reserved := sans{dnsNames: slices.Clone(builtinDNSNames)}
	if s := c.serving.Load(); s != nil && s.Leaf != nil {
		for _, n := range s.Leaf.DNSNames {
			reserved.add(n)
		}
		for _, ip := range s.Leaf.IPAddresses {
			reserved.add(ip.String())
		}
	}
	granted, refused := nodeServingSANs(nodeName, hosts, reserved)
	now := c.clock.Now()
	notAfter := now.Add(ttl)
	if notAfter.After(c.ca.cert.NotAfter) {
		notAfter = c.ca.cert.NotAfter
	}
	template := &x509.Certificate{
		Subject:     pkix.Name{CommonName: NodeUserPrefix + nodeName, Organization: []string{NodesGroup}},
		NotBefore:   now.Add(-backdate),
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    granted.dnsNames,
		IPAddresses: granted.ips,
	}
	_, certPEM, err = signPublicKey(template, c.ca.cert, pub, c.ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign serving certificate of node %q: %w", nodeName, err)
	}
	return certPEM, refused, nil
}

// nodeServingSANs decides the SANs of node nodeName's serving certificate
// from the hosts it asks for, keeping out everything in reserved. refused
// lists what was left out, each with its reason.
func nodeServingSANs(nodeName string, hosts []string, reserved sans) (granted sans, refused []string) {
	isReserved := func(h string) bool {
		var one sans
		one.add(h)
		return len(one.missingFrom(reserved.dnsNames, reserved.ips)) == 0
	}
	for _, h := range append([]string{nodeName}, hosts...) {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		why := ""
		if ip := net.ParseIP(h); ip != nil {
			switch {
			case ip.IsLoopback(), ip.IsUnspecified():
				why = "loopback or unspecified address"
			case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast(), ip.IsMulticast():
				why = "link-local or multicast address"
			case isReserved(ip.String()):
				why = "the API server's address"
			}
		} else {
			h = strings.ToLower(h)
			switch {
			case !isHostName(h):
				why = "not a host name"
			case isReserved(h):
				why = "a name of the API server"
			}
		}
		if why != "" {
			refused = append(refused, h+" ("+why+")")
			continue
		}
		granted.add(h)
	}
	return granted, refused
}

// isHostName accepts DNS names made of letters, digits, hyphens and dots,
// with no empty label: no wildcard, no IP address, nothing a verifier could
// read as a pattern.
func isHostName(h string) bool {
	if h == "" || len(h) > 253 || net.ParseIP(h) != nil {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

// VerifyNodeServingCert checks that chain (as presented in a TLS handshake,
// leaf first) is the serving certificate of node nodeName's agent: it
// chains to roots (the cluster CA) at now, is for server authentication,
// and names that node (CN=system:node:<nodeName>, O=system:nodes). Any
// other certificate from the same CA — another node's serving certificate,
// a node's client certificate, the API server's own — is refused with an
// error matching ErrNotThatNode or a verification error.
//
// It deliberately ignores the address the caller dialled: that address
// comes from the node's own status, so it proves nothing, whereas the
// identity does.
func VerifyNodeServingCert(chain []*x509.Certificate, roots *x509.CertPool, nodeName string, now time.Time) error {
	if len(chain) == 0 {
		return errors.New("the agent presented no certificate")
	}
	leaf := chain[0]
	intermediates := x509.NewCertPool()
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: intermediates,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return fmt.Errorf("agent certificate %q is not a serving certificate of the cluster CA: %w", leaf.Subject.String(), err)
	}
	if leaf.Subject.CommonName != NodeUserPrefix+nodeName || !slices.Equal(leaf.Subject.Organization, []string{NodesGroup}) {
		return fmt.Errorf("agent certificate is for %q, want %s%s in %s: %w", leaf.Subject.String(), NodeUserPrefix, nodeName, NodesGroup, ErrNotThatNode)
	}
	return nil
}

// NodeServingClientTLS returns the TLS client configuration for talking to
// the agent of node nodeName: TLS 1.2 or later, and the agent must present
// that node's serving certificate (VerifyNodeServingCert against the
// cluster CA at the cluster's clock). The caller adds its client
// certificate. Use one per node: the check is bound to the node's name.
func (c *Cluster) NodeServingClientTLS(nodeName string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The standard check would match the dialled address against the
		// SANs; VerifyConnection checks the node's identity instead.
		InsecureSkipVerify: true, //nolint:gosec // verified by VerifyConnection below
		VerifyConnection: func(cs tls.ConnectionState) error {
			return VerifyNodeServingCert(cs.PeerCertificates, c.pool, nodeName, c.clock.Now())
		},
	}
}
