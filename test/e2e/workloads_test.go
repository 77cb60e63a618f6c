package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// TestWorkloads drives the scheduler and workload controllers with real
// agents in three zones and real kubectl: a Deployment of 6 spreads 2/2/2;
// rollout status and scale work; a cordoned node gets no new pods and a
// drained one loses its pods to the others; a DaemonSet runs on every node,
// the cordoned one included; and when an agent dies, the lifecycle
// controller's eviction makes the ReplicaSet replace its pods elsewhere.
func TestWorkloads(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{args: shortLifecycle})
	cs := s.client()
	kubectl := kubectlPath(t)
	agents := map[string]*agentProc{}
	for _, z := range []string{"a", "b", "c"} {
		agents["w"+z] = startAgent(t, s, agentOptions{name: "w" + z, config: agentTestConfig,
			args: []string{"--node-labels", "topology.kubernetes.io/zone=zone-" + z}})
	}
	eventually(t, 30*time.Second, "three schedulable nodes", func() error {
		for name := range agents {
			n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if condition(n, corev1.NodeReady).Status != corev1.ConditionTrue || len(n.Spec.Taints) != 0 {
				return fmt.Errorf("%s not ready/untainted", name)
			}
		}
		return nil
	})

	// What the README promises: the image is the program.
	s.mustKubectl(t, kubectl, "create", "deployment", "hello", "--image=sleep", "--", "3600")
	s.mustKubectl(t, kubectl, "rollout", "status", "deployment/hello", "--timeout=60s")
	s.mustKubectl(t, kubectl, "delete", "deployment", "hello")

	// Pods tolerate an unreachable node for 2 s (instead of the default
	// 300 s) so the dead-agent case below is quick.
	web := `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 6
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      tolerations: [{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 2}]
      containers: [{name: sleep, image: sleep, args: ["3600"]}]
`
	s.mustKubectl(t, kubectl, "apply", "-f", writeManifest(t, web))
	s.mustKubectl(t, kubectl, "rollout", "status", "deployment/web", "--timeout=90s")
	if got := spread(t, cs, "app=web"); fmt.Sprint(got) != "map[wa:2 wb:2 wc:2]" {
		t.Errorf("6 replicas over 3 zones: %v, want 2/2/2", got)
	}

	t.Run("scale", func(t *testing.T) {
		s.mustKubectl(t, kubectl, "scale", "deployment/web", "--replicas=3")
		s.mustKubectl(t, kubectl, "rollout", "status", "deployment/web", "--timeout=60s")
		eventually(t, 30*time.Second, "3 pods", func() error {
			if n := total(spread(t, cs, "app=web")); n != 3 {
				return fmt.Errorf("%d pods", n)
			}
			return nil
		})
		s.mustKubectl(t, kubectl, "scale", "deployment/web", "--replicas=6")
		s.mustKubectl(t, kubectl, "rollout", "status", "deployment/web", "--timeout=60s")
	})

	t.Run("a DaemonSet runs on every node, the cordoned one too", func(t *testing.T) {
		s.mustKubectl(t, kubectl, "cordon", "wb")
		ds := `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agentd}
spec:
  selector: {matchLabels: {app: agentd}}
  template:
    metadata: {labels: {app: agentd}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: c, image: sleep, args: ["3600"]}]
`
		s.mustKubectl(t, kubectl, "apply", "-f", writeManifest(t, ds))
		eventually(t, 60*time.Second, "one daemon pod per node", func() error {
			got := spread(t, cs, "app=agentd")
			if fmt.Sprint(got) != "map[wa:1 wb:1 wc:1]" {
				return fmt.Errorf("daemon pods %v", got)
			}
			return nil
		})
	})

	t.Run("cordon keeps new pods off; drain moves them", func(t *testing.T) {
		// wb is cordoned: scale up, nothing new lands there.
		before := spread(t, cs, "app=web")["wb"]
		s.mustKubectl(t, kubectl, "scale", "deployment/web", "--replicas=9")
		s.mustKubectl(t, kubectl, "rollout", "status", "deployment/web", "--timeout=60s")
		if got := spread(t, cs, "app=web"); got["wb"] != before {
			t.Errorf("cordoned wb went from %d to %d web pods (%v)", before, got["wb"], got)
		}
		s.mustKubectl(t, kubectl, "drain", "wb", "--ignore-daemonsets", "--timeout=90s", "--grace-period=2")
		s.mustKubectl(t, kubectl, "rollout", "status", "deployment/web", "--timeout=60s")
		eventually(t, 60*time.Second, "web pods off wb, all 9 running", func() error {
			got := spread(t, cs, "app=web")
			if got["wb"] != 0 || total(got) != 9 {
				return fmt.Errorf("web pods %v", got)
			}
			return nil
		})
		s.mustKubectl(t, kubectl, "uncordon", "wb")
	})

	t.Run("a dead agent's pods are replaced elsewhere", func(t *testing.T) {
		s.mustKubectl(t, kubectl, "scale", "deployment/web", "--replicas=6")
		s.mustKubectl(t, kubectl, "rollout", "status", "deployment/web", "--timeout=60s")
		onC := spread(t, cs, "app=web")["wc"]
		if onC == 0 {
			t.Skipf("no web pod on wc to evict (%v)", spread(t, cs, "app=web"))
		}
		rsBefore, err := cs.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil || len(rsBefore.Items) != 1 {
			t.Fatalf("replicasets: %v %v", len(rsBefore.Items), err)
		}
		agents["wc"].kill9()
		// Short knobs: Unknown after 8 s, then NoExecute; the pods leave
		// after their 2 s toleration and the ReplicaSet replaces them.
		eventually(t, 120*time.Second, "6 running web pods on wa and wb", func() error {
			got := running(t, cs, "app=web")
			if got["wc"] != 0 || total(got) != 6 {
				return fmt.Errorf("running web pods %v", got)
			}
			return nil
		})
		evs, _ := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		evicted := 0
		for _, e := range evs.Items {
			if e.Reason == "TaintManagerEviction" && strings.HasPrefix(e.Message, "Marking for deletion Pod default/web-") {
				evicted++
			}
		}
		if evicted < onC {
			t.Errorf("%d taint evictions of web pods, want at least the %d on wc", evicted, onC)
		}
		rsAfter, _ := cs.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if len(rsAfter.Items) != 1 || rsAfter.Items[0].UID != rsBefore.Items[0].UID {
			t.Errorf("the same ReplicaSet should have replaced the pods (no rollout): %d replicasets", len(rsAfter.Items))
		}
	})

	t.Run("foreground deletion waits for the dependents", func(t *testing.T) {
		s.mustKubectl(t, kubectl, "create", "deployment", "fg", "--image=sleep", "--replicas=2", "--", "3600")
		s.mustKubectl(t, kubectl, "rollout", "status", "deployment/fg", "--timeout=60s")
		// kubectl returns only once the Deployment itself is gone, which
		// foreground deletion allows only after its ReplicaSet and pods.
		s.mustKubectl(t, kubectl, "delete", "deployment", "fg", "--cascade=foreground", "--timeout=60s")
		rs, err := cs.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=fg"})
		if err != nil || len(rs.Items) != 0 {
			t.Errorf("replicasets left after a foreground delete returned: %d (%v)", len(rs.Items), err)
		}
		if got := total(spread(t, cs, "app=fg")); got != 0 {
			t.Errorf("%d fg pods not terminating after a foreground delete returned", got)
		}
	})

	t.Run("deleting the Deployment removes its ReplicaSets and pods", func(t *testing.T) {
		s.mustKubectl(t, kubectl, "delete", "deployment", "web", "--timeout=90s")
		eventually(t, 60*time.Second, "replicasets gone", func() error {
			rs, err := cs.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				return err
			}
			if len(rs.Items) != 0 {
				return fmt.Errorf("%d replicasets left", len(rs.Items))
			}
			return nil
		})
		if _, err := cs.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("deployment: %v", err)
		}
	})
}

// spread counts the pods matching sel per node (bound, not terminating).
func spread(t *testing.T, cs kubernetes.Interface, sel string) map[string]int {
	t.Helper()
	return countPods(t, cs, sel, func(p *corev1.Pod) bool { return p.DeletionTimestamp == nil && p.Spec.NodeName != "" })
}

// running counts Running, not terminating pods matching sel per node.
func running(t *testing.T, cs kubernetes.Interface, sel string) map[string]int {
	t.Helper()
	return countPods(t, cs, sel, func(p *corev1.Pod) bool {
		return p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning
	})
}

func countPods(t *testing.T, cs kubernetes.Interface, sel string, keep func(*corev1.Pod) bool) map[string]int {
	t.Helper()
	s, err := labels.Parse(sel)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: s.String()})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for i := range pods.Items {
		if keep(&pods.Items[i]) {
			out[pods.Items[i].Spec.NodeName]++
		}
	}
	return out
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
