package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeplane/nodeplane/internal/pki"
)

// pressureConfig is agentTestConfig with a fast eviction loop.
const pressureConfig = agentTestConfig + "evictionPressureTransitionPeriod: 5s\n"

func sleepPod(name, node string, guaranteed bool) *corev1.Pod {
	c := corev1.Container{Name: "c", Image: "sleep", Command: []string{"sleep", "3600"}}
	if guaranteed {
		rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
		c.Resources = corev1.ResourceRequirements{Requests: rl, Limits: rl}
	}
	grace := int64(1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{c}},
	}
}

// meminfoBytes reads one field of /proc/meminfo (the agent's memory
// signal reads the same file), in bytes.
func meminfoBytes(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Skipf("needs /proc/meminfo: %v", err)
	}
	m := regexp.MustCompile(`(?m)^` + field + `:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no %s in /proc/meminfo", field)
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb * 1024
}

// scrapeAgent reads a real agent's /metrics as the administrator.
func scrapeAgent(t *testing.T, s *serverProc, cs kubernetes.Interface, node string) (string, error) {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(s.restConfig().CAData)
	adminTLS, err := rest.TLSConfigFor(s.restConfig())
	if err != nil {
		return "", err
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{
		MinVersion:           tls.VersionTLS12,
		GetClientCertificate: adminTLS.GetClientCertificate,
		InsecureSkipVerify:   true, //nolint:gosec // checked by VerifyConnection
		VerifyConnection: func(st tls.ConnectionState) error {
			return pki.VerifyNodeServingCert(st.PeerCertificates, roots, node, time.Now())
		},
	}}}
	resp, err := hc.Get(fmt.Sprintf("https://127.0.0.1:%d/metrics", n.Status.DaemonEndpoints.KubeletEndpoint.Port))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%d %s", resp.StatusCode, body)
	}
	return string(body), nil
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key && t.Effect == corev1.TaintEffectNoSchedule {
			return true
		}
	}
	return false
}

// TestMemoryPressureEvictsBestEffortFirst drives the real memory signal over
// a hard threshold: a BestEffort and a Guaranteed pod run; the agent
// restarts with evictionHard memory.available set above what this machine
// has available (MemAvailable + 2Gi, at most MemTotal − 64Mi).
// The node shows MemoryPressure=True and the memory-pressure NoSchedule
// taint; the BestEffort pod is evicted first (Failed, reason Evicted, the
// kubelet's message, DisruptionTarget/TerminationByKubelet, an Evicted
// event), a new BestEffort pod is refused, kubelet_evictions counts the
// evictions; an agent restarted with the default thresholds clears the
// condition and the taint.
func TestMemoryPressureEvictsBestEffortFirst(t *testing.T) {
	s := startServer(t, serverOptions{})
	cs := s.client()
	ctx := context.Background()
	const node = "pressure-node"
	dataDir := filepath.Join(t.TempDir(), "agent")
	fast := []string{"--eviction-monitoring-period=1s"}
	a := startAgent(t, s, agentOptions{name: node, dataDir: dataDir, config: pressureConfig, args: fast})
	waitNodesReady(t, cs, 60*time.Second, node)
	for _, p := range []*corev1.Pod{sleepPod("besteffort", node, false), sleepPod("guaranteed", node, true)} {
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPodPhase(t, cs, p.Name, corev1.PodRunning)
	}

	// Record the order in which pods fail.
	var mu sync.Mutex
	var failedOrder []string
	w, err := cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || p.Status.Phase != corev1.PodFailed {
				continue
			}
			mu.Lock()
			if !strings.Contains(strings.Join(failedOrder, ","), p.Name) {
				failedOrder = append(failedOrder, p.Name)
			}
			mu.Unlock()
		}
	}()

	a.stop()
	// Above what is available now by a margin no test frees (2Gi), but below
	// MemTotal − 64Mi: true whether the machine is busy or quiet.
	threshold := min(meminfoBytes(t, "MemTotal")-64<<20, meminfoBytes(t, "MemAvailable")+2<<30)
	a = startAgent(t, s, agentOptions{name: node, dataDir: dataDir, args: fast,
		config: pressureConfig + fmt.Sprintf("evictionHard:\n  memory.available: %q\n", strconv.FormatInt(threshold, 10))})

	eventually(t, 60*time.Second, "MemoryPressure=True and the memory-pressure taint", func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := condition(n, corev1.NodeMemoryPressure); c.Status != corev1.ConditionTrue || c.Reason != "KubeletHasInsufficientMemory" {
			return fmt.Errorf("MemoryPressure = %s/%s", c.Status, c.Reason)
		}
		if !hasTaint(n, corev1.TaintNodeMemoryPressure) {
			return fmt.Errorf("taints %v", n.Spec.Taints)
		}
		return nil
	})
	var evicted *corev1.Pod
	eventually(t, 60*time.Second, "both pods evicted", func() error {
		for _, name := range []string{"besteffort", "guaranteed"} {
			p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Status.Phase != corev1.PodFailed || p.Status.Reason != "Evicted" {
				return fmt.Errorf("%s: %s/%s", name, p.Status.Phase, p.Status.Reason)
			}
			if name == "besteffort" {
				evicted = p
			}
		}
		return nil
	})
	mu.Lock()
	order := strings.Join(failedOrder, ",")
	mu.Unlock()
	if order != "besteffort,guaranteed" {
		t.Errorf("pods failed in order %q, want the BestEffort pod first", order)
	}
	if !strings.HasPrefix(evicted.Status.Message, "The node was low on resource: memory. Threshold quantity: ") ||
		!strings.Contains(evicted.Status.Message, "Container c was using ") {
		t.Errorf("eviction message %q, want the kubelet's", evicted.Status.Message)
	}
	var dt *corev1.PodCondition
	for i := range evicted.Status.Conditions {
		if evicted.Status.Conditions[i].Type == corev1.DisruptionTarget {
			dt = &evicted.Status.Conditions[i]
		}
	}
	if dt == nil || dt.Status != corev1.ConditionTrue || dt.Reason != "TerminationByKubelet" {
		t.Errorf("DisruptionTarget condition = %+v, want True/TerminationByKubelet", dt)
	}
	eventually(t, 30*time.Second, "an Evicted event on the pod", func() error {
		evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == "besteffort" && e.Reason == "Evicted" && e.Type == corev1.EventTypeWarning && e.Message == evicted.Status.Message {
				return nil
			}
		}
		return fmt.Errorf("no Evicted event among %d", len(evs.Items))
	})

	if _, err := cs.CoreV1().Pods("default").Create(ctx, sleepPod("late", node, false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	late := waitPodPhase(t, cs, "late", corev1.PodFailed)
	if late.Status.Reason != "Evicted" || late.Status.Message != "Pod was rejected: The node had condition: [MemoryPressure]. " {
		t.Errorf("new BestEffort pod: %s %q, want Evicted, the kubelet's admission message", late.Status.Reason, late.Status.Message)
	}

	eventually(t, 30*time.Second, "kubelet_evictions counts memory.available", func() error {
		body, err := scrapeAgent(t, s, cs, node)
		if err != nil {
			return err
		}
		m := regexp.MustCompile(`(?m)^kubelet_evictions\{eviction_signal="memory.available"\} (\S+)$`).FindStringSubmatch(body)
		if m == nil || m[1] != "2" {
			return fmt.Errorf("kubelet_evictions: %v", m)
		}
		for _, want := range []string{`kubelet_node_name{node="` + node + `"} 1`, "kubelet_running_pods 0", "kubelet_node_lease_renewals_total ", "go_goroutines "} {
			if !strings.Contains(body, want) {
				return fmt.Errorf("no %q in metrics", want)
			}
		}
		return nil
	})

	a.stop()
	startAgent(t, s, agentOptions{name: node, dataDir: dataDir, config: pressureConfig, args: fast})
	eventually(t, 60*time.Second, "MemoryPressure=False and no memory-pressure taint", func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := condition(n, corev1.NodeMemoryPressure); c.Status != corev1.ConditionFalse {
			return fmt.Errorf("MemoryPressure = %s", c.Status)
		}
		if hasTaint(n, corev1.TaintNodeMemoryPressure) {
			return fmt.Errorf("taints %v", n.Spec.Taints)
		}
		return nil
	})
}

// TestUnwritablePodStateMakesNodeNotReady makes the agent's pod state
// directory read-only (a read-only bind mount over it; needs root): the
// node turns Ready=False (KubeletNotReady, the reason in the message) with
// a NodeNotReady event, and back to Ready=True with NodeReady once the
// mount is gone.
func TestUnwritablePodStateMakesNodeNotReady(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to bind-mount the pod state directory read-only")
	}
	s := startServer(t, serverOptions{})
	cs := s.client()
	ctx := context.Background()
	const node = "readonly-node"
	dataDir := filepath.Join(t.TempDir(), "agent")
	startAgent(t, s, agentOptions{name: node, dataDir: dataDir, config: agentTestConfig})
	waitNodesReady(t, cs, 60*time.Second, node)

	dir := filepath.Join(dataDir, "runtime", "pods")
	for _, args := range [][]string{{"--bind", dir, dir}, {"-o", "remount,bind,ro", dir}} {
		if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
			exec.Command("umount", dir).Run() //nolint:errcheck // best effort
			t.Skipf("cannot bind-mount read-only (mount %v: %v %s)", args, err, out)
		}
	}
	unmounted := false
	unmount := func() {
		if !unmounted {
			if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
				t.Errorf("umount %s: %v %s", dir, err, out)
			}
			unmounted = true
		}
	}
	t.Cleanup(unmount)

	eventually(t, 30*time.Second, "Ready=False naming the pod state directory", func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := condition(n, corev1.NodeReady)
		if c.Status != corev1.ConditionFalse || c.Reason != "KubeletNotReady" ||
			!strings.HasPrefix(c.Message, "container runtime not ready: pod state directory "+dir+" is not writable") {
			return fmt.Errorf("Ready = %s/%s %q", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	unmount()
	waitNodesReady(t, cs, 30*time.Second, node)
	eventually(t, 30*time.Second, "NodeNotReady and NodeReady events", func() error {
		evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == node {
				seen[e.Reason] = true
			}
		}
		if !seen["NodeNotReady"] || !seen["NodeReady"] {
			return fmt.Errorf("node events %v", seen)
		}
		return nil
	})
}

// TestDiskPressureOnASmallDataDir gives the agent a 64Mi tmpfs data
// directory and evictionHard nodefs.available<24Mi (needs root to mount):
// a pod fills its emptyDir with 48Mi, the node shows DiskPressure=True and
// the disk-pressure taint, the writer is evicted before a quiet pod (reason
// Evicted, "low on resource: ephemeral-storage"), a new Guaranteed pod is
// refused ("[DiskPressure]"); deleting the pods frees the space and the
// condition clears once the 5 s transition period has passed.
func TestDiskPressureOnASmallDataDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs data directory")
	}
	s := startServer(t, serverOptions{})
	cs := s.client()
	ctx := context.Background()
	const node = "disk-node"
	base := t.TempDir()
	dataDir := filepath.Join(base, "agent")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", dataDir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	target := filepath.Join(base, "fill")
	if err := os.MkdirAll(target, 0o755); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, s, agentOptions{name: node, dataDir: dataDir, args: []string{"--eviction-monitoring-period=1s"},
		config: pressureConfig + "evictionHard:\n  nodefs.available: 24Mi\n"})
	t.Cleanup(func() {
		a.stop()
		killContainers(dataDir)
		if out, err := exec.Command("umount", "-l", dataDir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dataDir, err, out)
		}
	})
	waitNodesReady(t, cs, 60*time.Second, node)
	quiet := sleepPod("quiet", node, true)
	if _, err := cs.CoreV1().Pods("default").Create(ctx, quiet, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodPhase(t, cs, "quiet", corev1.PodRunning)
	writer := sleepPod("writer", node, true)
	writer.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	writer.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: target}}
	writer.Spec.Containers[0].Command = []string{"sh", "-c", "head -c 50331648 /dev/zero > " + target + "/fill; sleep 3600"}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, writer, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	eventually(t, 60*time.Second, "DiskPressure=True and the disk-pressure taint", func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := condition(n, corev1.NodeDiskPressure); c.Status != corev1.ConditionTrue || c.Reason != "KubeletHasDiskPressure" {
			return fmt.Errorf("DiskPressure = %s/%s", c.Status, c.Reason)
		}
		if !hasTaint(n, corev1.TaintNodeDiskPressure) {
			return fmt.Errorf("taints %v", n.Spec.Taints)
		}
		return nil
	})
	w := waitPodPhase(t, cs, "writer", corev1.PodFailed)
	if w.Status.Reason != "Evicted" || !strings.HasPrefix(w.Status.Message, "The node was low on resource: ephemeral-storage. Threshold quantity: 24Mi, available: ") {
		t.Errorf("writer: %s %q, want Evicted for ephemeral-storage", w.Status.Reason, w.Status.Message)
	}
	// The writer goes first: when it failed the quiet pod was still running
	// (the evicted writer's files stay until it is deleted, so the quiet pod
	// follows).
	q, err := cs.CoreV1().Pods("default").Get(ctx, "quiet", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q.Status.Phase == corev1.PodFailed {
		var wt, qt time.Time
		for _, c := range w.Status.Conditions {
			if c.Type == corev1.DisruptionTarget {
				wt = c.LastTransitionTime.Time
			}
		}
		for _, c := range q.Status.Conditions {
			if c.Type == corev1.DisruptionTarget {
				qt = c.LastTransitionTime.Time
			}
		}
		if qt.Before(wt) {
			t.Errorf("quiet pod evicted at %s, before the writer at %s", qt, wt)
		}
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, sleepPod("late", node, true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	late := waitPodPhase(t, cs, "late", corev1.PodFailed)
	if late.Status.Reason != "Evicted" || late.Status.Message != "Pod was rejected: The node had condition: [DiskPressure]. " {
		t.Errorf("new Guaranteed pod: %s %q, want Evicted, the kubelet's admission message", late.Status.Reason, late.Status.Message)
	}

	// The signal is still low now (the evicted pods' files are there), so
	// the agent saw pressure at most one monitoring period (1 s) ago: the
	// condition may not clear before now + 5 s − 1 s.
	deleted := time.Now()
	for _, name := range []string{"writer", "quiet", "late"} {
		if err := cs.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 60*time.Second, "DiskPressure=False and no disk-pressure taint", func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := condition(n, corev1.NodeDiskPressure)
		if c.Status != corev1.ConditionFalse {
			return fmt.Errorf("DiskPressure = %s", c.Status)
		}
		if held := time.Since(deleted); held < 4*time.Second {
			t.Errorf("DiskPressure cleared %s after the space was freed, want it held for the 5 s transition period", held)
		}
		if hasTaint(n, corev1.TaintNodeDiskPressure) {
			return fmt.Errorf("taints %v", n.Spec.Taints)
		}
		return nil
	})
}

// TestRegistrationFlags starts an agent with --hostname-override (padded,
// upper case), --register-schedulable=false and a providerID in its config
// file: the Node carries the trimmed, lower-cased hostname in its
// kubernetes.io/hostname label and HostName address, the providerID, and
// is registered cordoned with the unschedulable taint.
func TestRegistrationFlags(t *testing.T) {
	s := startServer(t, serverOptions{})
	cs := s.client()
	const node = "flags-node"
	startAgent(t, s, agentOptions{name: node, config: agentTestConfig + "providerID: nodeplane://rack-1/flags-node\n",
		args: []string{"--hostname-override", " Web-1.Example ", "--register-schedulable=false"}})
	eventually(t, 60*time.Second, "the node registered with the flags' effects", func() error {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := n.Labels["kubernetes.io/hostname"]; got != "web-1.example" {
			return fmt.Errorf("hostname label %q", got)
		}
		hostAddr := ""
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeHostName {
				hostAddr = a.Address
			}
		}
		if hostAddr != "web-1.example" {
			return fmt.Errorf("addresses %v", n.Status.Addresses)
		}
		if n.Spec.ProviderID != "nodeplane://rack-1/flags-node" {
			return fmt.Errorf("providerID %q", n.Spec.ProviderID)
		}
		if !n.Spec.Unschedulable || !hasTaint(n, "node.kubernetes.io/unschedulable") {
			return fmt.Errorf("unschedulable %v, taints %v", n.Spec.Unschedulable, n.Spec.Taints)
		}
		return nil
	})
}
