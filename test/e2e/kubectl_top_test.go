package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/pki"
)

// TestKubectlTop runs `kubectl top node` and `kubectl top pod` (every
// kubectl version available) against a server scraping one real agent
// every second: the node shows non-zero CPU and memory, a pod that burns
// CPU shows more than one that sleeps, a label selector picks pods, a user
// without a grant gets 403 until bound to view, and the agent's
// /metrics/resource refuses a node's own certificate (403) and a caller
// without one (401).
func TestKubectlTop(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{args: []string{"--metric-resolution=1s"}})
	cs := s.client()
	admin := kubectlPath(t)
	agent := startAgent(t, s, agentOptions{name: "top1", config: agentTestConfig})
	waitNodesReady(t, cs, 60*time.Second, "top1")

	s.mustKubectl(t, admin, "apply", "-f", writeManifest(t, podManifest("burner", "top1", `while :; do :; done`)))
	s.mustKubectl(t, admin, "apply", "-f", writeManifest(t, podManifest("sleeper", "top1", `exec sleep 3600`)))
	waitPodPhase(t, cs, "burner", corev1.PodRunning)
	waitPodPhase(t, cs, "sleeper", corev1.PodRunning)
	s.mustKubectl(t, admin, "label", "pod", "burner", "app=burn")

	out, err := exec.Command(binary, "kubeconfig", "--data-dir", s.dataDir, "--user", "bob", "--group", "watchers", "--ttl", "1h").Output()
	if err != nil {
		t.Fatalf("nodeplane kubeconfig: %v", err)
	}
	bobCfg := filepath.Join(t.TempDir(), "bob.kubeconfig")
	if err := os.WriteFile(bobCfg, out, 0o600); err != nil {
		t.Fatal(err)
	}

	for version, k := range kubectlVersions(t) {
		t.Run("kubectl "+version, func(t *testing.T) {
			eventually(t, 30*time.Second, "kubectl top node shows top1 with CPU and memory", func() error {
				out, errOut, err := s.kubectl(t, k, "top", "node")
				if err != nil {
					return fmt.Errorf("%v: %s", err, errOut)
				}
				m := regexp.MustCompile(`(?m)^top1\s+(\d+)m\s+\d+%\s+(\d+)Mi\s+\d+%\s*$`).FindStringSubmatch(out)
				if m == nil {
					return fmt.Errorf("no row for top1 in:\n%s", out)
				}
				if m[1] == "0" || m[2] == "0" {
					return fmt.Errorf("top1 uses %sm CPU and %sMi memory, want both non-zero:\n%s", m[1], m[2], out)
				}
				t.Logf("kubectl top node:\n%s", out)
				return nil
			})
			eventually(t, 30*time.Second, "kubectl top pod shows burner above sleeper", func() error {
				out, errOut, err := s.kubectl(t, k, "top", "pod")
				if err != nil {
					return fmt.Errorf("%v: %s", err, errOut)
				}
				burn, sleep := podCPU(out, "burner"), podCPU(out, "sleeper")
				if burn < 0 || sleep < 0 {
					return fmt.Errorf("burner or sleeper missing:\n%s", out)
				}
				if burn < 100 || burn <= sleep {
					return fmt.Errorf("burner %dm, sleeper %dm: want burner ≥ 100m and above sleeper:\n%s", burn, sleep, out)
				}
				t.Logf("kubectl top pod:\n%s", out)
				return nil
			})
			out := s.mustKubectl(t, k, "top", "pod", "-l", "app=burn", "--containers")
			if podCPU(out, "sleeper") >= 0 || !regexpLine(out, `^burner\s+main\s+\d+m\s+\d+Mi$`) {
				t.Errorf("top pod -l app=burn --containers:\n%s", out)
			}

			_, errOut, err := userKubectl(t, k, bobCfg, "top", "node")
			if err == nil || !strings.Contains(errOut, `User "bob" cannot list resource "nodes" in API group "metrics.k8s.io"`) {
				t.Errorf("top node without a grant: %v %s, want forbidden", err, errOut)
			}
			_, errOut, err = userKubectl(t, k, bobCfg, "top", "pod")
			if err == nil || !strings.Contains(errOut, `User "bob" cannot list resource "pods" in API group "metrics.k8s.io"`) {
				t.Errorf("top pod without a grant: %v %s, want forbidden", err, errOut)
			}
			s.mustKubectl(t, admin, "create", "clusterrolebinding", "watchers-view", "--clusterrole=view", "--group=watchers")
			t.Cleanup(func() {
				_, _, _ = s.kubectl(t, admin, "delete", "clusterrolebinding", "watchers-view", "--ignore-not-found")
			})
			eventually(t, 10*time.Second, "bob runs kubectl top pod with view", func() error {
				out, errOut, err := userKubectl(t, k, bobCfg, "top", "pod")
				if err != nil || podCPU(out, "burner") < 0 {
					return fmt.Errorf("%v: %s%s", err, out, errOut)
				}
				return nil
			})
			s.mustKubectl(t, admin, "delete", "clusterrolebinding", "watchers-view")
		})
	}

	t.Run("the agent's /metrics/resource is only for the API server", func(t *testing.T) {
		n, err := cs.CoreV1().Nodes().Get(ctx, "top1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ca, err := os.ReadFile(filepath.Join(agent.dataDir, "pki", "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(ca)
		url := fmt.Sprintf("https://127.0.0.1:%d/metrics/resource", n.Status.DaemonEndpoints.KubeletEndpoint.Port)
		for _, c := range []struct {
			name  string
			certs []tls.Certificate
			want  int
		}{
			{"the node's own certificate", []tls.Certificate{loadKeyPair(t, filepath.Join(agent.dataDir, "pki"), "node")}, http.StatusForbidden},
			{"no client certificate", nil, http.StatusUnauthorized},
		} {
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
				MinVersion:         tls.VersionTLS12,
				Certificates:       c.certs,
				InsecureSkipVerify: true, //nolint:gosec // checked by VerifyConnection
				VerifyConnection: func(st tls.ConnectionState) error {
					return pki.VerifyNodeServingCert(st.PeerCertificates, roots, "top1", time.Now())
				},
			}}}
			resp, err := client.Get(url)
			if err != nil {
				t.Fatalf("%s: GET %s: %v", c.name, url, err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("%s: GET /metrics/resource answered %s, want %d", c.name, resp.Status, c.want)
			}
		}
	})
}

// podCPU is the CPU in millicores of pod's row in `kubectl top pod`
// output, or -1 when there is no such row.
func podCPU(out, pod string) int {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(pod) + `\s+(\d+)m\s`).FindStringSubmatch(out)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
