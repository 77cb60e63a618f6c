package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// Short knobs so the test sees several renewals and status passes quickly:
// lease 4 s → renewed every 1 s.
const agentTestConfig = `nodeLeaseDurationSeconds: 4
nodeStatusUpdateFrequency: 1s
nodeStatusReportFrequency: 1m
systemReserved:
  cpu: 100m
  memory: 100Mi
`

// TestAgents runs a server and three real agents (separate data dirs, one
// zone each) and checks what a user sees with kubectl: Ready nodes with
// their labels, capacity and allocatable; leases renewed at the configured
// interval; a bound pod running as a process, its output in kubectl logs,
// SIGTERM on delete; a pod that does not fit rejected with the kubelet's
// reason; and kill -9 of an agent stopping its lease, then a restart that
// keeps the node and re-adopts its pod.
func TestAgents(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{})
	cs := s.client()
	kubectl := kubectlPath(t)
	zones := map[string]string{"n1": "zone-a", "n2": "zone-b", "n3": "zone-c"}
	agents := map[string]*agentProc{}
	for _, name := range []string{"n1", "n2", "n3"} {
		agents[name] = startAgent(t, s, agentOptions{name: name, config: agentTestConfig,
			args: []string{"--node-labels", "topology.kubernetes.io/zone=" + zones[name] + ",rack=r1"}})
	}

	eventually(t, 30*time.Second, "three Ready nodes", func() error {
		out, _, err := s.kubectl(t, kubectl, "get", "nodes", "--no-headers")
		if err != nil {
			return err
		}
		if n := strings.Count(out, " Ready "); n != 3 {
			return fmt.Errorf("kubectl get nodes:\n%s", out)
		}
		return nil
	})

	t.Run("nodes carry their labels, capacity and allocatable", func(t *testing.T) {
		out := s.mustKubectl(t, kubectl, "get", "nodes", "-L", "topology.kubernetes.io/zone", "--no-headers")
		for name, zone := range zones {
			if !strings.Contains(out, zone) {
				t.Errorf("zone %s of %s missing from:\n%s", zone, name, out)
			}
		}
		n, err := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{"kubernetes.io/hostname": "", "kubernetes.io/os": "linux", "beta.kubernetes.io/os": "linux",
			"kubernetes.io/arch": "", "topology.kubernetes.io/zone": "zone-a", "rack": "r1"} {
			got, ok := n.Labels[k]
			if !ok || (v != "" && got != v) {
				t.Errorf("label %s = %q (present %v), want %q", k, got, ok, v)
			}
		}
		capCPU, capMem := n.Status.Capacity[corev1.ResourceCPU], n.Status.Capacity[corev1.ResourceMemory]
		if capCPU.IsZero() || capMem.IsZero() || n.Status.Capacity.Pods().Value() != 110 {
			t.Fatalf("capacity = %v", n.Status.Capacity)
		}
		wantCPU := capCPU.DeepCopy()
		wantCPU.Sub(resource.MustParse("100m"))
		wantMem := capMem.DeepCopy()
		wantMem.Sub(resource.MustParse("200Mi")) // systemReserved 100Mi + eviction threshold 100Mi
		allocCPU, allocMem := n.Status.Allocatable[corev1.ResourceCPU], n.Status.Allocatable[corev1.ResourceMemory]
		if allocCPU.Cmp(wantCPU) != 0 || allocMem.Cmp(wantMem) != 0 {
			t.Errorf("allocatable cpu=%s memory=%s, want %s and %s (capacity %s, %s)", allocCPU.String(), allocMem.String(), wantCPU.String(), wantMem.String(), capCPU.String(), capMem.String())
		}
		if n.Status.NodeInfo.BootID == "" || n.Status.NodeInfo.KernelVersion == "" || n.Status.NodeInfo.KubeletVersion == "" {
			t.Errorf("nodeInfo = %+v", n.Status.NodeInfo)
		}
		if n.Status.DaemonEndpoints.KubeletEndpoint.Port == 0 {
			t.Errorf("no daemon endpoint port")
		}
		ready := condition(n, corev1.NodeReady)
		if ready.Reason != "KubeletReady" || ready.Message != "kubelet is posting ready status" {
			t.Errorf("Ready = %+v", ready)
		}
	})

	t.Run("leases renew at a quarter of their duration", func(t *testing.T) {
		l, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, "n2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if *l.Spec.HolderIdentity != "n2" || *l.Spec.LeaseDurationSeconds != 4 || len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" {
			t.Fatalf("lease = %+v %+v", l.ObjectMeta, l.Spec)
		}
		times := renewTimes(t, cs, "n2", 6, 15*time.Second)
		for i := 1; i < len(times); i++ {
			gap := times[i].Sub(times[i-1])
			// 1 s interval + up to 4% jitter; allow scheduling slack.
			if gap < 900*time.Millisecond || gap > 1600*time.Millisecond {
				t.Errorf("renewal %d came %v after the previous, want about 1s (renewTimes %v)", i, gap, times)
			}
		}
	})

	markerDir, err := os.MkdirTemp("", "marker")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(markerDir) })
	marker := filepath.Join(markerDir, "term-n1")
	t.Run("a bound pod runs, logs, and gets SIGTERM on delete", func(t *testing.T) {
		s.mustKubectl(t, kubectl, "apply", "-f", writeManifest(t, podManifest("hello", "n1",
			`echo "hello from the pod"; trap 'echo TERM > `+marker+`; exit 0' TERM; i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done`)))
		waitPodPhase(t, cs, "hello", corev1.PodRunning)
		eventually(t, 15*time.Second, "kubectl logs", func() error {
			out, errOut, err := s.kubectl(t, kubectl, "logs", "hello")
			if err != nil || !strings.Contains(out, "hello from the pod") {
				return fmt.Errorf("logs: %q %q %v", out, errOut, err)
			}
			return nil
		})
		p, _ := cs.CoreV1().Pods("default").Get(ctx, "hello", metav1.GetOptions{})
		for _, c := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			if podCondition(p, c) != corev1.ConditionTrue {
				t.Errorf("pod condition %s = %q", c, podCondition(p, c))
			}
		}
		s.mustKubectl(t, kubectl, "delete", "pod", "hello", "--wait=true", "--timeout=60s")
		b, err := os.ReadFile(marker)
		if err != nil || strings.TrimSpace(string(b)) != "TERM" {
			t.Errorf("the container did not record SIGTERM: %q %v", b, err)
		}
		if _, err := cs.CoreV1().Pods("default").Get(ctx, "hello", metav1.GetOptions{}); err == nil {
			t.Errorf("pod still exists after delete")
		}
	})

	t.Run("kubectl logs -f streams until the container exits", func(t *testing.T) {
		m := podManifest("counter", "n1", `for i in 1 2 3 4 5; do echo "line $i"; sleep 0.5; done`)
		m = strings.Replace(m, "  containers:", "  restartPolicy: Never\n  containers:", 1)
		s.mustKubectl(t, kubectl, "apply", "-f", writeManifest(t, m))
		waitPodPhase(t, cs, "counter", corev1.PodRunning)
		start := time.Now()
		out := s.mustKubectl(t, kubectl, "logs", "-f", "counter")
		for i := 1; i <= 5; i++ {
			if !strings.Contains(out, fmt.Sprintf("line %d", i)) {
				t.Errorf("followed log lacks line %d:\n%s", i, out)
			}
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("kubectl logs -f took %v to end after the container exited", d)
		}
		p := waitPodPhase(t, cs, "counter", corev1.PodSucceeded)
		if st := p.Status.ContainerStatuses[0].State.Terminated; st == nil || st.ExitCode != 0 || st.Reason != "Completed" {
			t.Errorf("terminated state = %+v", st)
		}
	})

	t.Run("a pod that does not fit is rejected with the kubelet's reason", func(t *testing.T) {
		m := podManifest("huge", "n3", "sleep 1")
		m = strings.Replace(m, "    command:", "    resources: {requests: {cpu: \"1000\"}}\n    command:", 1)
		s.mustKubectl(t, kubectl, "apply", "-f", writeManifest(t, m))
		p := waitPodPhase(t, cs, "huge", corev1.PodFailed)
		if p.Status.Reason != "OutOfcpu" || !strings.Contains(p.Status.Message, "cpu") {
			t.Errorf("status reason %q message %q, want OutOfcpu", p.Status.Reason, p.Status.Message)
		}
		out := s.mustKubectl(t, kubectl, "get", "pod", "huge", "--no-headers")
		if !strings.Contains(out, "OutOfcpu") {
			t.Errorf("kubectl get pod shows %q", out)
		}
	})

	t.Run("kill -9 stops the lease; a restart keeps the node and re-adopts its pod", func(t *testing.T) {
		s.mustKubectl(t, kubectl, "apply", "-f", writeManifest(t, podManifest("survivor", "n2",
			`i=0; while [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done`)))
		before := waitPodPhase(t, cs, "survivor", corev1.PodRunning)
		node, _ := cs.CoreV1().Nodes().Get(ctx, "n2", metav1.GetOptions{})

		agents["n2"].kill9()
		l1, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, "n2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		never(t, 3*time.Second, "lease renewed after kill -9 (three renew intervals of a live agent)", func() error {
			l2, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, "n2", metav1.GetOptions{})
			if err == nil && !l1.Spec.RenewTime.Equal(l2.Spec.RenewTime) {
				return fmt.Errorf("%v → %v", l1.Spec.RenewTime, l2.Spec.RenewTime)
			}
			return nil
		})

		agents["n2"].start()
		renewTimes(t, cs, "n2", 2, 20*time.Second)
		after, _ := cs.CoreV1().Nodes().Get(ctx, "n2", metav1.GetOptions{})
		if after.UID != node.UID {
			t.Errorf("node re-created: uid %s → %s", node.UID, after.UID)
		}
		eventually(t, 15*time.Second, "pod status after restart", func() error {
			p, err := cs.CoreV1().Pods("default").Get(ctx, "survivor", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != 1 {
				return fmt.Errorf("phase %s", p.Status.Phase)
			}
			c, c0 := p.Status.ContainerStatuses[0], before.Status.ContainerStatuses[0]
			if c.RestartCount != 0 || c.State.Running == nil || !c.State.Running.StartedAt.Equal(&c0.State.Running.StartedAt) || c.ContainerID != c0.ContainerID {
				return fmt.Errorf("container not re-adopted: before %+v after %+v", c0, c)
			}
			return nil
		})
		_ = cs.CoreV1().Pods("default").Delete(ctx, "survivor", metav1.DeleteOptions{})
	})
}

func condition(n *corev1.Node, t corev1.NodeConditionType) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return corev1.NodeCondition{}
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// renewTimes watches the node's lease and returns n successive renewTimes.
func renewTimes(t *testing.T, cs kubernetes.Interface, node string, n int, timeout time.Duration) []time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	w, err := cs.CoordinationV1().Leases("kube-node-lease").Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", node).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var times []time.Time
	var last time.Time
	for ev := range w.ResultChan() {
		l, ok := ev.Object.(*coordinationv1.Lease)
		if !ok || l.Spec.RenewTime == nil || !l.Spec.RenewTime.Time.After(last) {
			continue
		}
		last = l.Spec.RenewTime.Time
		times = append(times, last)
		if len(times) == n+1 { // the first event is the current state
			return times[1:]
		}
	}
	t.Fatalf("saw %d renewals of %s within %v, want %d", max(len(times)-1, 0), node, timeout, n)
	return nil
}

func podManifest(name, node, script string) string {
	q, _ := json.Marshal(script)
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: sh
    command: ["sh", "-c", %s]
`, name, node, q)
}

func writeManifest(t *testing.T, body string) string {
	t.Helper()
	// kubectl -f splits on commas, which subtest temp dirs contain.
	dir, err := os.MkdirTemp("", "manifest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := filepath.Join(dir, "manifest.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func waitPodPhase(t *testing.T, cs kubernetes.Interface, name string, phase corev1.PodPhase) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	eventually(t, 30*time.Second, "pod "+name+" "+string(phase), func() error {
		var err error
		p, err = cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != phase {
			return fmt.Errorf("phase %q reason %q (%v)", p.Status.Phase, p.Status.Reason, p.Status.ContainerStatuses)
		}
		return nil
	})
	return p
}

// waitNodesReady waits until every named node is Ready=True.
func waitNodesReady(t *testing.T, cs kubernetes.Interface, timeout time.Duration, names ...string) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("%d Ready nodes", len(names)), func() error {
		for _, name := range names {
			n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if condition(n, corev1.NodeReady).Status != corev1.ConditionTrue {
				return fmt.Errorf("%s not Ready", name)
			}
		}
		return nil
	})
}

// TestAgentIdentity checks joining and the node identity from outside: a
// wrong join secret is refused clearly and registers nothing; an agent with
// --register-node=false waits for the admin's Node and then runs it; and
// the agent's own credentials get 403 for what SPEC §8 forbids.
func TestAgentIdentity(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{})
	cs := s.client()

	t.Run("a wrong join secret is refused and nothing is registered", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad-token")
		if err := os.WriteFile(bad, []byte("not-the-secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		dataDir := filepath.Join(t.TempDir(), "agent-intruder")
		a := startAgent(t, s, agentOptions{name: "intruder", dataDir: dataDir, tokenFile: bad})
		err, exited := a.exited(30 * time.Second)
		if !exited || err == nil {
			t.Fatalf("agent with a wrong secret did not fail (exited %v, err %v)", exited, err)
		}
		if !strings.Contains(a.logs(), "join token rejected") {
			t.Errorf("no clear refusal in the agent's output:\n%s", a.logs())
		}
		if _, err := cs.CoreV1().Nodes().Get(ctx, "intruder", metav1.GetOptions{}); err == nil {
			t.Errorf("a node was registered with a wrong join secret")
		}
		if entries, _ := os.ReadDir(filepath.Join(dataDir, "pki")); len(entries) > 0 {
			t.Errorf("identity files written despite the refusal: %v", entries)
		}
	})

	t.Run("register-node=false waits for an admin-created node", func(t *testing.T) {
		startAgent(t, s, agentOptions{name: "manual", config: agentTestConfig, args: []string{"--register-node=false"}})
		never(t, 2*time.Second, "the agent creates its node despite --register-node=false", func() error {
			if _, err := cs.CoreV1().Nodes().Get(ctx, "manual", metav1.GetOptions{}); err == nil {
				return fmt.Errorf("node manual exists")
			}
			return nil
		})
		if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "manual"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "admin-created node Ready", func() error {
			n, err := cs.CoreV1().Nodes().Get(ctx, "manual", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if condition(n, corev1.NodeReady).Status != corev1.ConditionTrue {
				return fmt.Errorf("Ready = %+v", condition(n, corev1.NodeReady))
			}
			return nil
		})
	})

	t.Run("the agent's own credentials are scoped to its node", func(t *testing.T) {
		a := startAgent(t, s, agentOptions{name: "self", config: agentTestConfig})
		eventually(t, 30*time.Second, "node self registered", func() error {
			_, err := cs.CoreV1().Nodes().Get(ctx, "self", metav1.GetOptions{})
			return err
		})
		node := nodeClient(t, s, a)
		forbidden := map[string]func() error{
			"get another node": func() error {
				_, err := node.CoreV1().Nodes().Get(ctx, "manual", metav1.GetOptions{})
				return err
			},
			"list all nodes": func() error {
				_, err := node.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
				return err
			},
			"list all pods": func() error {
				_, err := node.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
				return err
			},
			"change its own taints": func() error {
				_, err := node.CoreV1().Nodes().Patch(ctx, "self", "application/merge-patch+json",
					[]byte(`{"spec":{"taints":[{"key":"x","effect":"NoSchedule"}]}}`), metav1.PatchOptions{})
				return err
			},
			"set a node-restriction label": func() error {
				_, err := node.CoreV1().Nodes().Patch(ctx, "self", "application/merge-patch+json",
					[]byte(`{"metadata":{"labels":{"node-restriction.kubernetes.io/trusted":"yes"}}}`), metav1.PatchOptions{})
				return err
			},
			"renew another node's lease": func() error {
				_, err := node.CoordinationV1().Leases("kube-node-lease").Get(ctx, "manual", metav1.GetOptions{})
				return err
			},
			"create a namespace": func() error {
				_, err := node.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mine"}}, metav1.CreateOptions{})
				return err
			},
		}
		for what, call := range forbidden {
			if err := call(); !apierrorsIsForbidden(err) {
				t.Errorf("%s: got %v, want 403 Forbidden", what, err)
			}
		}
		if _, err := node.CoreV1().Nodes().Get(ctx, "self", metav1.GetOptions{}); err != nil {
			t.Errorf("get own node: %v", err)
		}
		if _, err := node.CoordinationV1().Leases("kube-node-lease").Get(ctx, "self", metav1.GetOptions{}); err != nil {
			t.Errorf("get own lease: %v", err)
		}
	})
}
