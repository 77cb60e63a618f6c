package etcd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/internal/storage"
)

func TestDialRejectsBadTLSFilesNamingTheFlag(t *testing.T) {
	pki := writeTestPKI(t)
	notPEM := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.pem")
	tests := []struct {
		name string
		cfg  ExternalConfig
		want string
	}{
		{"no endpoints", ExternalConfig{}, "--etcd-servers"},
		{"an unreadable CA file", ExternalConfig{CAFile: missing}, "--etcd-cafile"},
		{"a CA file without certificates", ExternalConfig{CAFile: notPEM}, "--etcd-cafile"},
		{"an unreadable certificate file", ExternalConfig{CertFile: missing, KeyFile: pki.clientKey}, "--etcd-certfile"},
		{"an unreadable key file", ExternalConfig{CertFile: pki.clientCert, KeyFile: missing}, "--etcd-keyfile"},
		{"a certificate without a key", ExternalConfig{CertFile: pki.clientCert}, "--etcd-keyfile"},
		{"a key without a certificate", ExternalConfig{KeyFile: pki.clientKey}, "--etcd-certfile"},
		{"a key that does not match the certificate", ExternalConfig{CertFile: pki.clientCert, KeyFile: pki.serverKey}, "--etcd-keyfile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name != "no endpoints" {
				tt.cfg.Endpoints = []string{"https://127.0.0.1:1"}
			}
			client, err := Dial(t.Context(), tt.cfg)
			if err == nil {
				client.Close()
				t.Fatal("Dial succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Dial error %q does not name %s", err, tt.want)
			}
		})
	}
}

func TestDialToNothingFailsUnavailableWithinTheTimeout(t *testing.T) {
	u, _, err := resolvePort("http://127.0.0.1:0") // free, so nothing listens
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = Dial(ctx, ExternalConfig{Endpoints: []string{u.String()}, DialTimeout: 200 * time.Millisecond, Logger: testLogger(t)})
	if !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Dial = %v, want ErrUnavailable", err)
	}
	if ctx.Err() != nil {
		t.Error("Dial outlived its DialTimeout")
	}
}

func TestDialReachesAPlainHTTPMember(t *testing.T) {
	m := startMember(t, EmbeddedConfig{ClientURL: "http://127.0.0.1:0"})
	client, err := Dial(t.Context(), ExternalConfig{Endpoints: []string{m.ClientURL()}, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("Dial(%s) = %v", m.ClientURL(), err)
	}
	s, err := New(Config{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Create(t.Context(), "/dial/k", []byte("v")); err != nil {
		t.Errorf("Create over the network = %v", err)
	}
}
