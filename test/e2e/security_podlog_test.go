package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeplane/nodeplane/internal/pki"
)

// TestSecurityPodLog runs the CVE-2020-8559 attack on pods/log against the
// real server: a node, with its own credentials, points its Node's agent
// endpoint (status.addresses, status.daemonEndpoints) at a server of its
// own. The API server must not follow that server's redirect, must present
// an identity that may only read logs, and must refuse an endpoint that
// does not hold this node's serving certificate. A node's certificate is
// refused by another agent's log endpoint, and logs still flow normally.
func TestSecurityPodLog(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{})
	cs := s.client()
	kubectl := kubectlPath(t)
	evil := startAgent(t, s, agentOptions{name: "evil", config: agentTestConfig})
	victim := startAgent(t, s, agentOptions{name: "victim", config: agentTestConfig})
	for _, name := range []string{"evil", "victim"} {
		eventually(t, 30*time.Second, "node "+name+" publishes its agent port", func() error {
			n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if n.Status.DaemonEndpoints.KubeletEndpoint.Port == 0 {
				return fmt.Errorf("no daemon endpoint yet")
			}
			return nil
		})
	}

	t.Run("logs still flow from a real agent", func(t *testing.T) {
		s.mustKubectl(t, kubectl, "apply", "-f", writeManifest(t, podManifest("greeter", "victim",
			`echo "hello from victim"; i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done`)))
		waitPodPhase(t, cs, "greeter", corev1.PodRunning)
		eventually(t, 15*time.Second, "kubectl logs greeter", func() error {
			out, errOut, err := s.kubectl(t, kubectl, "logs", "greeter")
			if err != nil || out != "hello from victim\n" {
				return fmt.Errorf("logs: %q %q %v", out, errOut, err)
			}
			return nil
		})
	})

	// From here on the evil node acts for itself: its agent is stopped (so
	// that nothing rewrites its status) and the test uses the credentials
	// it got by joining.
	evil.stop()
	evilNode := nodeClient(t, s, evil)
	if _, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bait"},
		Spec:       corev1.PodSpec{NodeName: "evil", Containers: []corev1.Container{{Name: "main", Image: "sh"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pointAgentAt := func(t *testing.T, port int) {
		t.Helper()
		patch := fmt.Sprintf(`{"status":{"addresses":[{"type":"InternalIP","address":"127.0.0.1"}],"daemonEndpoints":{"kubeletEndpoint":{"Port":%d}}}}`, port)
		if _, err := evilNode.CoreV1().Nodes().Patch(ctx, "evil", types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatalf("the node cannot point its own agent endpoint at %d: %v", port, err)
		}
	}
	evilServing := loadKeyPair(t, filepath.Join(evil.dataDir, "pki"), "serving")
	victimServing := loadKeyPair(t, filepath.Join(victim.dataDir, "pki"), "serving")

	t.Run("a redirect from the node's endpoint is not followed", func(t *testing.T) {
		apiNodes := s.restConfig().Host + "/api/v1/nodes"
		for _, tt := range []struct {
			name string
			// target is the Location; "" means a path on the attacker's own
			// server, which records whether it is fetched.
			target string
		}{
			{name: "to the API server's node list", target: apiNodes},
			{name: "to a URL of the attacker's that records the credentials", target: ""},
		} {
			t.Run(tt.name, func(t *testing.T) {
				fake := startFakeAgent(t, evilServing, tt.target)
				pointAgentAt(t, fake.port)
				out, errOut, err := s.kubectl(t, kubectl, "logs", "bait")
				if err == nil {
					t.Fatalf("kubectl logs succeeded through a redirect:\n%s", out)
				}
				if strings.Contains(out, "NodeList") || strings.Contains(out, "victim") {
					t.Errorf("the redirect target's content reached the client:\n%s", out)
				}
				if !strings.Contains(errOut, "does not follow redirects") {
					t.Errorf("kubectl logs error does not say the redirect was refused: %s", errOut)
				}
				// The answer is out; a late fetch would show within this window.
				deadline := time.Now().Add(2 * time.Second)
				for time.Now().Before(deadline) {
					if got := fake.requestsTo(canaryPath); len(got) > 0 {
						t.Fatalf("the API server followed the redirect to the attacker's URL, presenting %v", got)
					}
					time.Sleep(50 * time.Millisecond)
				}
				reqs := fake.requests()
				if len(reqs) != 1 || !strings.HasPrefix(reqs[0].path, "/containerLogs/default/bait/main") {
					t.Fatalf("the endpoint got %+v, want one log request", reqs)
				}
				if c := reqs[0]; c.user != pki.KubeletClientUser || len(c.groups) != 0 {
					t.Errorf("the API server presented user %q groups %v, want %q in no group", c.user, c.groups, pki.KubeletClientUser)
				}
			})
		}
	})

	t.Run("an endpoint without the node's serving certificate is refused", func(t *testing.T) {
		for _, tt := range []struct {
			name string
			cert tls.Certificate
		}{
			{name: "a self-signed certificate naming the node", cert: selfSignedNodeCert(t, "evil")},
			{name: "another node's serving certificate from the cluster CA", cert: victimServing},
		} {
			t.Run(tt.name, func(t *testing.T) {
				fake := startFakeAgent(t, tt.cert, "")
				pointAgentAt(t, fake.port)
				out, errOut, err := s.kubectl(t, kubectl, "logs", "bait")
				if err == nil {
					t.Fatalf("kubectl logs succeeded from an impostor:\n%s", out)
				}
				if !strings.Contains(errOut, "cannot reach the agent of node") || !strings.Contains(errOut, "certificate") {
					t.Errorf("kubectl logs error does not name the certificate: %s", errOut)
				}
				if reqs := fake.requests(); len(reqs) > 0 {
					t.Errorf("the API server sent requests to an impostor: %+v", reqs)
				}
			})
		}
	})

	t.Run("a node's own certificate is refused by another agent's log endpoint", func(t *testing.T) {
		n, err := cs.CoreV1().Nodes().Get(ctx, "victim", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ca, err := os.ReadFile(filepath.Join(victim.dataDir, "pki", "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(ca)
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			MinVersion:         tls.VersionTLS12,
			Certificates:       []tls.Certificate{loadKeyPair(t, filepath.Join(evil.dataDir, "pki"), "node")},
			InsecureSkipVerify: true, //nolint:gosec // checked by VerifyConnection
			VerifyConnection: func(st tls.ConnectionState) error {
				return pki.VerifyNodeServingCert(st.PeerCertificates, roots, "victim", time.Now())
			},
		}}}
		url := fmt.Sprintf("https://127.0.0.1:%d/containerLogs/default/greeter/main", n.Status.DaemonEndpoints.KubeletEndpoint.Port)
		resp, err := client.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("node evil's certificate got %s from node victim's log endpoint, want 403", resp.Status)
		}
	})
}

// canaryPath is where a fake agent's redirect points on its own server.
const canaryPath = "/api/v1/namespaces/kube-system/secrets"

// fakeAgent is a node's own HTTPS server posing as its agent: it records
// every request with the client certificate presented, and answers log
// requests with a 302.
type fakeAgent struct {
	port int
	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct {
	path   string
	user   string
	groups []string
}

// startFakeAgent serves with cert and redirects log requests to target, or
// to its own canaryPath when target is "".
func startFakeAgent(t *testing.T, cert tls.Certificate, target string) *fakeAgent {
	t.Helper()
	f := &fakeAgent{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := seenRequest{path: r.URL.Path}
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			req.user = r.TLS.PeerCertificates[0].Subject.CommonName
			req.groups = r.TLS.PeerCertificates[0].Subject.Organization
		}
		f.mu.Lock()
		f.seen = append(f.seen, req)
		f.mu.Unlock()
		if r.URL.Path == canaryPath {
			_, _ = w.Write([]byte(`{"kind":"SecretList","items":[]}`))
			return
		}
		to := target
		if to == "" {
			to = fmt.Sprintf("https://127.0.0.1:%d%s", f.port, canaryPath)
		}
		http.Redirect(w, r, to, http.StatusFound)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	f.port = srv.Listener.Addr().(*net.TCPAddr).Port
	return f
}

func (f *fakeAgent) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.seen)
}

func (f *fakeAgent) requestsTo(path string) []seenRequest {
	var out []seenRequest
	for _, r := range f.requests() {
		if r.path == path {
			out = append(out, r)
		}
	}
	return out
}

// loadKeyPair reads <dir>/<name>.crt and <name>.key.
func loadKeyPair(t *testing.T, dir, name string) tls.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"))
	if err != nil {
		t.Fatalf("%s key pair of the agent: %v", name, err)
	}
	return pair
}

// selfSignedNodeCert is a serving certificate that looks like node's in
// every way but its issuer.
func selfSignedNodeCert(t *testing.T, node string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: pki.NodeUserPrefix + node, Organization: []string{pki.NodesGroup}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{node, "localhost"},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
