package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// cloudSleeperSource is the pods' process in the cloud test: it waits for
// SIGTERM. Built static for the scratch image.
const cloudSleeperSource = `package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	<-ch
}
`

const (
	taintUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"
	taintShutdown      = "node.cloudprovider.kubernetes.io/shutdown"
	taintOutOfService  = "node.kubernetes.io/out-of-service"
	annotationFencedAt = "nodeplane.io/fenced-at"
)

func findTaint(n *corev1.Node, key string) *corev1.Taint {
	for i := range n.Spec.Taints {
		if n.Spec.Taints[i].Key == key {
			return &n.Spec.Taints[i]
		}
	}
	return nil
}

// nodeEvent waits for an event of reason about node from source.
func nodeEvent(t *testing.T, cs kubernetes.Interface, node, reason, source string, timeout time.Duration) corev1.Event {
	t.Helper()
	var got corev1.Event
	eventually(t, timeout, fmt.Sprintf("event %s on node %s", reason, node), func() error {
		list, err := cs.CoreV1().Events("").List(context.Background(), metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.kind": "Node", "involvedObject.name": node, "reason": reason}.String(),
		})
		if err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Source.Component == source {
				got = e
				return nil
			}
		}
		return fmt.Errorf("%d events of that reason, none from %s", len(list.Items), source)
	})
	return got
}

// TestCloudProviderDocker runs the server with --cloud-provider=docker and
// automatic fencing, and two agents in containers started with
// --cloud-provider=external. It checks, in order: a joining node is
// initialised from its container (provider ID, addresses, zone label, the
// uninitialized taint gone, Synced event); `docker stop` gets the node the
// shutdown taint and, after the fencing delay, the out-of-service taint
// (NodeFenced event), and its pods are force-deleted and replaced on the
// other node; `docker start` brings the node back and removes only the
// taints the controllers added; `docker rm -f` deletes the Node
// (DeletingNode event), and the next machine to join gets the deleted node's
// pod range (the node IPAM controller runs with room for two ranges).
func TestCloudProviderDocker(t *testing.T) {
	needDocker(t)
	sleeper, err := testProgram("cloudsleeper", cloudSleeperSource)
	if err != nil {
		t.Fatal(err)
	}
	image := agentImage(t, "cloud", map[string]string{"/sleeper": sleeper})

	const hostName = "host.docker.internal"
	// The cluster CIDR holds exactly two /24 node ranges, so the third node
	// can get one only by reusing the range of the Node deleted in step 4.
	args := append([]string{"--tls-san", hostName, "--leader-elect=false", "--pod-gc-period=1s",
		"--cloud-provider=docker", "--enable-automatic-fencing", "--automatic-fencing-delay=3s",
		"--allocate-node-cidrs", "--cluster-cidr=10.250.0.0/23", "--node-cidr-mask-size=24"}, shortLifecycle...)
	s := startServer(t, serverOptions{args: args})
	s.stop()
	s.args = append(s.args, "--listen", fmt.Sprintf("0.0.0.0:%d", s.port))
	s.start()
	token, err := os.ReadFile(filepath.Join(s.dataDir, "node-token"))
	if err != nil {
		t.Fatal(err)
	}
	cfgDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(cfgDir, "config.yaml"), []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+agentTestConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	suffix := time.Now().UnixNano() % 1e9
	nodeA, nodeB, nodeC := fmt.Sprintf("np-e2e-cloud-a-%d", suffix), fmt.Sprintf("np-e2e-cloud-b-%d", suffix), fmt.Sprintf("np-e2e-cloud-c-%d", suffix)
	zones := map[string]string{nodeA: "zone-a", nodeB: "zone-b", nodeC: "zone-a"}
	startAgent := func(node string) {
		// The container's name is the node name: that is how the docker
		// provider finds a node's container before it has a provider ID.
		docker(t, "run", "-d", "--name", node, "--add-host", hostName+":host-gateway", "-v", cfgDir+":/cfg:ro",
			"--label", "topology.kubernetes.io/zone="+zones[node], "--label", "node.kubernetes.io/instance-type=container",
			image, "agent", "--server", fmt.Sprintf("https://%s:%d", hostName, s.port), "--token", strings.TrimSpace(string(token)),
			"--node-name", node, "--data-dir", "/agent", "--config", "/cfg/config.yaml",
			"--cloud-provider=external", "--shutdown-grace-period=0")
		t.Cleanup(func() {
			if t.Failed() {
				out, _ := exec.Command("docker", "logs", "--tail", "60", node).CombinedOutput()
				t.Logf("agent container %s logs:\n%s", node, out)
			}
			_ = exec.Command("docker", "rm", "-f", node).Run()
		})
	}
	startAgent(nodeA)
	startAgent(nodeB)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log (tail):\n%s", tail(s.logs(), 80))
		}
	})

	ctx := context.Background()
	cs := s.client()
	kubectl := kubectlPath(t)
	waitNodesReady(t, cs, 60*time.Second, nodeA, nodeB)

	// 1. Joining: initialised from the container.
	for _, node := range []string{nodeA, nodeB} {
		id := docker(t, "inspect", node, "--format", "{{.Id}}")
		ip := docker(t, "inspect", node, "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}")
		eventually(t, 30*time.Second, node+" initialised by the cloud node controller", func() error {
			n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if findTaint(n, taintUninitialized) != nil {
				return fmt.Errorf("still tainted %s", taintUninitialized)
			}
			if n.Spec.ProviderID != "docker://"+id {
				return fmt.Errorf("providerID %q, want docker://%s", n.Spec.ProviderID, id)
			}
			if z := n.Labels["topology.kubernetes.io/zone"]; z != zones[node] || n.Labels["failure-domain.beta.kubernetes.io/zone"] != z {
				return fmt.Errorf("zone labels %v", n.Labels)
			}
			if n.Labels["node.kubernetes.io/instance-type"] != "container" || n.Labels["beta.kubernetes.io/instance-type"] != "container" {
				return fmt.Errorf("instance-type labels %v", n.Labels)
			}
			found := false
			for _, a := range n.Status.Addresses {
				found = found || (a.Type == corev1.NodeInternalIP && a.Address == ip)
			}
			if !found {
				return fmt.Errorf("addresses %v lack InternalIP %s", n.Status.Addresses, ip)
			}
			return nil
		})
		nodeEvent(t, cs, node, "Synced", "cloud-node-controller", 10*time.Second)
	}
	// Each node got one of the two pod ranges.
	podCIDRs := map[string]string{}
	eventually(t, 20*time.Second, "both nodes have pod ranges", func() error {
		for _, node := range []string{nodeA, nodeB} {
			n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if n.Spec.PodCIDR == "" {
				return fmt.Errorf("%s has no podCIDR", node)
			}
			podCIDRs[node] = n.Spec.PodCIDR
		}
		if podCIDRs[nodeA] == podCIDRs[nodeB] {
			return fmt.Errorf("both nodes have %s", podCIDRs[nodeA])
		}
		return nil
	})

	// Pods on A only: cordon B while they are placed.
	s.mustKubectl(t, kubectl, "cordon", nodeB)
	s.mustKubectl(t, kubectl, "apply", "-f", writeManifest(t, `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - {name: web, image: /sleeper, resources: {requests: {cpu: 10m}}}
`))
	var onA []corev1.Pod
	eventually(t, 60*time.Second, "2 web pods Running on "+nodeA, func() error {
		list, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return err
		}
		onA = onA[:0]
		for _, p := range list.Items {
			if p.Spec.NodeName == nodeA && p.Status.Phase == corev1.PodRunning {
				onA = append(onA, p)
			}
		}
		if len(onA) != 2 {
			return fmt.Errorf("%d of %d Running on %s", len(onA), len(list.Items), nodeA)
		}
		return nil
	})
	s.mustKubectl(t, kubectl, "uncordon", nodeB)

	// 2. docker stop: shutdown taint, then fencing.
	docker(t, "stop", "-t", "2", nodeA)
	stopped := time.Now()
	eventually(t, 40*time.Second, nodeA+" tainted shutdown and out-of-service", func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, nodeA, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if tt := findTaint(n, taintShutdown); tt == nil || tt.Effect != corev1.TaintEffectNoSchedule {
			return fmt.Errorf("no %s:NoSchedule taint: %v", taintShutdown, n.Spec.Taints)
		}
		tt := findTaint(n, taintOutOfService)
		if tt == nil || tt.Value != "nodeshutdown" || tt.Effect != corev1.TaintEffectNoExecute || n.Annotations[annotationFencedAt] == "" {
			return fmt.Errorf("not fenced: taints %v annotations %v", n.Spec.Taints, n.Annotations)
		}
		return nil
	})
	t.Logf("fenced %s after %v", nodeA, time.Since(stopped).Round(100*time.Millisecond))
	ev := nodeEvent(t, cs, nodeA, "NodeFenced", "cloud-node-lifecycle-controller", 10*time.Second)
	if !strings.Contains(ev.Message, "reports its machine shut down") {
		t.Errorf("NodeFenced message %q does not say why", ev.Message)
	}
	eventually(t, 10*time.Second, "zones view shows the provider state and fencing of "+nodeA, func() error {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/debug/nodeplane/zones").DoRaw(ctx)
		if err != nil {
			return err
		}
		var r struct {
			Cloud []struct{ Node, Provider, Fencing string } `json:"cloud"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			return err
		}
		for _, c := range r.Cloud {
			if c.Node == nodeA && c.Provider == "shutdown" && strings.HasPrefix(c.Fencing, "fenced since") {
				return nil
			}
		}
		return fmt.Errorf("cloud %+v", r.Cloud)
	})
	out, err := exec.Command(binary, "zones", "--kubeconfig", s.kubeconfig()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PROVIDER") || !strings.Contains(string(out), nodeA) {
		t.Errorf("nodeplane zones: %v\n%s", err, out)
	}

	eventually(t, 60*time.Second, "the web pods of "+nodeA+" force-deleted and replaced on "+nodeB, func() error {
		for _, p := range onA {
			_, err := cs.CoreV1().Pods("default").Get(ctx, p.Name, metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("pod %s still there (err %v)", p.Name, err)
			}
		}
		list, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return err
		}
		running := 0
		for _, p := range list.Items {
			if p.Spec.NodeName == nodeB && p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if running != 2 {
			return fmt.Errorf("%d web pods Running on %s", running, nodeB)
		}
		return nil
	})
	t.Logf("pods replaced %v after docker stop", time.Since(stopped).Round(100*time.Millisecond))

	// 3. docker start: Ready again, the controllers' taints go, an
	// operator's taint stays.
	s.mustKubectl(t, kubectl, "taint", "node", nodeA, "example.com/operator=keep:NoSchedule")
	docker(t, "start", nodeA)
	waitNodesReady(t, cs, 60*time.Second, nodeA)
	eventually(t, 20*time.Second, nodeA+" unfenced", func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, nodeA, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if findTaint(n, taintOutOfService) != nil || findTaint(n, taintShutdown) != nil || n.Annotations[annotationFencedAt] != "" {
			return fmt.Errorf("taints %v annotations %v", n.Spec.Taints, n.Annotations)
		}
		if findTaint(n, "example.com/operator") == nil {
			return fmt.Errorf("the operator's taint was removed too: %v", n.Spec.Taints)
		}
		return nil
	})
	nodeEvent(t, cs, nodeA, "NodeUnfenced", "cloud-node-lifecycle-controller", 10*time.Second)

	// 4. docker rm -f: the Node goes.
	docker(t, "rm", "-f", nodeA)
	eventually(t, 40*time.Second, "Node "+nodeA+" deleted", func() error {
		_, err := cs.CoreV1().Nodes().Get(ctx, nodeA, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (err %v)", err)
	})
	ev = nodeEvent(t, cs, nodeA, "DeletingNode", "cloud-node-lifecycle-controller", 10*time.Second)
	if want := "Deleting node " + nodeA + " because it does not exist in the cloud provider"; ev.Message != want {
		t.Errorf("DeletingNode message %q, want %q", ev.Message, want)
	}
	// A new machine joins and gets the deleted node's pod range, the only
	// one free.
	startAgent(nodeC)
	waitNodesReady(t, cs, 60*time.Second, nodeC)
	eventually(t, 20*time.Second, nodeC+" gets "+nodeA+"'s pod range", func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, nodeC, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.Spec.PodCIDR != podCIDRs[nodeA] {
			return fmt.Errorf("podCIDR %q, want %s (freed by %s)", n.Spec.PodCIDR, podCIDRs[nodeA], nodeA)
		}
		if n.Spec.ProviderID == "" {
			return fmt.Errorf("not initialised by the cloud node controller")
		}
		return nil
	})
	// B, running all along, was never touched.
	n, err := cs.CoreV1().Nodes().Get(ctx, nodeB, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if findTaint(n, taintShutdown) != nil || findTaint(n, taintOutOfService) != nil {
		t.Errorf("%s has taints %v", nodeB, n.Spec.Taints)
	}
}

// TestCloudProviderBadInput: a bad --cloud-provider setup stops the server
// at start with a message naming the flag, the line or the field.
func TestCloudProviderBadInput(t *testing.T) {
	dir := t.TempDir()
	dup := filepath.Join(dir, "dup.yaml")
	if err := os.WriteFile(dup, []byte("instances:\n- name: a\n  providerID: static://x\n- name: b\n  providerID: static://x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	syntax := filepath.Join(dir, "syntax.yaml")
	if err := os.WriteFile(syntax, []byte("instances:\n- name: a\n  zone: [z1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"an unknown provider names the flag", []string{"--cloud-provider=aws"}, `--cloud-provider "aws"`},
		{"static without a file names the flag", []string{"--cloud-provider=static"}, "--cloud-provider=static needs --cloud-config"},
		{"a duplicate provider ID names the line and field", []string{"--cloud-provider=static", "--cloud-config", dup}, "line 4: instances[1].providerID: duplicate provider ID"},
		{"a syntax error names the line", []string{"--cloud-provider=static", "--cloud-config", syntax}, "yaml: line"},
		{"fencing without a provider names the flag", []string{"--enable-automatic-fencing"}, "--enable-automatic-fencing needs --cloud-provider"},
		{"an unreachable Docker engine names the flag and the engine", []string{"--cloud-provider=docker"}, "--cloud-provider=docker: docker engine at unix://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, append([]string{"server", "--data-dir", filepath.Join(t.TempDir(), "data"), "--listen", "127.0.0.1:0"}, tt.args...)...)
			if strings.Contains(tt.name, "Docker") {
				cmd.Env = append(os.Environ(), "DOCKER_HOST=unix://"+filepath.Join(dir, "no-engine.sock"))
			}
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("server started:\n%s", out)
			}
			if !strings.Contains(string(out), tt.want) {
				t.Fatalf("output does not contain %q:\n%s", tt.want, tail(string(out), 20))
			}
		})
	}
}
