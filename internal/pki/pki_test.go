package pki_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeplane/nodeplane/internal/pki"
)

var start = time.Date(2031, 3, 14, 15, 9, 26, 0, time.UTC)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s: no PEM block", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return cert
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode().Perm()
}

func issuedFiles(c *pki.Cluster) []string {
	var files []string
	for _, i := range c.Issued() {
		files = append(files, i.File)
	}
	return files
}

func TestEnsureClusterFirstStart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	clk := testclock.NewFakeClock(start)
	c, err := pki.EnsureCluster(pki.Config{Dir: dir, Hosts: []string{"api.example.com", "10.9.8.7", "[fd00::7]"}, Clock: clk})
	if err != nil {
		t.Fatalf("EnsureCluster: %v", err)
	}
	if got, want := issuedFiles(c), []string{pki.CACertFile, pki.ServingCertFile, pki.AdminCertFile}; !slices.Equal(got, want) {
		t.Errorf("Issued() files = %v, want %v", got, want)
	}
	if got := mode(t, dir); got != 0o700 {
		t.Errorf("data dir mode = %o, want 700", got)
	}
	for _, f := range []string{pki.CAKeyFile, pki.ServingKeyFile, pki.AdminKeyFile} {
		if got := mode(t, filepath.Join(dir, f)); got != 0o600 {
			t.Errorf("%s mode = %o, want 600", f, got)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 6 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("data dir holds %v, want exactly the six PEM files (no temporary files left behind)", names)
	}

	ca := readCert(t, filepath.Join(dir, pki.CACertFile))
	if !ca.IsCA || ca.Subject.CommonName != "nodeplane-ca" {
		t.Errorf("CA: IsCA=%v CN=%q, want a CA named nodeplane-ca", ca.IsCA, ca.Subject.CommonName)
	}
	if got, want := ca.NotAfter.Sub(start), 10*365*24*time.Hour; got != want {
		t.Errorf("CA lifetime = %s, want %s", got, want)
	}
	if got := string(c.CAPEM()); !strings.Contains(got, "BEGIN CERTIFICATE") {
		t.Errorf("CAPEM() = %q, want a PEM certificate", got)
	}

	serving := readCert(t, filepath.Join(dir, pki.ServingCertFile))
	hostname, _ := os.Hostname()
	for _, name := range []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "api.example.com", strings.ToLower(hostname)} {
		if err := serving.VerifyHostname(name); err != nil {
			t.Errorf("serving certificate does not cover %q: %v", name, err)
		}
	}
	for _, ip := range []string{"127.0.0.1", "::1", "10.9.8.7", "fd00::7"} {
		if err := serving.VerifyHostname(ip); err != nil {
			t.Errorf("serving certificate does not cover %s: %v", ip, err)
		}
	}
	if got, want := serving.NotAfter.Sub(start), 365*24*time.Hour; got != want {
		t.Errorf("serving lifetime = %s, want %s", got, want)
	}
	if _, err := serving.Verify(x509.VerifyOptions{Roots: c.CertPool(), DNSName: "localhost", CurrentTime: start, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("serving certificate does not verify against the CA: %v", err)
	}

	admin := readCert(t, filepath.Join(dir, pki.AdminCertFile))
	if admin.Subject.CommonName != "nodeplane-admin" || !slices.Equal(admin.Subject.Organization, []string{"system:masters"}) {
		t.Errorf("admin subject = %s, want CN=nodeplane-admin,O=system:masters", admin.Subject)
	}
	if _, err := admin.Verify(x509.VerifyOptions{Roots: c.CertPool(), CurrentTime: start, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("admin certificate does not verify as a client certificate: %v", err)
	}
	certPEM, keyPEM := c.AdminCredentials()
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Errorf("AdminCredentials() is not a usable key pair: %v", err)
	}
}

func TestEnsureClusterLaterStart(t *testing.T) {
	const day = 24 * time.Hour
	tests := []struct {
		name string
		// before runs between the first and the second start.
		before         func(t *testing.T, dir string, clk *testclock.FakeClock)
		hosts          []string
		wantReissued   []string
		wantNewSAN     string
		wantServingKey bool // serving key file replaced
	}{
		{
			name:         "a second start with the same hosts reuses every certificate",
			wantReissued: nil,
		},
		{
			name:         "a start 300 days later still keeps every certificate",
			before:       func(t *testing.T, dir string, clk *testclock.FakeClock) { clk.Step(300 * day) },
			wantReissued: nil,
		},
		{
			name:         "a new --tls-san re-issues only the serving certificate",
			hosts:        []string{"api.example.com", "203.0.113.10"},
			wantReissued: []string{pki.ServingCertFile},
			wantNewSAN:   "203.0.113.10",
		},
		{
			name:         "certificates that expire within 30 days are re-issued but the CA is kept",
			before:       func(t *testing.T, dir string, clk *testclock.FakeClock) { clk.Step(336 * day) },
			wantReissued: []string{pki.ServingCertFile, pki.AdminCertFile},
		},
		{
			name:         "certificates that already expired are re-issued",
			before:       func(t *testing.T, dir string, clk *testclock.FakeClock) { clk.Step(2 * 365 * day) },
			wantReissued: []string{pki.ServingCertFile, pki.AdminCertFile},
		},
		{
			name: "a corrupt serving key is replaced",
			before: func(t *testing.T, dir string, clk *testclock.FakeClock) {
				writeFile(t, filepath.Join(dir, pki.ServingKeyFile), "garbage")
			},
			wantReissued: []string{pki.ServingCertFile},
		},
		{
			name: "a missing admin certificate is re-issued",
			before: func(t *testing.T, dir string, clk *testclock.FakeClock) {
				if err := os.Remove(filepath.Join(dir, pki.AdminCertFile)); err != nil {
					t.Fatal(err)
				}
			},
			wantReissued: []string{pki.AdminCertFile},
		},
		{
			name: "a serving certificate from another CA is replaced",
			before: func(t *testing.T, dir string, clk *testclock.FakeClock) {
				other := t.TempDir()
				if _, err := pki.EnsureCluster(pki.Config{Dir: other, Hosts: []string{"api.example.com"}, Clock: clk}); err != nil {
					t.Fatal(err)
				}
				for _, f := range []string{pki.ServingCertFile, pki.ServingKeyFile} {
					data, err := os.ReadFile(filepath.Join(other, f))
					if err != nil {
						t.Fatal(err)
					}
					writeFile(t, filepath.Join(dir, f), string(data))
				}
			},
			wantReissued: []string{pki.ServingCertFile},
		},
		{
			name: "a key file loosened to 0644 is tightened back to 0600",
			before: func(t *testing.T, dir string, clk *testclock.FakeClock) {
				for _, f := range []string{pki.CAKeyFile, pki.AdminKeyFile} {
					if err := os.Chmod(filepath.Join(dir, f), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.Chmod(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			},
			wantReissued: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			clk := testclock.NewFakeClock(start)
			if _, err := pki.EnsureCluster(pki.Config{Dir: dir, Hosts: []string{"api.example.com"}, Clock: clk}); err != nil {
				t.Fatalf("first EnsureCluster: %v", err)
			}
			before := map[string]*x509.Certificate{}
			for _, f := range []string{pki.CACertFile, pki.ServingCertFile, pki.AdminCertFile} {
				before[f] = readCert(t, filepath.Join(dir, f))
			}
			if tt.before != nil {
				tt.before(t, dir, clk)
			}
			hosts := tt.hosts
			if hosts == nil {
				hosts = []string{"api.example.com"}
			}

			c, err := pki.EnsureCluster(pki.Config{Dir: dir, Hosts: hosts, Clock: clk})
			if err != nil {
				t.Fatalf("second EnsureCluster: %v", err)
			}

			if got := issuedFiles(c); !slices.Equal(got, tt.wantReissued) {
				t.Errorf("Issued() = %v, want files %v", c.Issued(), tt.wantReissued)
			}
			for _, f := range []string{pki.CACertFile, pki.ServingCertFile, pki.AdminCertFile} {
				after := readCert(t, filepath.Join(dir, f))
				same := after.SerialNumber.Cmp(before[f].SerialNumber) == 0
				if want := !slices.Contains(tt.wantReissued, f); same != want {
					t.Errorf("%s kept = %v, want %v", f, same, want)
				}
				if _, err := after.Verify(x509.VerifyOptions{Roots: c.CertPool(), CurrentTime: clk.Now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
					t.Errorf("%s does not verify against the CA at %s: %v", f, clk.Now(), err)
				}
			}
			if tt.wantNewSAN != "" {
				if err := readCert(t, filepath.Join(dir, pki.ServingCertFile)).VerifyHostname(tt.wantNewSAN); err != nil {
					t.Errorf("re-issued serving certificate: %v", err)
				}
			}
			for _, f := range []string{pki.CAKeyFile, pki.ServingKeyFile, pki.AdminKeyFile} {
				if got := mode(t, filepath.Join(dir, f)); got != 0o600 {
					t.Errorf("%s mode = %o, want 600", f, got)
				}
			}
			if got := mode(t, dir); got != 0o700 {
				t.Errorf("data dir mode = %o, want 700", got)
			}
			if got := c.ServingTLSConfig(); got.GetCertificate == nil {
				t.Fatal("ServingTLSConfig has no GetCertificate")
			} else if cert, _ := got.GetCertificate(&tls.ClientHelloInfo{}); cert.Leaf.SerialNumber.Cmp(readCert(t, filepath.Join(dir, pki.ServingCertFile)).SerialNumber) != 0 {
				t.Error("ServingTLSConfig serves a different certificate than serving.crt")
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestEnsureClusterNeverReplacesTheCA(t *testing.T) {
	tests := []struct {
		name    string
		damage  func(t *testing.T, dir string)
		wantErr string
	}{
		{
			name: "a corrupt ca.key is an error",
			damage: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, pki.CAKeyFile), "-----BEGIN EC PRIVATE KEY-----\nbm90IGEga2V5\n-----END EC PRIVATE KEY-----\n")
			},
			wantErr: "corrupt",
		},
		{
			name:    "an empty ca.key is an error",
			damage:  func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, pki.CAKeyFile), "") },
			wantErr: "corrupt",
		},
		{
			name: "an unreadable ca.key is an error",
			damage: func(t *testing.T, dir string) {
				if os.Geteuid() == 0 {
					t.Skip("root reads files regardless of mode")
				}
				if err := os.Chmod(filepath.Join(dir, pki.CAKeyFile), 0); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: "permission denied",
		},
		{
			name: "a ca.key that is a directory is an error",
			damage: func(t *testing.T, dir string) {
				path := filepath.Join(dir, pki.CAKeyFile)
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(path, 0o700); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: "refusing to create a new CA",
		},
		{
			name: "a missing ca.key next to ca.crt is an error",
			damage: func(t *testing.T, dir string) {
				if err := os.Remove(filepath.Join(dir, pki.CAKeyFile)); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: "exists but its key",
		},
		{
			name: "a ca.key that does not match ca.crt is an error",
			damage: func(t *testing.T, dir string) {
				data, err := os.ReadFile(filepath.Join(dir, pki.AdminKeyFile))
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(dir, pki.CAKeyFile), string(data))
			},
			wantErr: "does not match",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			clk := testclock.NewFakeClock(start)
			if _, err := pki.EnsureCluster(pki.Config{Dir: dir, Clock: clk}); err != nil {
				t.Fatalf("first EnsureCluster: %v", err)
			}
			caBefore, err := os.ReadFile(filepath.Join(dir, pki.CACertFile))
			if err != nil {
				t.Fatal(err)
			}
			tt.damage(t, dir)

			_, err = pki.EnsureCluster(pki.Config{Dir: dir, Clock: clk})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("EnsureCluster error = %v, want one containing %q", err, tt.wantErr)
			}
			caAfter, err := os.ReadFile(filepath.Join(dir, pki.CACertFile))
			if err != nil {
				t.Fatal(err)
			}
			if string(caAfter) != string(caBefore) {
				t.Error("ca.crt changed: the CA was regenerated")
			}
		})
	}
}

func TestEnsureClusterRecreatesMissingCACertFromItsKey(t *testing.T) {
	// A crash between writing ca.key and ca.crt on the first start leaves
	// only the key; the certificate is rebuilt from it and everything
	// issued before still verifies.
	dir := t.TempDir()
	clk := testclock.NewFakeClock(start)
	if _, err := pki.EnsureCluster(pki.Config{Dir: dir, Clock: clk}); err != nil {
		t.Fatal(err)
	}
	admin := readCert(t, filepath.Join(dir, pki.AdminCertFile))
	if err := os.Remove(filepath.Join(dir, pki.CACertFile)); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Hour)
	c, err := pki.EnsureCluster(pki.Config{Dir: dir, Clock: clk})
	if err != nil {
		t.Fatalf("EnsureCluster: %v", err)
	}
	if got, want := issuedFiles(c), []string{pki.CACertFile}; !slices.Equal(got, want) {
		t.Errorf("Issued() = %v, want files %v", c.Issued(), want)
	}
	if _, err := admin.Verify(x509.VerifyOptions{Roots: c.CertPool(), CurrentTime: clk.Now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("admin certificate issued before does not verify against the re-created CA certificate: %v", err)
	}
}

func TestEnsureClusterRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  pki.Config
	}{
		{name: "an empty directory is rejected", cfg: pki.Config{}},
		{name: "a host with a port is rejected", cfg: pki.Config{Dir: "x", Hosts: []string{"example.com:6443"}}},
		{name: "a URL as host is rejected", cfg: pki.Config{Dir: "x", Hosts: []string{"https://example.com"}}},
		{name: "an empty host is rejected", cfg: pki.Config{Dir: "x", Hosts: []string{" "}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.cfg.Dir != "" {
				tt.cfg.Dir = filepath.Join(t.TempDir(), tt.cfg.Dir)
			}
			if _, err := pki.EnsureCluster(tt.cfg); err == nil {
				t.Fatal("EnsureCluster succeeded, want an error")
			}
			if tt.cfg.Dir != "" {
				if _, err := os.Stat(tt.cfg.Dir); !os.IsNotExist(err) {
					t.Errorf("EnsureCluster touched the disk before validating: stat %s: %v", tt.cfg.Dir, err)
				}
			}
		})
	}
}

func TestIssueClientCert(t *testing.T) {
	const day = 24 * time.Hour
	clk := testclock.NewFakeClock(start)
	c, err := pki.EnsureCluster(pki.Config{Dir: t.TempDir(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	caNotAfter := start.Add(10 * 365 * day)
	tests := []struct {
		name         string
		cn           string
		orgs         []string
		ttl          time.Duration
		wantNotAfter time.Time
		wantErr      bool
	}{
		{name: "a node certificate carries the node name and group", cn: "system:node:n1", orgs: []string{"system:nodes"}, ttl: 365 * day, wantNotAfter: start.Add(365 * day)},
		{name: "a certificate may have several groups", cn: "alice", orgs: []string{"dev", "ops"}, ttl: time.Hour, wantNotAfter: start.Add(time.Hour)},
		{name: "a certificate may have no group", cn: "bob", ttl: time.Hour, wantNotAfter: start.Add(time.Hour)},
		{name: "a lifetime past the CA's expiry is cut at the CA's expiry", cn: "carol", ttl: 20 * 365 * day, wantNotAfter: caNotAfter},
		{name: "an empty common name is an error", cn: "", ttl: time.Hour, wantErr: true},
		{name: "a zero lifetime is an error", cn: "dave", ttl: 0, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			certPEM, keyPEM, err := c.IssueClientCert(tt.cn, tt.orgs, tt.ttl)
			if tt.wantErr {
				if err == nil {
					t.Fatal("IssueClientCert succeeded, want an error")
				}
				return
			}
			if err != nil {
				t.Fatalf("IssueClientCert: %v", err)
			}
			pair, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				t.Fatalf("not a usable key pair: %v", err)
			}
			cert := pair.Leaf
			if cert.Subject.CommonName != tt.cn || !slices.Equal(cert.Subject.Organization, tt.orgs) {
				t.Errorf("subject = %s, want CN=%s O=%v", cert.Subject, tt.cn, tt.orgs)
			}
			if !cert.NotAfter.Equal(tt.wantNotAfter) {
				t.Errorf("NotAfter = %s, want %s", cert.NotAfter, tt.wantNotAfter)
			}
			if _, err := cert.Verify(x509.VerifyOptions{Roots: c.CertPool(), CurrentTime: start, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Errorf("does not verify as a client certificate: %v", err)
			}
		})
	}
}

func TestRefreshMakesARenewedServingCertificateLive(t *testing.T) {
	dir := t.TempDir()
	clk := testclock.NewFakeClock(start)
	c, err := pki.EnsureCluster(pki.Config{Dir: dir, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.ServingTLSConfig()
	if cfg.MinVersion != tls.VersionTLS12 || cfg.ClientAuth != tls.VerifyClientCertIfGiven || cfg.ClientCAs == nil || len(cfg.Certificates) != 0 {
		t.Errorf("ServingTLSConfig = {MinVersion:%x ClientAuth:%v ClientCAs:%v Certificates:%d}, want TLS1.2+, VerifyClientCertIfGiven, the CA, no static certificate",
			cfg.MinVersion, cfg.ClientAuth, cfg.ClientCAs != nil, len(cfg.Certificates))
	}
	first, _ := cfg.GetCertificate(&tls.ClientHelloInfo{})

	if err := c.Refresh(); err != nil {
		t.Fatal(err)
	}
	if same, _ := cfg.GetCertificate(&tls.ClientHelloInfo{}); same.Leaf.SerialNumber.Cmp(first.Leaf.SerialNumber) != 0 {
		t.Error("Refresh replaced a serving certificate that was still good")
	}

	clk.Step(340 * 24 * time.Hour)
	if err := c.Refresh(); err != nil {
		t.Fatal(err)
	}
	renewed, _ := cfg.GetCertificate(&tls.ClientHelloInfo{})
	if renewed.Leaf.SerialNumber.Cmp(first.Leaf.SerialNumber) == 0 {
		t.Fatal("after Refresh near expiry the TLS config still serves the old certificate")
	}
	if got, want := renewed.Leaf.NotAfter, clk.Now().Add(365*24*time.Hour); !got.Equal(want) {
		t.Errorf("renewed NotAfter = %s, want %s", got, want)
	}
	if got := issuedFiles(c); !slices.Equal(got, []string{pki.ServingCertFile, pki.AdminCertFile}) {
		t.Errorf("Issued() after renewal = %v", c.Issued())
	}
	certPEM, _ := c.AdminCredentials()
	block, _ := pem.Decode(certPEM)
	admin, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !admin.NotAfter.Equal(renewed.Leaf.NotAfter) {
		t.Errorf("AdminCredentials after renewal expire at %s, want the renewed %s", admin.NotAfter, renewed.Leaf.NotAfter)
	}
}

func TestClientURL(t *testing.T) {
	tests := []struct {
		name string
		addr net.Addr
		want string
	}{
		{name: "an IPv4 wildcard maps to loopback", addr: &net.TCPAddr{IP: net.IPv4zero, Port: 6443}, want: "https://127.0.0.1:6443"},
		{name: "an IPv6 wildcard maps to IPv4 loopback", addr: &net.TCPAddr{IP: net.IPv6unspecified, Port: 6443}, want: "https://127.0.0.1:6443"},
		{name: "a missing IP maps to loopback", addr: &net.TCPAddr{Port: 6443}, want: "https://127.0.0.1:6443"},
		{name: "a specific IPv4 address is kept", addr: &net.TCPAddr{IP: net.ParseIP("10.0.0.5"), Port: 443}, want: "https://10.0.0.5:443"},
		{name: "an IPv6 address is bracketed", addr: &net.TCPAddr{IP: net.ParseIP("::1"), Port: 6443}, want: "https://[::1]:6443"},
		{name: "an IPv6 zone is escaped", addr: &net.TCPAddr{IP: net.ParseIP("fe80::1"), Zone: "eth0", Port: 6443}, want: "https://[fe80::1%25eth0]:6443"},
		{name: "a non-TCP address is parsed from its string", addr: fakeAddr("0.0.0.0:8443"), want: "https://127.0.0.1:8443"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pki.ClientURL(tt.addr); got != tt.want {
				t.Errorf("ClientURL(%v) = %q, want %q", tt.addr, got, tt.want)
			}
		})
	}
}

type fakeAddr string

func (a fakeAddr) Network() string { return "tcp" }
func (a fakeAddr) String() string  { return string(a) }
