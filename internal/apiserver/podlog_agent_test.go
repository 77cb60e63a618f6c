package apiserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/internal/pki"
)

// servingPair has cluster sign node's agent serving certificate.
func servingPair(t *testing.T, cluster *pki.Cluster, node string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _, err := cluster.SignNodeServingCert(key.Public(), node, []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// agentWithCert serves h over TLS with cert.
func agentWithCert(t *testing.T, cert tls.Certificate, h http.HandlerFunc) *fakeAgent {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return &fakeAgent{srv: srv}
}

// TestPodLogReachesOnlyTheNodesOwnAgent: with the node client the server is
// wired with (one that checks the agent's serving certificate), pods/log
// reads from the agent holding the node's serving certificate, and refuses
// one holding another node's certificate or one from another CA. A redirect
// from an agent is never followed, even by a client that would follow it.
func TestPodLogReachesOnlyTheNodesOwnAgent(t *testing.T) {
	cluster, err := pki.EnsureCluster(pki.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	otherCA, err := pki.EnsureCluster(pki.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// The redirect target holds the redirecting node's certificate, so
	// only the redirect policy keeps it from being fetched.
	var canaryHits atomic.Int32
	canary := agentWithCert(t, servingPair(t, cluster, "redirector"), func(w http.ResponseWriter, _ *http.Request) {
		canaryHits.Add(1)
		_, _ = w.Write([]byte("secret stuff"))
	})
	logs := func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("log of " + r.URL.Path)) }
	agents := map[string]*fakeAgent{
		"honest":   agentWithCert(t, servingPair(t, cluster, "honest"), logs),
		"impostor": agentWithCert(t, servingPair(t, cluster, "honest"), logs),
		"foreign":  agentWithCert(t, servingPair(t, otherCA, "foreign"), logs),
		"redirector": agentWithCert(t, servingPair(t, cluster, "redirector"), func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, canary.srv.URL+"/api/v1/nodes", http.StatusFound)
		}),
	}
	// Like the server's own client, minus the client certificate; this one
	// would follow redirects, so pods/log must refuse them itself.
	nodeClient := func(node string) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: cluster.NodeServingClientTLS(node), DisableKeepAlives: true}}
	}
	backing := newStorage(t)
	_, h := newTestServer(t, Config{Storage: backing, NodeClient: nodeClient})
	const pods = "/api/v1/namespaces/default/pods"
	for node, a := range agents {
		mustDo(t, h, admin, http.MethodPost, "/api/v1/nodes", agentNode(node, a.port(t)), http.StatusCreated)
		mustDo(t, h, admin, http.MethodPost, pods, testPod("on-"+node, node), http.StatusCreated)
	}

	tests := []struct {
		name     string
		node     string
		wantCode int
		// wantBody is the log for a 200, else a substring of the Status message.
		wantBody string
	}{
		{"the agent holding the node's serving certificate is read", "honest", 200, "log of /containerLogs/default/on-honest/c"},
		{"an agent holding another node's certificate is refused", "impostor", 503, `want system:node:impostor`},
		{"an agent with a certificate from another CA is refused", "foreign", 503, "not a serving certificate of the cluster CA"},
		{"a redirect is not followed", "redirector", 502, "does not follow redirects"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := do(t, h, admin, http.MethodGet, pods+"/on-"+tt.node+"/log", nil)
			if resp.code != tt.wantCode {
				t.Fatalf("got %d %s, want %d", resp.code, resp.body, tt.wantCode)
			}
			if tt.wantCode == 200 {
				if string(resp.body) != tt.wantBody {
					t.Errorf("got log %q, want %q", resp.body, tt.wantBody)
				}
				return
			}
			if st := resp.status(t); !strings.Contains(st.Message, tt.wantBody) {
				t.Errorf("got %q, want it to contain %q", st.Message, tt.wantBody)
			}
		})
	}
	if n := canaryHits.Load(); n != 0 {
		t.Errorf("the redirect target was fetched %d times", n)
	}
}
