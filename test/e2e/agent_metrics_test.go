package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/nodeplane/nodeplane/internal/pki"
)

// TestAgentMetricsShowTheLastShutdown scrapes a real agent's /metrics: the
// administrator reads the graceful shutdown gauges (0 before any
// shutdown), the node's own certificate gets 403 and no certificate 401;
// after a SIGTERM shutdown (--shutdown-on-sigterm) the restarted agent
// reports the start and end times recorded in its state file (GNS-8).
func TestAgentMetricsShowTheLastShutdown(t *testing.T) {
	s := startServer(t, serverOptions{})
	cs := s.client()
	ctx := context.Background()
	const node = "metrics-node"
	args := []string{"--shutdown-on-sigterm", "--shutdown-grace-period=2s", "--shutdown-grace-period-critical-pods=1s"}
	a := startAgent(t, s, agentOptions{name: node, config: agentTestConfig, args: args})

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(s.restConfig().CAData)
	adminTLS, err := rest.TLSConfigFor(s.restConfig())
	if err != nil {
		t.Fatal(err)
	}
	scrape := func(clientCert func(*tls.CertificateRequestInfo) (*tls.Certificate, error)) (int, string, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return 0, "", err
		}
		port := n.Status.DaemonEndpoints.KubeletEndpoint.Port
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{
			MinVersion:           tls.VersionTLS12,
			GetClientCertificate: clientCert,
			InsecureSkipVerify:   true, //nolint:gosec // checked by VerifyConnection
			VerifyConnection: func(st tls.ConnectionState) error {
				return pki.VerifyNodeServingCert(st.PeerCertificates, roots, node, time.Now())
			},
		}}}
		resp, err := hc.Get(fmt.Sprintf("https://127.0.0.1:%d/metrics", port))
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	gauge := func(body, name string) (float64, error) {
		m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(body)
		if m == nil {
			return 0, fmt.Errorf("no %s in %q", name, body)
		}
		return strconv.ParseFloat(m[1], 64)
	}
	const startGauge, endGauge = "kubelet_graceful_shutdown_start_time_seconds", "kubelet_graceful_shutdown_end_time_seconds"

	eventually(t, 30*time.Second, "the administrator reads zero gauges", func() error {
		code, body, err := scrape(adminTLS.GetClientCertificate)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("%d %s", code, body)
		}
		for _, g := range []string{startGauge, endGauge} {
			if v, err := gauge(body, g); err != nil || v != 0 {
				return fmt.Errorf("%s = %v, %v; want 0 before any shutdown", g, v, err)
			}
		}
		return nil
	})
	nodeCert := loadKeyPair(t, filepath.Join(a.dataDir, "pki"), "node")
	for _, c := range []struct {
		who  string
		cert func(*tls.CertificateRequestInfo) (*tls.Certificate, error)
		want int
	}{
		{"the node's own certificate", func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &nodeCert, nil }, http.StatusForbidden},
		{"no certificate", func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &tls.Certificate{}, nil }, http.StatusUnauthorized},
	} {
		code, body, err := scrape(c.cert)
		if err != nil || code != c.want {
			t.Errorf("%s: %d %q, %v; want %d", c.who, code, body, err, c.want)
		}
	}

	a.stop() // SIGTERM: a graceful node shutdown, then exit
	b, err := os.ReadFile(filepath.Join(a.dataDir, "graceful_node_shutdown_state"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct{ StartTime, EndTime time.Time }
	if err := json.Unmarshal(b, &st); err != nil || st.StartTime.IsZero() || st.EndTime.IsZero() {
		t.Fatalf("state file %q (%v): want a start and an end", b, err)
	}
	startAgent(t, s, agentOptions{name: node, dataDir: a.dataDir, config: agentTestConfig, args: args})
	// Until the new agent posts its port, scrapes reach the old one's and fail.
	eventually(t, 30*time.Second, "the restarted agent reports the last shutdown", func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := condition(n, corev1.NodeReady); c.Status != corev1.ConditionTrue {
			return fmt.Errorf("Ready = %+v", c)
		}
		code, body, err := scrape(adminTLS.GetClientCertificate)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("%d %s", code, body)
		}
		start, err := gauge(body, startGauge)
		if err != nil {
			return err
		}
		end, err := gauge(body, endGauge)
		if err != nil {
			return err
		}
		if int64(start) != st.StartTime.Unix() || int64(end) != st.EndTime.Unix() {
			return fmt.Errorf("gauges start=%v end=%v, want the state file's %d and %d", start, end, st.StartTime.Unix(), st.EndTime.Unix())
		}
		return nil
	})
}
