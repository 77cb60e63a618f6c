package logserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/agent/logserver"
	"github.com/nodeplane/nodeplane/internal/agent/runtime/fake"
	"github.com/nodeplane/nodeplane/internal/pki"
)

// TestOnlyTheAPIServerAndAdminsReadLogs: the log endpoint admits the API
// server's kubelet-client identity and administrators; a node, even with a
// valid certificate from the cluster CA, gets 403.
func TestOnlyTheAPIServerAndAdminsReadLogs(t *testing.T) {
	cluster, err := pki.EnsureCluster(pki.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	serving := servingPair(t, cluster, "node-a")
	rt := fake.New(fake.Config{NodeName: "node-a"})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p", UID: "uid-p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	if err := rt.SyncPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	srv, err := logserver.Listen(logserver.Config{
		Listen: "127.0.0.1:0", Runtime: rt, ClientCAs: cluster.CertPool(),
		Certificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &serving, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	client := func(cn string, orgs ...string) tls.Certificate {
		certPEM, keyPEM, err := cluster.IssueClientCert(cn, orgs, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return pair
	}
	tests := []struct {
		name     string
		cert     tls.Certificate
		wantCode int
	}{
		{"the API server's kubelet-client identity reads logs", client(pki.KubeletClientUser), http.StatusOK},
		{"an administrator reads logs", client(pki.AdminUser, pki.AdminGroup), http.StatusOK},
		{"the node itself is refused", client("system:node:node-a", "system:nodes"), http.StatusForbidden},
		{"another node is refused", client("system:node:node-b", "system:nodes"), http.StatusForbidden},
		{"a controller is refused", client("system:kube-controller-manager"), http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tlsCfg := cluster.NodeServingClientTLS("node-a")
			tlsCfg.Certificates = []tls.Certificate{tt.cert}
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg, DisableKeepAlives: true}, Timeout: 10 * time.Second}
			resp, err := hc.Get(fmt.Sprintf("https://127.0.0.1:%d/containerLogs/default/p/c", srv.Port()))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantCode {
				t.Errorf("got %s %q, want %d", resp.Status, body, tt.wantCode)
			}
		})
	}
}

func servingPair(t *testing.T, cluster *pki.Cluster, node string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _, err := cluster.SignNodeServingCert(key.Public(), node, nil, time.Hour)
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

// TestMetricsAreForTheAPIServerControllersAndAdmins: /metrics answers the
// kubelet-client identity, the controllers and administrators; a caller
// without a certificate gets 401, a node (itself or another) 403, a
// certificate from another CA no connection, and other verbs 405.
func TestMetricsAreForTheAPIServerControllersAndAdmins(t *testing.T) {
	cluster, err := pki.EnsureCluster(pki.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.EnsureCluster(pki.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	serving := servingPair(t, cluster, "node-a")
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_gauge_seconds", Help: "h"})
	g.Set(42)
	reg.MustRegister(g)
	srv, err := logserver.Listen(logserver.Config{
		Listen: "127.0.0.1:0", Runtime: fake.New(fake.Config{NodeName: "node-a"}), ClientCAs: cluster.CertPool(),
		Certificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &serving, nil },
		Metrics:     promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	client := func(ca *pki.Cluster, cn string, orgs ...string) []tls.Certificate {
		certPEM, keyPEM, err := ca.IssueClientCert(cn, orgs, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{pair}
	}
	tests := []struct {
		name     string
		method   string
		certs    []tls.Certificate
		wantCode int // 0: the handshake fails
	}{
		{"the API server's kubelet-client identity scrapes", "GET", client(cluster, pki.KubeletClientUser), http.StatusOK},
		{"the controllers scrape", "GET", client(cluster, logserver.ControllerUser), http.StatusOK},
		{"an administrator scrapes", "GET", client(cluster, pki.AdminUser, pki.AdminGroup), http.StatusOK},
		{"a caller without a certificate is unauthorized", "GET", nil, http.StatusUnauthorized},
		{"the node itself is refused", "GET", client(cluster, "system:node:node-a", "system:nodes"), http.StatusForbidden},
		{"another node is refused", "GET", client(cluster, "system:node:node-b", "system:nodes"), http.StatusForbidden},
		{"a user with no role is refused", "GET", client(cluster, "mallory", "developers"), http.StatusForbidden},
		{"an admin name from another CA gets no connection", "GET", client(other, pki.AdminUser, pki.AdminGroup), 0},
		{"posting to /metrics is not allowed", "POST", client(cluster, pki.AdminUser, pki.AdminGroup), http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tlsCfg := cluster.NodeServingClientTLS("node-a")
			tlsCfg.Certificates = tt.certs
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg, DisableKeepAlives: true}, Timeout: 10 * time.Second}
			req, _ := http.NewRequest(tt.method, fmt.Sprintf("https://127.0.0.1:%d/metrics", srv.Port()), nil)
			resp, err := hc.Do(req)
			if tt.wantCode == 0 {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("got %s, want the handshake refused", resp.Status)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("got %s %q, want %d", resp.Status, body, tt.wantCode)
			}
			if has := strings.Contains(string(body), "test_gauge_seconds 42"); has != (tt.wantCode == http.StatusOK) {
				t.Errorf("metrics in the answer: %v; body %q", has, body)
			}
		})
	}
	// Logs stay closed to the controllers and to callers without a certificate.
	for _, certs := range [][]tls.Certificate{client(cluster, logserver.ControllerUser), nil} {
		tlsCfg := cluster.NodeServingClientTLS("node-a")
		tlsCfg.Certificates = certs
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg, DisableKeepAlives: true}, Timeout: 10 * time.Second}
		resp, err := hc.Get(fmt.Sprintf("https://127.0.0.1:%d/containerLogs/default/p/c", srv.Port()))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("logs with %d certificate(s): %s, want 401/403", len(certs), resp.Status)
		}
	}
}
