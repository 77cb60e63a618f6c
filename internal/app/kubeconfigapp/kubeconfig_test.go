package kubeconfigapp

import (
	"crypto/x509"
	"encoding/pem"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodeplane/nodeplane/internal/pki"
)

func TestValidate(t *testing.T) {
	ok := Options{DataDir: "/d", User: "alice", Groups: []string{"ops"}, TTL: time.Hour}
	tests := []struct {
		name    string
		mutate  func(*Options)
		wantErr string
	}{
		{"a user with groups and a ttl is valid", func(*Options) {}, ""},
		{"a missing user names --user", func(o *Options) { o.User = "" }, "--user is required"},
		{"a node identity is refused", func(o *Options) { o.User = "system:node:n1" }, "reserved"},
		{"the controller identity is refused", func(o *Options) { o.User = "system:kube-controller-manager" }, "reserved"},
		{"the nodes group is refused", func(o *Options) { o.Groups = []string{"system:nodes"} }, "--group system:nodes is reserved"},
		{"a zero ttl names --ttl", func(o *Options) { o.TTL = 0 }, "--ttl"},
		{"a ttl over a year names --ttl", func(o *Options) { o.TTL = 366 * 24 * time.Hour }, "--ttl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ok
			tt.mutate(&o)
			err := o.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestKubeconfigCarriesACertificateForTheUser(t *testing.T) {
	dir := t.TempDir()
	cluster, err := pki.EnsureCluster(pki.Config{Dir: filepath.Join(dir, pkiDir)})
	if err != nil {
		t.Fatal(err)
	}
	cert, key := cluster.AdminCredentials()
	if err := pki.WriteKubeconfig(filepath.Join(dir, adminKubeconfigFile), "https://127.0.0.1:6443", cluster.CAPEM(), cert, key, ""); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	data, err := Kubeconfig(Options{DataDir: dir, User: "alice", Groups: []string{"ops", "dev"}, TTL: 2 * time.Hour}, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		t.Fatalf("not a kubeconfig: %v\n%s", err, data)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil || cfg.Clusters[ctx.Cluster].Server != "https://127.0.0.1:6443" {
		t.Fatalf("context %+v does not reach the server of admin.kubeconfig", ctx)
	}
	block, _ := pem.Decode(cfg.AuthInfos[ctx.AuthInfo].ClientCertificateData)
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject.CommonName != "alice" || !slices.Equal(slices.Sorted(slices.Values(c.Subject.Organization)), []string{"dev", "ops"}) {
		t.Errorf("subject %v, want CN=alice O=ops,dev", c.Subject)
	}
	if c.NotAfter.After(now.Add(2*time.Hour+time.Minute)) || c.NotAfter.Before(now.Add(time.Hour)) {
		t.Errorf("expires %v, want about 2h after %v", c.NotAfter, now)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: cluster.CertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("not a client certificate of the cluster CA: %v", err)
	}
	if _, err := Kubeconfig(Options{DataDir: t.TempDir(), User: "alice", TTL: time.Hour}, time.Now); err == nil || !strings.Contains(err.Error(), "--data-dir") {
		t.Errorf("a data dir without a CA: got %v, want an error naming --data-dir", err)
	}
}
