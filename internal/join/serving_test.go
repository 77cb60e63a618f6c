package join_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/internal/join"
	"github.com/nodeplane/nodeplane/internal/pki"
)

// servingLeaf returns the identity's current serving certificate.
func servingLeaf(t *testing.T, id *join.Identity) *x509.Certificate {
	t.Helper()
	c, err := id.ServingCertificate(nil)
	if err != nil {
		t.Fatalf("ServingCertificate: %v", err)
	}
	return c.Leaf
}

func TestEnsureServingGetsTheNodesServingCertificate(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	cfg := f.clientConfig(t, "worker-1")
	id, err := join.Ensure(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.EnsureServing(context.Background(), []string{"10.0.0.7", "worker-1.example.com", "127.0.0.1"}); err != nil {
		t.Fatalf("EnsureServing: %v", err)
	}
	leaf := servingLeaf(t, id)
	if err := pki.VerifyNodeServingCert([]*x509.Certificate{leaf}, f.cluster.CertPool(), "worker-1", f.clock.Now()); err != nil {
		t.Errorf("the serving certificate does not verify for worker-1: %v", err)
	}
	if want := []string{"worker-1", "worker-1.example.com"}; !slices.Equal(leaf.DNSNames, want) {
		t.Errorf("DNS SANs = %v, want %v (loopback is never signed)", leaf.DNSNames, want)
	}
	dir := filepath.Join(cfg.DataDir, join.PKIDir)
	for _, name := range []string{join.ServingCertFile, join.ServingKeyFile} {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s mode = %o, want 600", name, info.Mode().Perm())
		}
	}

	t.Run("a restarted agent reuses it without asking", func(t *testing.T) {
		id2, err := join.Ensure(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := id2.EnsureServing(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		if got := f.count("v1/serving"); got != 1 {
			t.Errorf("serving requests = %d, want 1", got)
		}
		if !servingLeaf(t, id2).Equal(leaf) {
			t.Error("a new serving certificate replaced a fitting one")
		}
	})

	t.Run("an agent that joined before serving certificates gets one without re-joining", func(t *testing.T) {
		for _, name := range []string{join.ServingCertFile, join.ServingKeyFile} {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		noToken := cfg
		noToken.Token = ""
		id3, err := join.Ensure(context.Background(), noToken)
		if err != nil {
			t.Fatal(err)
		}
		if err := id3.EnsureServing(context.Background(), nil); err != nil {
			t.Fatalf("EnsureServing without a join token: %v", err)
		}
		if got := f.count("v1/certificate"); got != 1 {
			t.Errorf("join requests = %d, want the first one only", got)
		}
		if servingLeaf(t, id3).Equal(leaf) {
			t.Error("the serving certificate was not replaced")
		}
	})
}

func TestServingEndpointWantsANodeCertificate(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	key := newKey(t)
	csr := csrFor(t, key, "system:node:worker-2", "system:nodes")
	admin, adminKey := f.cluster.AdminCredentials()
	adminPair := mustPair(t, admin, adminKey)
	nodeCert, nodeKey, err := f.cluster.IssueClientCert("system:node:worker-1", []string{"system:nodes"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	nodePair := mustPair(t, nodeCert, nodeKey)
	url := f.url + join.PathPrefix + "v1/serving"

	tests := []struct {
		name     string
		client   *http.Client
		wantCode int
		wantNode string
	}{
		{name: "without a client certificate it is refused", client: f.httpClient(t), wantCode: http.StatusUnauthorized},
		{name: "an administrator is not a node", client: f.httpClient(t, adminPair), wantCode: http.StatusForbidden},
		{name: "a node gets its own identity whatever its CSR asks for", client: f.httpClient(t, nodePair), wantCode: http.StatusOK, wantNode: "worker-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := post(t, tt.client, url, map[string]string{"csr": csr})
			if code != tt.wantCode {
				t.Fatalf("got %d %s, want %d", code, body, tt.wantCode)
			}
			if tt.wantNode == "" {
				return
			}
			var resp struct{ Certificate string }
			if err := jsonDecode(bytes.NewReader(body), &resp); err != nil {
				t.Fatal(err)
			}
			cert := parseCert(t, resp.Certificate)
			if err := pki.VerifyNodeServingCert([]*x509.Certificate{cert}, f.cluster.CertPool(), tt.wantNode, f.clock.Now()); err != nil {
				t.Errorf("issued certificate: %v", err)
			}
		})
	}
}

// TestRunRenewalRenewsTheServingCertificate: both certificates are renewed
// at 70–90% of their lifetime.
func TestRunRenewalRenewsTheServingCertificate(t *testing.T) {
	f := newFixture(t, fixtureOptions{certTTL: 10 * time.Hour})
	cfg := f.clientConfig(t, "worker-1")
	cfg.Rand = rand.New(rand.NewPCG(1, 2))
	id, err := join.Ensure(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.EnsureServing(context.Background(), []string{"10.0.0.7"}); err != nil {
		t.Fatal(err)
	}
	oldClient, oldServing := id.Certificate(), servingLeaf(t, id)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		id.RunRenewal(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	eventually(t, "RunRenewal to wait for the renewal time", f.clock.HasWaiters)
	f.clock.SetTime(oldServing.NotBefore.Add(oldServing.NotAfter.Sub(oldServing.NotBefore) * 9 / 10))
	eventually(t, "both certificates to be renewed", func() bool {
		c, err := id.ServingCertificate(nil)
		return err == nil && !c.Leaf.Equal(oldServing) && !id.Certificate().Equal(oldClient)
	})
	if got := f.count("v1/serving"); got != 2 {
		t.Errorf("serving requests = %d, want 2", got)
	}
}

func mustPair(t *testing.T, certPEM, keyPEM []byte) tls.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}
