package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestUp runs `nodeplane up` as a new user would and drives it with the
// kubeconfig line it prints: the machine is a Ready node and runs a pod.
func TestUp(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(binary, "up", "--data-dir", filepath.Join(dir, "nodeplane-data"), "--listen", "127.0.0.1:0", "--agent-port", "0", "--node-name", "my-machine")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "up.log")
	logFile, _ := os.Create(logPath)
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
	})

	kubeconfigCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if k, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "export KUBECONFIG="); ok {
				kubeconfigCh <- k
			}
		}
	}()
	var kubeconfig string
	select {
	case kubeconfig = <-kubeconfigCh:
	case err := <-done:
		b, _ := os.ReadFile(logPath)
		t.Fatalf("nodeplane up exited: %v\n%s", err, b)
	case <-time.After(60 * time.Second):
		b, _ := os.ReadFile(logPath)
		t.Fatalf("no export KUBECONFIG line within 60s\n%s", b)
	}
	if !filepath.IsAbs(kubeconfig) {
		t.Errorf("printed kubeconfig path %q is not absolute", kubeconfig)
	}
	s := &serverProc{t: t, dataDir: filepath.Dir(kubeconfig)}
	kubectl := kubectlPath(t)
	eventually(t, 30*time.Second, "this machine Ready", func() error {
		out, _, err := s.kubectl(t, kubectl, "get", "nodes", "--no-headers")
		if err != nil || !strings.Contains(out, "my-machine") || !strings.Contains(out, " Ready ") {
			return fmt.Errorf("kubectl get nodes: %q %v", out, err)
		}
		return nil
	})
	s.mustKubectl(t, kubectl, "apply", "-f", writeManifest(t, podManifest("up-pod", "my-machine", `echo up and running; sleep 30`)))
	eventually(t, 30*time.Second, "pod logs", func() error {
		out, _, err := s.kubectl(t, kubectl, "logs", "up-pod")
		if err != nil || !strings.Contains(out, "up and running") {
			return fmt.Errorf("logs %q %v", out, err)
		}
		return nil
	})
	s.mustKubectl(t, kubectl, "delete", "pod", "up-pod", "--timeout=60s")
}

// TestSim runs `nodeplane sim` against a server: the nodes register in their
// zones and renew their leases, a pod bound to a simulated node goes
// Running, and pausing a zone stops exactly that zone's leases until it is
// resumed.
func TestSim(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{})
	cs := s.client()
	cmd := exec.Command(binary, "sim", "--server", s.restConfig().Host, "--token-file", filepath.Join(s.dataDir, "node-token"),
		"--nodes", "30", "--zones", "a,b,c", "--control", "127.0.0.1:0", "--node-lease-duration", "4s",
		"--node-status-update-frequency", "1s", "--report-interval", "0", "--stdin=false")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	lines := bufio.NewScanner(stdout)
	var control string
	for control == "" && lines.Scan() {
		if u, ok := strings.CutPrefix(lines.Text(), "control endpoint: "); ok {
			control = strings.TrimSuffix(u, "/status")
		}
	}
	if control == "" {
		t.Fatalf("no control endpoint printed; stderr:\n%s", stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()

	eventually(t, 60*time.Second, "30 Ready simulated nodes", func() error {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ready := 0
		for i := range nodes.Items {
			if condition(&nodes.Items[i], corev1.NodeReady).Status == corev1.ConditionTrue {
				ready++
			}
		}
		if ready != 30 {
			return fmt.Errorf("%d ready", ready)
		}
		return nil
	})
	zoneB, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labels.Set{"topology.kubernetes.io/zone": "b"}.String()})
	if err != nil || len(zoneB.Items) != 10 {
		t.Fatalf("zone b has %d nodes (err %v), want 10", len(zoneB.Items), err)
	}

	t.Run("a pod bound to a simulated node goes Running", func(t *testing.T) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "on-sim"}, Spec: corev1.PodSpec{
			NodeName: "sim-00", Containers: []corev1.Container{{Name: "c", Image: "sleep"}}}}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPodPhase(t, cs, "on-sim", corev1.PodRunning)
	})

	t.Run("pausing a zone stops only its leases until resumed", func(t *testing.T) {
		post(t, control+"/pause?zone=b")
		// Renewals in flight when the pause landed have landed once every
		// running node has renewed since.
		paused := renewals(t, s)
		eventually(t, 10*time.Second, "every running node renews once after the pause", func() error {
			for name, rt := range renewals(t, s) {
				if nodeZone(t, s, name) != "b" && !rt.After(paused[name]) {
					return fmt.Errorf("node %s not renewed since the pause", name)
				}
			}
			return nil
		})
		before := renewals(t, s)
		after := before
		never(t, 3*time.Second, "a paused node renews (three renew intervals)", func() error {
			after = renewals(t, s)
			for name, rt := range after {
				if nodeZone(t, s, name) == "b" && !rt.Equal(before[name]) {
					return fmt.Errorf("paused node %s renewed: %v → %v", name, before[name], rt)
				}
			}
			return nil
		})
		for name, rt := range after {
			if zone := nodeZone(t, s, name); zone != "b" && !rt.After(before[name]) {
				t.Errorf("running node %s (zone %s) did not renew in 3s", name, zone)
			}
		}
		var st struct {
			Paused []string `json:"paused"`
		}
		getJSON(t, control+"/status", &st)
		if len(st.Paused) != 10 {
			t.Errorf("status lists %d paused nodes, want 10", len(st.Paused))
		}
		post(t, control+"/resume?zone=b")
		eventually(t, 10*time.Second, "every resumed node renews", func() error {
			for name, rt := range renewals(t, s) {
				if nodeZone(t, s, name) == "b" && !rt.After(after[name]) {
					return fmt.Errorf("node %s did not renew after resume", name)
				}
			}
			return nil
		})
	})
}

var zoneCache = map[string]string{}

func nodeZone(t *testing.T, s *serverProc, name string) string {
	if z, ok := zoneCache[name]; ok {
		return z
	}
	n, err := s.client().CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	zoneCache[name] = n.Labels["topology.kubernetes.io/zone"]
	return zoneCache[name]
}

func renewals(t *testing.T, s *serverProc) map[string]time.Time {
	t.Helper()
	leases, err := s.client().CoordinationV1().Leases("kube-node-lease").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Time{}
	for _, l := range leases.Items {
		out[l.Name] = l.Spec.RenewTime.Time
	}
	return out
}

func post(t *testing.T, u string) {
	t.Helper()
	resp, err := http.Post(u, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %s %s", u, resp.Status, b)
	}
}

func getJSON(t *testing.T, u string, into any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatal(err)
	}
}
