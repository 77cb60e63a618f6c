package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// leftovers lists the containers and networks Docker still has with the
// cluster's label.
func leftovers(t *testing.T, name string) string {
	t.Helper()
	filter := "label=io.nodeplane.cluster=" + name
	return strings.TrimSpace(docker(t, "ps", "-a", "-q", "--filter", filter) + " " + docker(t, "network", "ls", "-q", "--filter", filter))
}

// TestClusterInDocker is the laptop cluster end to end: `nodeplane cluster
// create --nodes 3 --zones a,b,c` gives 3 Ready Nodes labelled with their
// zones, a Deployment of `sh -c 'while true; do sleep 1; done'` (BusyBox in
// the node image) runs on them, `nodeplane node kill` makes a Node Unknown
// and its pod is replaced on a live node, and `nodeplane cluster delete`
// leaves no container or network (and a second delete is a no-op).
func TestClusterInDocker(t *testing.T) {
	needDocker(t)
	if _, err := os.Stat("/bin/busybox"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("/bin/busybox missing (.ci/run installs busybox-static): %v", err)
		}
		t.Skipf("needs Debian's busybox-static (/bin/busybox): %v", err)
	}
	name := fmt.Sprintf("np-e2e-cl%d", time.Now().UnixNano()%1e6)
	kubeconfig := filepath.Join(t.TempDir(), "admin.kubeconfig")
	t.Cleanup(func() {
		if t.Failed() {
			for _, c := range []string{name + "-server", name + "-node-1"} {
				out, _ := exec.Command("docker", "logs", "--tail", "40", c).CombinedOutput()
				t.Logf("%s logs:\n%s", c, out)
			}
		}
		_ = exec.Command(binary, "cluster", "delete", "--name", name).Run()
	})
	res := runNodeplaneCmd(t, 4*time.Minute, "cluster", "create", "--name", name, "--nodes", "3", "--zones", "a,b,c",
		"--binary", binary, "--kubeconfig", kubeconfig,
		// The agents renew their leases every 10 s (the default 40 s lease):
		// a grace period shorter than that marks live nodes Unknown between
		// renewals, and when every zone's nodes are Unknown at once nothing
		// is tainted, so the killed node's pod never moves.
		"--server-arg=--node-monitor-grace-period=20s", "--server-arg=--node-monitor-period=1s",
		"--server-arg=--default-unreachable-toleration-seconds=5")
	if res.code != 0 {
		t.Fatalf("cluster create: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if !strings.Contains(res.stdout, "export KUBECONFIG="+kubeconfig) {
		t.Errorf("cluster create did not tell the user where the kubeconfig is:\n%s", res.stdout)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// What the user sees with kubectl: 3 Ready nodes and their zones.
	out, errOut, err := kubectlAt(kubeconfig, "get", "nodes", "--no-headers", "-L", "topology.kubernetes.io/zone")
	if err != nil {
		t.Fatalf("kubectl get nodes: %v\n%s", err, errOut)
	}
	want := map[string]string{name + "-node-1": "a", name + "-node-2": "b", name + "-node-3": "c"}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("kubectl get nodes:\n%s\nwant 3 nodes", out)
	}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 6 || f[1] != "Ready" || want[f[0]] != f[len(f)-1] {
			t.Errorf("kubectl get nodes line %q: want one of %v, Ready, with its zone", l, want)
		}
	}

	// A Deployment of BusyBox's sh and sleep runs, one pod per zone.
	if _, errOut, err := kubectlAt(kubeconfig, "create", "deployment", "spin", "--image=sh", "--replicas=3", "--",
		"sh", "-c", "while true; do sleep 1; done"); err != nil {
		t.Fatalf("kubectl create deployment: %v\n%s", err, errOut)
	}
	var victim string
	eventually(t, 90*time.Second, "3 spin pods Running", func() error {
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=spin"})
		if err != nil {
			return err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
				victim = p.Spec.NodeName
			}
		}
		if running != 3 {
			return fmt.Errorf("%d of 3 Running", running)
		}
		return nil
	})

	// The machine vanishes: its Node goes Unknown and its pod moves.
	if res := runNodeplaneCmd(t, time.Minute, "node", "kill", "--cluster", name, victim); res.code != 0 {
		t.Fatalf("node kill: exit %d\n%s", res.code, res.stderr)
	}
	eventually(t, 60*time.Second, "killed node "+victim+" Unknown", func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := condition(n, corev1.NodeReady); c.Status != corev1.ConditionUnknown {
			return fmt.Errorf("Ready = %s (%s)", c.Status, c.Reason)
		}
		return nil
	})
	eventually(t, 90*time.Second, "3 spin pods Running on the live nodes", func() error {
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=spin"})
		if err != nil {
			return err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Spec.NodeName != victim {
				running++
			}
		}
		if running != 3 {
			return fmt.Errorf("%d of 3 Running away from %s", running, victim)
		}
		return nil
	})

	if res := runNodeplaneCmd(t, 2*time.Minute, "cluster", "delete", "--name", name); res.code != 0 {
		t.Fatalf("cluster delete: exit %d\n%s", res.code, res.stderr)
	}
	if left := leftovers(t, name); left != "" {
		t.Errorf("after cluster delete, Docker still has: %s", left)
	}
	if _, err := os.Stat(kubeconfig); err == nil {
		t.Error("cluster delete left the kubeconfig it wrote")
	}
	res = runNodeplaneCmd(t, time.Minute, "cluster", "delete", "--name", name)
	if res.code != 0 || !strings.Contains(res.stdout, "nothing to delete") {
		t.Errorf("second cluster delete: exit %d, stdout %q; want a no-op", res.code, res.stdout)
	}
}

// TestClusterBadInput: the cluster commands name the problem and create
// nothing.
func TestClusterBadInput(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  []string
		args []string
		want string
		// engine: the case needs a running Docker engine.
		engine bool
	}{
		{"zero nodes is refused naming --nodes", nil, []string{"cluster", "create", "--name", "np-e2e-bad", "--nodes", "0"}, "--nodes 0: a cluster needs at least 1 node", false},
		{"a zone given twice is refused naming --zones", nil, []string{"cluster", "create", "--name", "np-e2e-bad", "--zones", "a,a"}, `--zones: zone "a" given twice`, false},
		{"an unreachable Docker engine is named", []string{"DOCKER_HOST=unix:///nonexistent/docker.sock"}, []string{"cluster", "create", "--name", "np-e2e-bad", "--nodes", "1"}, "the Docker engine is not reachable", false},
		{"delete with an unreachable Docker engine names it", []string{"DOCKER_HOST=unix:///nonexistent/docker.sock"}, []string{"cluster", "delete", "--name", "np-e2e-bad"}, "the Docker engine is not reachable", false},
		{"a node that does not exist is named", nil, []string{"node", "kill", "--cluster", "np-e2e-bad", "np-e2e-bad-node-9"}, `no node "np-e2e-bad-node-9" in cluster "np-e2e-bad"`, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.engine {
				needDocker(t)
			}
			cmd := exec.Command(binary, tt.args...)
			cmd.Env = append(os.Environ(), tt.env...)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tt.want) {
				t.Errorf("nodeplane %s: %v\n%s\nwant a failure containing %q", strings.Join(tt.args, " "), err, out, tt.want)
			}
		})
	}
}

// kubectlAt runs the kubectl on PATH against the kubeconfig at path.
func kubectlAt(path string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", path}, args...)...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}
