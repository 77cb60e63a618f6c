package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// dockerImage builds (once per test binary) an image FROM scratch holding
// only the static nodeplane binary.
var dockerImage = sync.OnceValues(func() (string, error) {
	if _, err := exec.LookPath("docker"); err != nil {
		return "", fmt.Errorf("docker CLI: %w", err)
	}
	dir, err := os.MkdirTemp("", "nodeplane-image")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	data, err := os.ReadFile(binary)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "nodeplane"), data, 0o755); err != nil {
		return "", err
	}
	dockerfile := "FROM scratch\nCOPY nodeplane /nodeplane\nENTRYPOINT [\"/nodeplane\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return "", err
	}
	const tag = "nodeplane-e2e:latest"
	if out, err := exec.Command("docker", "build", "-q", "-t", tag, dir).CombinedOutput(); err != nil {
		return "", fmt.Errorf("docker build: %v\n%s", err, out)
	}
	return tag, nil
})

func docker(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("docker %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return strings.TrimSpace(out.String())
}

// TestAgentInContainer runs a real agent in a container with CPU and memory
// limits on Docker's bridge network, a separate host from the server's point
// of view: it joins over the network, reports the container's cgroup limits
// as capacity, and when the container is paused its lease stops renewing
// until it is unpaused.
func TestAgentInContainer(t *testing.T) {
	needDocker(t)
	image, err := dockerImage()
	if err != nil {
		t.Fatalf("this test needs a Docker engine (the CI machine has one): %v", err)
	}
	// The container reaches the host (and the server) as host.docker.internal.
	const hostName = "host.docker.internal"
	s := startServer(t, serverOptions{args: []string{"--tls-san", hostName}})
	// The server listens on 127.0.0.1; a container reaches the host through
	// the bridge, so restart it on all addresses.
	s.stop()
	s.args = append(s.args, "--listen", fmt.Sprintf("0.0.0.0:%d", s.port))
	s.start()
	token, err := os.ReadFile(filepath.Join(s.dataDir, "node-token"))
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("np-e2e-%d", time.Now().UnixNano()%1e9)
	docker(t, "run", "-d", "--name", name, "--cpus", "1.5", "--memory", "512m", "--add-host", hostName+":host-gateway", image,
		"agent", "--server", fmt.Sprintf("https://%s:%d", hostName, s.port), "--token", strings.TrimSpace(string(token)),
		"--node-name", "in-docker", "--data-dir", "/agent")
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("docker", "logs", name).CombinedOutput()
			t.Logf("agent container logs:\n%s", out)
		}
		_ = exec.Command("docker", "rm", "-f", name).Run()
	})

	ctx := context.Background()
	cs := s.client()
	var node *corev1.Node
	eventually(t, 60*time.Second, "containerised node Ready", func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, "in-docker", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if condition(n, corev1.NodeReady).Status != corev1.ConditionTrue {
			return fmt.Errorf("Ready = %+v", condition(n, corev1.NodeReady))
		}
		node = n
		return nil
	})
	if got := node.Status.Capacity[corev1.ResourceCPU]; got.Cmp(resource.MustParse("1500m")) != 0 {
		t.Errorf("cpu capacity %s, want the container's 1500m", got.String())
	}
	if got := node.Status.Capacity[corev1.ResourceMemory]; got.Cmp(resource.MustParse("512Mi")) != 0 {
		t.Errorf("memory capacity %s, want the container's 512Mi", got.String())
	}
	ip := ""
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ip = a.Address
		}
	}
	if want := docker(t, "inspect", name, "--format", "{{.NetworkSettings.IPAddress}}"); ip != want {
		t.Errorf("InternalIP %q, want the container's address %q", ip, want)
	}

	renewTimes(t, cs, "in-docker", 1, 30*time.Second)
	docker(t, "pause", name)
	l1, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, "in-docker", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	never(t, 12*time.Second, "lease renewed while the container was paused (longer than the default 10 s renew interval)", func() error {
		l2, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, "in-docker", metav1.GetOptions{})
		if err == nil && !l1.Spec.RenewTime.Equal(l2.Spec.RenewTime) {
			return fmt.Errorf("%v → %v", l1.Spec.RenewTime, l2.Spec.RenewTime)
		}
		return nil
	})
	docker(t, "unpause", name)
	renewTimes(t, cs, "in-docker", 1, 30*time.Second)
}
