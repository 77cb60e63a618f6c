package pki_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeplane/nodeplane/internal/pki"
)

// servingFor has c sign a serving certificate of node for a new key.
func servingFor(t *testing.T, c *pki.Cluster, node string, hosts ...string) (*x509.Certificate, []string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, refused, err := c.SignNodeServingCert(key.Public(), node, hosts, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, mustKeyPEM(t, key))
	if err != nil {
		t.Fatal(err)
	}
	return pair.Leaf, refused
}

func mustKeyPEM(t *testing.T, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func TestSignNodeServingCertDecidesTheSANs(t *testing.T) {
	c, err := pki.EnsureCluster(pki.Config{Dir: t.TempDir(), Clock: testclock.NewFakeClock(start), Hosts: []string{"api.example.com", "192.0.2.10"}})
	if err != nil {
		t.Fatal(err)
	}
	cert, refused := servingFor(t, c, "node-a", "10.0.0.7", "node-a.example.com", "2001:db8::7",
		"127.0.0.1", "::1", "0.0.0.0", "fe80::1", "224.0.0.1",
		"localhost", "kubernetes.default.svc", "api.example.com", "192.0.2.10",
		"*.example.com", "bad_name", "")

	if cert.Subject.CommonName != "system:node:node-a" || !slices.Equal(cert.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("subject = %s, want CN=system:node:node-a, O=system:nodes", cert.Subject)
	}
	if !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
		t.Errorf("extended key usage = %v, want server authentication only", cert.ExtKeyUsage)
	}
	if want := []string{"node-a", "node-a.example.com"}; !slices.Equal(cert.DNSNames, want) {
		t.Errorf("DNS SANs = %v, want %v", cert.DNSNames, want)
	}
	var ips []string
	for _, ip := range cert.IPAddresses {
		ips = append(ips, ip.String())
	}
	if want := []string{"10.0.0.7", "2001:db8::7"}; !slices.Equal(ips, want) {
		t.Errorf("IP SANs = %v, want %v", ips, want)
	}
	for _, h := range []string{"127.0.0.1", "::1", "0.0.0.0", "fe80::1", "224.0.0.1", "localhost", "kubernetes.default.svc", "api.example.com", "192.0.2.10", "*.example.com", "bad_name"} {
		if !slices.ContainsFunc(refused, func(r string) bool { return strings.HasPrefix(r, h+" (") }) {
			t.Errorf("%s was not reported as refused (refused: %v)", h, refused)
		}
	}

	t.Run("a node named like the API server does not get that name", func(t *testing.T) {
		cert, _ := servingFor(t, c, "localhost")
		if len(cert.DNSNames) != 0 || cert.Subject.CommonName != "system:node:localhost" {
			t.Errorf("DNS SANs = %v, subject %s; want none and the node's identity", cert.DNSNames, cert.Subject)
		}
	})
}

func TestVerifyNodeServingCert(t *testing.T) {
	clk := testclock.NewFakeClock(start)
	c, err := pki.EnsureCluster(pki.Config{Dir: t.TempDir(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.EnsureCluster(pki.Config{Dir: t.TempDir(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	nodeA, _ := servingFor(t, c, "node-a", "10.0.0.7")
	nodeB, _ := servingFor(t, c, "node-b", "10.0.0.7") // claims A's address too
	foreign, _ := servingFor(t, other, "node-a", "10.0.0.7")
	clientPEM, clientKey, err := c.IssueClientCert("system:node:node-a", []string{"system:nodes"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	client, err := tls.X509KeyPair(clientPEM, clientKey)
	if err != nil {
		t.Fatal(err)
	}
	apiServing := c.ServingTLSConfig()
	apiCert, err := apiServing.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name  string
		chain []*x509.Certificate
		at    time.Time
		// wantErr: nil for success, errAny for a verification error.
		wantErr error
	}{
		{name: "the node's own serving certificate is accepted", chain: []*x509.Certificate{nodeA}, at: start},
		{name: "another node's serving certificate is refused, whatever addresses it carries", chain: []*x509.Certificate{nodeB}, at: start, wantErr: pki.ErrNotThatNode},
		{name: "a serving certificate for the node from another CA is refused", chain: []*x509.Certificate{foreign}, at: start, wantErr: errAny},
		{name: "the node's client certificate is refused", chain: []*x509.Certificate{client.Leaf}, at: start, wantErr: errAny},
		{name: "the API server's serving certificate is refused", chain: []*x509.Certificate{apiCert.Leaf}, at: start, wantErr: pki.ErrNotThatNode},
		{name: "an expired serving certificate is refused", chain: []*x509.Certificate{nodeA}, at: start.Add(25 * time.Hour), wantErr: errAny},
		{name: "no certificate is refused", at: start, wantErr: errAny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := pki.VerifyNodeServingCert(tt.chain, c.CertPool(), "node-a", tt.at)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("got %v, want success", err)
			case tt.wantErr == errAny && err == nil:
				t.Fatal("got success, want an error")
			case tt.wantErr != nil && tt.wantErr != errAny && !errors.Is(err, tt.wantErr):
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestNodeServingClientTLS dials real TLS listeners: the configuration for
// node-a completes a handshake only with node-a's serving certificate.
func TestNodeServingClientTLS(t *testing.T) {
	c, err := pki.EnsureCluster(pki.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	serve := func(node string) string {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		certPEM, _, err := c.SignNodeServingCert(key.Public(), node, []string{"127.0.0.1"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(certPEM, mustKeyPEM(t, key))
		if err != nil {
			t.Fatal(err)
		}
		ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				_ = conn.(*tls.Conn).Handshake()
				conn.Close()
			}
		}()
		return ln.Addr().String()
	}
	addrA, addrB := serve("node-a"), serve("node-b")
	dial := func(addr string) error {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, c.NodeServingClientTLS("node-a"))
		if err == nil {
			conn.Close()
		}
		return err
	}
	if err := dial(addrA); err != nil {
		t.Errorf("dialling node-a's agent: %v", err)
	}
	if err := dial(addrB); !errors.Is(err, pki.ErrNotThatNode) {
		t.Errorf("dialling node-a but reaching node-b's agent: got %v, want %v", err, pki.ErrNotThatNode)
	}
}
