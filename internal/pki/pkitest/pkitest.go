// Package pkitest writes throwaway certificate files for tests that need
// TLS peers (an etcd cluster and its client): a CA, a serving certificate for
// localhost and 127.0.0.1, and a client certificate, all made by package pki.
package pkitest

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/internal/pki"
)

// Files are PEM file paths plus a client TLS config using them.
type Files struct {
	CA                    string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
	// ClientTLS trusts the CA and presents the client certificate.
	ClientTLS *tls.Config
}

// Write creates the files under dir.
func Write(t testing.TB, dir string) Files {
	t.Helper()
	c, err := pki.EnsureCluster(pki.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := c.IssueClientCert("test-client", nil, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := Files{
		CA:         filepath.Join(dir, pki.CACertFile),
		ServerCert: filepath.Join(dir, pki.ServingCertFile),
		ServerKey:  filepath.Join(dir, pki.ServingKeyFile),
		ClientCert: filepath.Join(dir, "test-client.crt"),
		ClientKey:  filepath.Join(dir, "test-client.key"),
	}
	for path, data := range map[string][]byte{f.ClientCert: certPEM, f.ClientKey: keyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	f.ClientTLS = &tls.Config{RootCAs: c.CertPool(), Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	return f
}
