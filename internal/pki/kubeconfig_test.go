package pki_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodeplane/nodeplane/internal/pki"
)

func TestWriteKubeconfig(t *testing.T) {
	c, err := pki.EnsureCluster(pki.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM := c.AdminCredentials()
	tests := []struct {
		name        string
		contextName string
		wantName    string
	}{
		{name: "an empty context name means nodeplane", contextName: "", wantName: "nodeplane"},
		{name: "a given context name names cluster, user and context", contextName: "lab", wantName: "lab"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sub", "admin.kubeconfig")
			if err := pki.WriteKubeconfig(path, "https://127.0.0.1:6443", c.CAPEM(), certPEM, keyPEM, tt.contextName); err != nil {
				t.Fatalf("WriteKubeconfig: %v", err)
			}
			if got := mode(t, path); got != 0o600 {
				t.Errorf("kubeconfig mode = %o, want 600", got)
			}

			cfg, err := clientcmd.LoadFromFile(path)
			if err != nil {
				t.Fatalf("clientcmd.LoadFromFile: %v", err)
			}
			if cfg.CurrentContext != tt.wantName {
				t.Errorf("current-context = %q, want %q", cfg.CurrentContext, tt.wantName)
			}
			kctx := cfg.Contexts[tt.wantName]
			if kctx == nil || kctx.Cluster != tt.wantName || kctx.AuthInfo != tt.wantName {
				t.Fatalf("context %q = %+v, want cluster and user %q", tt.wantName, kctx, tt.wantName)
			}
			cluster, user := cfg.Clusters[tt.wantName], cfg.AuthInfos[tt.wantName]
			if cluster == nil || user == nil {
				t.Fatalf("cluster %v or user %v missing", cluster, user)
			}
			if !bytes.Equal(cluster.CertificateAuthorityData, c.CAPEM()) || !bytes.Equal(user.ClientCertificateData, certPEM) || !bytes.Equal(user.ClientKeyData, keyPEM) {
				t.Error("embedded CA, certificate or key differ from what was written")
			}
			if cluster.CertificateAuthority != "" || user.ClientCertificate != "" || user.ClientKey != "" {
				t.Error("kubeconfig refers to files instead of embedding data")
			}

			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, field := range []string{"certificate-authority-data:", "client-certificate-data:", "client-key-data:"} {
				if !bytes.Contains(raw, []byte(field)) {
					t.Errorf("kubeconfig lacks %s:\n%s", field, raw)
				}
			}

			loaded, err := clientcmd.Load(raw)
			if err != nil {
				t.Fatalf("clientcmd.Load: %v", err)
			}
			rest, err := clientcmd.NewDefaultClientConfig(*loaded, &clientcmd.ConfigOverrides{}).ClientConfig()
			if err != nil {
				t.Fatalf("ClientConfig: %v", err)
			}
			if rest.Host != "https://127.0.0.1:6443" {
				t.Errorf("rest.Config.Host = %q, want https://127.0.0.1:6443", rest.Host)
			}
			if !bytes.Equal(rest.CAData, c.CAPEM()) || !bytes.Equal(rest.CertData, certPEM) || !bytes.Equal(rest.KeyData, keyPEM) {
				t.Error("rest.Config TLS data differ from what was written")
			}
		})
	}
}

func TestWriteKubeconfigReplacesAnExistingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	writeFile(t, path, "old")
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := pki.WriteKubeconfig(path, "https://[::1]:6443", []byte("ca"), []byte("cert"), []byte("key"), ""); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Clusters["nodeplane"].Server; got != "https://[::1]:6443" {
		t.Errorf("server = %q", got)
	}
	if got := mode(t, path); got != 0o600 {
		t.Errorf("mode = %o, want 600", got)
	}
}

func TestEnsureToken(t *testing.T) {
	tests := []struct {
		name     string
		existing *string // file content before the call; nil means absent
		want     string  // "" means "a new 64-hex-digit token"
		wantErr  bool
	}{
		{name: "an absent file gets a new random token"},
		{name: "an existing token is returned", existing: ptr("s3cret"), want: "s3cret"},
		{name: "surrounding whitespace is ignored", existing: ptr("  s3cret\n"), want: "s3cret"},
		{name: "an empty file is an error", existing: ptr("\n"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "d", "node-token")
			if tt.existing != nil {
				if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
					t.Fatal(err)
				}
				writeFile(t, path, *tt.existing)
			}
			got, err := pki.EnsureToken(path)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("EnsureToken = %q, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("EnsureToken: %v", err)
			}
			if tt.want != "" {
				if got != tt.want {
					t.Errorf("EnsureToken = %q, want %q", got, tt.want)
				}
				return
			}
			if len(got) != 64 || strings.Trim(got, "0123456789abcdef") != "" {
				t.Errorf("EnsureToken = %q, want 64 hex digits", got)
			}
			if m := mode(t, path); m != 0o600 {
				t.Errorf("token file mode = %o, want 600", m)
			}
			again, err := pki.EnsureToken(path)
			if err != nil || again != got {
				t.Errorf("second EnsureToken = %q, %v; want the same token %q", again, err, got)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func TestEnsureTokenConcurrentCallersAgree(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node-token")
	const n = 16
	tokens := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			tok, err := pki.EnsureToken(path)
			if err != nil {
				t.Errorf("EnsureToken: %v", err)
			}
			tokens[i] = tok
		})
	}
	wg.Wait()
	onDisk, err := pki.EnsureToken(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, tok := range tokens {
		if tok != onDisk {
			t.Errorf("caller %d got %q, file holds %q", i, tok, onDisk)
		}
	}
}
