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

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// kubectlVersions returns the kubectl binaries to drive: the default one,
// the oldest supported one named by $KUBECTL_1_27 (.ci/run builds kubectl
// 1.27 from its module, tools/kubectl127, and sets it), plus versioned ones
// found in the gcloud SDK (which ships 1.27–1.33).
func kubectlVersions(t *testing.T) map[string]string {
	bins := map[string]string{"default": kubectlPath(t)}
	for _, v := range []string{"1.27", "1.33"} {
		p := "/usr/lib/google-cloud-sdk/bin/kubectl." + v
		if _, err := os.Stat(p); err == nil {
			bins[v] = p
		}
	}
	if p := os.Getenv("KUBECTL_1_27"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("$KUBECTL_1_27: %v", err)
		}
		bins["1.27"] = p
	}
	if testing.Short() {
		return map[string]string{"default": bins["default"]}
	}
	return bins
}

func TestKubectlScenario(t *testing.T) {
	for name, bin := range kubectlVersions(t) {
		t.Run("kubectl "+name, func(t *testing.T) {
			s := startServer(t, serverOptions{})
			runKubectlScenario(t, s, bin)
		})
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func runKubectlScenario(t *testing.T, s *serverProc, k string) {
	ctx := context.Background()
	cs := s.client()

	nodeYAML := writeFile(t, "node.yaml", `apiVersion: v1
kind: Node
metadata:
  name: n1
  labels:
    kubernetes.io/hostname: n1
    topology.kubernetes.io/zone: zone-a
`)
	if out := s.mustKubectl(t, k, "create", "-f", nodeYAML); !strings.Contains(out, "node/n1 created") {
		t.Fatalf("create node: %q", out)
	}
	// Give the node a status like an agent would, so the columns have values.
	// The lifecycle controller writes the node too (taints, labels): retry
	// on conflicts as an agent does.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.1.2.3"}, {Type: corev1.NodeHostName, Address: "n1"}}
		n.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "v1.33.0-nodeplane", OSImage: "Debian GNU/Linux 12", KernelVersion: "6.1.0", ContainerRuntimeVersion: "process://0.1"}
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	out := s.mustKubectl(t, k, "get", "nodes")
	assertColumns(t, out, "NAME STATUS ROLES AGE VERSION")
	if !regexpLine(out, `^n1\s+Ready\s+<none>\s+\S+\s+v1.33.0-nodeplane$`) {
		t.Errorf("get nodes row:\n%s", out)
	}
	out = s.mustKubectl(t, k, "get", "nodes", "-o", "wide")
	assertColumns(t, out, "NAME STATUS ROLES AGE VERSION INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME")
	if !strings.Contains(out, "10.1.2.3") || !strings.Contains(out, "Debian GNU/Linux 12") {
		t.Errorf("get nodes -o wide lacks status values:\n%s", out)
	}
	if out := s.mustKubectl(t, k, "get", "node", "n1", "-o", "yaml"); !strings.Contains(out, "topology.kubernetes.io/zone: zone-a") || !strings.Contains(out, "kind: Node") {
		t.Errorf("get -o yaml:\n%s", out)
	}
	var fromJSON corev1.Node
	if err := json.Unmarshal([]byte(s.mustKubectl(t, k, "get", "node", "n1", "-o", "json")), &fromJSON); err != nil || fromJSON.Name != "n1" || fromJSON.ResourceVersion == "" {
		t.Errorf("get -o json: %v %+v", err, fromJSON.ObjectMeta)
	}

	// An event about the node and its lease, as the agent and controllers write them.
	_, err = cs.CoreV1().Events("default").Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "n1.e2e", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "n1", UID: "n1"},
		Reason:         "NodeReady", Message: "Node n1 status is now: NodeReady", Type: corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: "kubelet", Host: "n1"},
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("n1"), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out = s.mustKubectl(t, k, "describe", "node", "n1")
	for _, want := range []string{"Name:               n1", "zone-a", "HolderIdentity:  n1", "NodeReady", "Node n1 status is now: NodeReady", "10.1.2.3"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe node lacks %q:\n%s", want, out)
		}
	}

	s.mustKubectl(t, k, "label", "node", "n1", "tier=edge")
	s.mustKubectl(t, k, "annotate", "node", "n1", "owner=lab-3")
	n, _ := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if n.Labels["tier"] != "edge" || n.Annotations["owner"] != "lab-3" {
		t.Errorf("label/annotate: labels %v annotations %v", n.Labels, n.Annotations)
	}

	if out := s.mustKubectl(t, k, "cordon", "n1"); !strings.Contains(out, "node/n1 cordoned") {
		t.Errorf("cordon: %q", out)
	}
	if out := s.mustKubectl(t, k, "get", "nodes"); !strings.Contains(out, "Ready,SchedulingDisabled") {
		t.Errorf("cordoned node status:\n%s", out)
	}
	if out := s.mustKubectl(t, k, "uncordon", "n1"); !strings.Contains(out, "node/n1 uncordoned") {
		t.Errorf("uncordon: %q", out)
	}
	if n, _ = cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}); n.Spec.Unschedulable {
		t.Error("node still unschedulable after uncordon")
	}

	s.mustKubectl(t, k, "taint", "nodes", "n1", "dedicated=gpu:NoSchedule")
	n, _ = cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "dedicated" || n.Spec.Taints[0].Value != "gpu" || n.Spec.Taints[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("taint add: %+v", n.Spec.Taints)
	}
	s.mustKubectl(t, k, "taint", "nodes", "n1", "dedicated:NoSchedule-")
	if n, _ = cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}); len(n.Spec.Taints) != 0 {
		t.Errorf("taint remove left %+v", n.Spec.Taints)
	}

	podV1 := writeFile(t, "pod.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  nodeName: n1
  containers:
  - name: c
    image: sleep
    args: ["3600"]
`)
	podV2 := writeFile(t, "pod2.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    tier: x
spec:
  nodeName: n1
  containers:
  - name: c
    image: /bin/sleep
    args: ["3600"]
`)
	if out := s.mustKubectl(t, k, "apply", "-f", podV1); !strings.Contains(out, "pod/web created") {
		t.Errorf("apply create: %q", out)
	}
	if out := s.mustKubectl(t, k, "apply", "-f", podV2); !strings.Contains(out, "pod/web configured") {
		t.Errorf("apply configure: %q", out)
	}
	pod, err := cs.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil || pod.Labels["tier"] != "x" || pod.Spec.Containers[0].Image != "/bin/sleep" {
		t.Fatalf("applied pod: %v %+v", err, pod)
	}
	out = s.mustKubectl(t, k, "get", "pods", "-A")
	assertColumns(t, out, "NAMESPACE NAME READY STATUS RESTARTS AGE")
	if !regexpLine(out, `^default\s+web\s+0/1\s+Pending\s+0\s+\S+$`) {
		t.Errorf("get pods -A:\n%s", out)
	}

	// delete: an unscheduled pod goes at once.
	if _, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "loose"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "sleep"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out := s.mustKubectl(t, k, "delete", "pod", "loose"); !strings.Contains(out, `pod "loose" deleted`) {
		t.Errorf("delete: %q", out)
	}
	if _, err := cs.CoreV1().Pods("default").Get(ctx, "loose", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("deleted pod still there: %v", err)
	}

	// get nodes -w sees a change.
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	watchCmd := exec.CommandContext(wctx, k, "get", "nodes", "-w")
	watchCmd.Env = append(os.Environ(), "KUBECONFIG="+s.kubeconfig(), "HOME="+t.TempDir())
	pipe, _ := watchCmd.StdoutPipe()
	if err := watchCmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		buf := make([]byte, 4096)
		var acc string
		for {
			n, err := pipe.Read(buf)
			acc += string(buf[:n])
			for i := strings.IndexByte(acc, '\n'); i >= 0; i = strings.IndexByte(acc, '\n') {
				lines <- acc[:i]
				acc = acc[i+1:]
			}
			if err != nil {
				close(lines)
				return
			}
		}
	}()
	waitLine(t, lines, "n1", 15*time.Second) // header and the initial row
	s.mustKubectl(t, k, "cordon", "n1")
	waitLine(t, lines, "SchedulingDisabled", 15*time.Second)
	cancel()
	_ = watchCmd.Wait()
	s.mustKubectl(t, k, "uncordon", "n1")

	// drain: the bound pod is evicted; we play the node agent and confirm
	// its termination (delete with grace 0) once it is marked for deletion.
	agentDone := make(chan error, 1)
	go func() {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			p, err := cs.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				agentDone <- nil
				return
			}
			if err == nil && p.DeletionTimestamp != nil {
				agentDone <- cs.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		agentDone <- fmt.Errorf("pod web never marked for deletion")
	}()
	out = s.mustKubectl(t, k, "drain", "n1", "--ignore-daemonsets", "--force", "--timeout=30s")
	if err := <-agentDone; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "node/n1 drained") || !strings.Contains(out, "evicted") {
		t.Errorf("drain output:\n%s", out)
	}

	out = s.mustKubectl(t, k, "get", "leases", "-n", "kube-node-lease")
	assertColumns(t, out, "NAME HOLDER AGE")
	if !regexpLine(out, `^n1\s+n1\s+\S+$`) {
		t.Errorf("get leases:\n%s", out)
	}
	out = s.mustKubectl(t, k, "get", "events")
	assertColumns(t, out, "LAST SEEN TYPE REASON OBJECT MESSAGE")
	if !strings.Contains(out, "node/n1") || !strings.Contains(out, "NodeReady") {
		t.Errorf("get events:\n%s", out)
	}
	out = s.mustKubectl(t, k, "explain", "node.spec")
	for _, want := range []string{"KIND:", "Node", "taints", "unschedulable"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain node.spec lacks %q:\n%s", want, out)
		}
	}
}

func assertColumns(t *testing.T, out, want string) {
	t.Helper()
	first, _, _ := strings.Cut(out, "\n")
	if got := strings.Join(strings.Fields(first), " "); got != want {
		t.Errorf("columns: got %q, want %q\n%s", got, want, out)
	}
}

func waitLine(t *testing.T, lines <-chan string, substr string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("watch output ended before a line with %q", substr)
			}
			if strings.Contains(l, substr) {
				return
			}
		case <-deadline:
			t.Fatalf("no watch line with %q within %v", substr, timeout)
		}
	}
}
