package pki_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeplane/nodeplane/internal/pki"
)

// errAny stands for "some error" in tables.
var errAny = errors.New("any error")

func TestSignClientCert(t *testing.T) {
	clk := testclock.NewFakeClock(start)
	c, err := pki.EnsureCluster(pki.Config{Dir: t.TempDir(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p224, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsa1024, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		pub     crypto.PublicKey
		cn      string
		ttl     time.Duration
		wantErr error
	}{
		{name: "a P-256 key is signed", pub: p256.Public(), cn: "system:node:n1", ttl: time.Hour},
		{name: "an Ed25519 key is signed", pub: edPub, cn: "system:node:n2", ttl: time.Hour},
		{name: "a P-224 key is refused", pub: p224.Public(), cn: "system:node:n3", ttl: time.Hour, wantErr: pki.ErrUnsupportedKey},
		{name: "a 1024-bit RSA key is refused", pub: rsa1024.Public(), cn: "system:node:n4", ttl: time.Hour, wantErr: pki.ErrUnsupportedKey},
		{name: "no key is refused", pub: nil, cn: "system:node:n5", ttl: time.Hour, wantErr: pki.ErrUnsupportedKey},
		{name: "an empty common name is refused", pub: p256.Public(), cn: "", ttl: time.Hour, wantErr: errAny},
		{name: "a zero lifetime is refused", pub: p256.Public(), cn: "system:node:n6", ttl: 0, wantErr: errAny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			certPEM, err := c.SignClientCert(tt.pub, tt.cn, []string{"system:nodes"}, tt.ttl)
			if tt.wantErr != nil {
				if err == nil || (tt.wantErr != errAny && !errors.Is(err, tt.wantErr)) {
					t.Fatalf("SignClientCert error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("SignClientCert: %v", err)
			}
			block, _ := pem.Decode(certPEM)
			if block == nil || block.Type != "CERTIFICATE" {
				t.Fatalf("not a PEM certificate: %s", certPEM)
			}
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if eq, ok := tt.pub.(interface{ Equal(crypto.PublicKey) bool }); !ok || !eq.Equal(cert.PublicKey) {
				t.Error("certificate is not for the given public key")
			}
			if cert.Subject.CommonName != tt.cn || !slices.Equal(cert.Subject.Organization, []string{"system:nodes"}) {
				t.Errorf("subject = %s, want CN=%s O=system:nodes", cert.Subject, tt.cn)
			}
			if !cert.NotAfter.Equal(start.Add(tt.ttl)) {
				t.Errorf("NotAfter = %s, want %s", cert.NotAfter, start.Add(tt.ttl))
			}
			if _, err := cert.Verify(x509.VerifyOptions{Roots: c.CertPool(), CurrentTime: start, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Errorf("does not verify as a client certificate: %v", err)
			}
		})
	}
}

func TestNodeTokenSigningKey(t *testing.T) {
	t.Run("the key is created once and kept across restarts", func(t *testing.T) {
		dir := t.TempDir()
		c, err := pki.EnsureCluster(pki.Config{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		first, err := c.NodeTokenSigningKey()
		if err != nil {
			t.Fatalf("NodeTokenSigningKey: %v", err)
		}
		if len(first) != 32 {
			t.Errorf("key has %d bytes, want 32", len(first))
		}
		path := filepath.Join(dir, pki.NodeTokenSigningKeyFile)
		if got := mode(t, path); got != 0o600 {
			t.Errorf("key file mode = %o, want 600", got)
		}
		restarted, err := pki.EnsureCluster(pki.Config{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		second, err := restarted.NodeTokenSigningKey()
		if err != nil {
			t.Fatalf("NodeTokenSigningKey after restart: %v", err)
		}
		if !bytes.Equal(first, second) {
			t.Error("the key changed across a restart")
		}
		other, err := pki.EnsureCluster(pki.Config{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		third, err := other.NodeTokenSigningKey()
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(first, third) {
			t.Error("two clusters got the same key")
		}
	})

	tests := []struct {
		name    string
		content string
		perm    os.FileMode
		wantErr bool
	}{
		{name: "a key restored with mode 0644 is kept and tightened", content: "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n", perm: 0o644},
		{name: "a key that is not hex is an error", content: "not a key\n", perm: 0o600, wantErr: true},
		{name: "a key of the wrong length is an error", content: "0011\n", perm: 0o600, wantErr: true},
		{name: "an empty key file is an error", content: "", perm: 0o600, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			c, err := pki.EnsureCluster(pki.Config{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, pki.NodeTokenSigningKeyFile)
			if err := os.WriteFile(path, []byte(tt.content), tt.perm); err != nil {
				t.Fatal(err)
			}
			key, err := c.NodeTokenSigningKey()
			if tt.wantErr {
				if err == nil {
					t.Fatalf("NodeTokenSigningKey = %x, want an error", key)
				}
				if data, _ := os.ReadFile(path); string(data) != tt.content {
					t.Errorf("the corrupt key file was replaced with %q", data)
				}
				return
			}
			if err != nil {
				t.Fatalf("NodeTokenSigningKey: %v", err)
			}
			if want := "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"; hex.EncodeToString(key) != want {
				t.Errorf("key = %x, want %s", key, want)
			}
			if got := mode(t, path); got != 0o600 {
				t.Errorf("key file mode = %o, want 600", got)
			}
		})
	}
}
