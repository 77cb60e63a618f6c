package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestStatefulSet runs the StatefulSet controller against a real server
// and agent: a 3-replica OrderedReady set comes up web-0, web-1, web-2,
// each only after the previous is Ready; `kubectl rollout status` returns;
// scaling to 1 deletes web-2 before web-1; and a set with a claim template
// gets one PersistentVolumeClaim per ordinal, named <template>-<set>-<n>;
// with minReadySeconds: 3, status.availableReplicas lags readyReplicas and
// the second pod is created only once the first has been ready for 3 s.
func TestStatefulSet(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{})
	cs := s.client()
	kubectl := kubectlPath(t)
	startAgent(t, s, agentOptions{name: "w1", config: agentTestConfig})
	eventually(t, 30*time.Second, "a ready node", func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, "w1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if condition(n, corev1.NodeReady).Status != corev1.ConditionTrue {
			return fmt.Errorf("w1 not ready")
		}
		return nil
	})

	w, err := cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	sts := `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  replicas: 3
  serviceName: web
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: sleep, image: sleep, args: ["3600"]}]
`
	s.mustKubectl(t, kubectl, "apply", "-f", writeManifest(t, sts))
	s.mustKubectl(t, kubectl, "rollout", "status", "sts/web", "--timeout=90s")

	// Read the watch until all three pods are ready: the order of the
	// ADDED events is the creation order, and each pod must have been
	// created only once the one before it was ready.
	var added []string
	ready := map[string]bool{}
	deadline := time.After(30 * time.Second)
	for len(ready) < 3 {
		select {
		case ev := <-w.ResultChan():
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if ev.Type == watch.Added {
				added = append(added, p.Name)
				if len(added) > 1 && !ready[added[len(added)-2]] {
					t.Errorf("%s was created before %s was ready", p.Name, added[len(added)-2])
				}
			}
			if podCondition(p, corev1.PodReady) == corev1.ConditionTrue {
				ready[p.Name] = true
			}
		case <-deadline:
			t.Fatalf("pods ready: %v (added %v)", ready, added)
		}
	}
	t.Logf("creation order: %v", added)
	if !slices.Equal(added, []string{"web-0", "web-1", "web-2"}) {
		t.Errorf("creation order %v, want web-0, web-1, web-2", added)
	}

	s.mustKubectl(t, kubectl, "scale", "sts/web", "--replicas=1")
	var deleted []string
	deadline = time.After(60 * time.Second)
	for len(deleted) < 2 {
		select {
		case ev := <-w.ResultChan():
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Deleted {
				deleted = append(deleted, p.Name)
			}
		case <-deadline:
			t.Fatalf("deleted so far: %v", deleted)
		}
	}
	t.Logf("scale-down order: %v", deleted)
	if !slices.Equal(deleted, []string{"web-2", "web-1"}) {
		t.Errorf("scale-down order %v, want web-2 then web-1", deleted)
	}
	s.mustKubectl(t, kubectl, "rollout", "status", "sts/web", "--timeout=60s")
	if out := s.mustKubectl(t, kubectl, "get", "sts", "web"); !strings.Contains(out, "READY") || !strings.Contains(out, "1/1") {
		t.Errorf("kubectl get sts:\n%s", out)
	}

	// Claims: created per ordinal from the template (the binder may or
	// may not bind them; only their existence is the controller's).
	db := `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 2
  podManagementPolicy: Parallel
  serviceName: db
  selector: {matchLabels: {app: db}}
  persistentVolumeClaimRetentionPolicy: {whenDeleted: Delete}
  template:
    metadata: {labels: {app: db}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: sleep, image: sleep, args: ["3600"]}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Mi}}}
`
	s.mustKubectl(t, kubectl, "apply", "-f", writeManifest(t, db))
	eventually(t, 30*time.Second, "claims data-db-0 and data-db-1 owned by the set", func() error {
		for _, name := range []string{"data-db-0", "data-db-1"} {
			c, err := cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(c.OwnerReferences) != 1 || c.OwnerReferences[0].Kind != "StatefulSet" {
				return fmt.Errorf("%s owners %v", name, c.OwnerReferences)
			}
		}
		return nil
	})

	minReadySeconds(ctx, t, s, kubectl)
}

// minReadySeconds checks a 2-replica OrderedReady set with minReadySeconds
// 3: its status shows a pod ready but not available, slow-1 is created no
// sooner than 3 s after slow-0 became Ready, and availableReplicas reaches 2.
func minReadySeconds(ctx context.Context, t *testing.T, s *serverProc, kubectl string) {
	t.Helper()
	cs := s.client()
	sw, err := cs.AppsV1().StatefulSets("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=slow"})
	if err != nil {
		t.Fatal(err)
	}
	defer sw.Stop()
	slow := `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: slow}
spec:
  replicas: 2
  minReadySeconds: 3
  serviceName: slow
  selector: {matchLabels: {app: slow}}
  template:
    metadata: {labels: {app: slow}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: sleep, image: sleep, args: ["3600"]}]
`
	start := time.Now()
	s.mustKubectl(t, kubectl, "apply", "-f", writeManifest(t, slow))
	lagged := false
	deadline := time.After(60 * time.Second)
	for done := false; !done; {
		select {
		case ev := <-sw.ResultChan():
			set, ok := ev.Object.(*appsv1.StatefulSet)
			if !ok {
				continue
			}
			st := set.Status
			if st.AvailableReplicas > st.ReadyReplicas {
				t.Errorf("available %d > ready %d", st.AvailableReplicas, st.ReadyReplicas)
			}
			if st.ReadyReplicas > st.AvailableReplicas {
				lagged = true
			}
			done = st.AvailableReplicas == 2
		case <-deadline:
			t.Fatalf("availableReplicas did not reach 2 in 60 s")
		}
	}
	t.Logf("minReadySeconds 3: 2 replicas available after %v", time.Since(start).Round(100*time.Millisecond))
	if !lagged {
		t.Errorf("status never showed readyReplicas above availableReplicas")
	}
	p0, err := cs.CoreV1().Pods("default").Get(ctx, "slow-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p1, err := cs.CoreV1().Pods("default").Get(ctx, "slow-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var readyAt time.Time
	for _, c := range p0.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			readyAt = c.LastTransitionTime.Time
		}
	}
	// Both times are whole seconds; slow-0 is available strictly after
	// readyAt + 3 s, so slow-1's creation cannot be earlier than that.
	if gap := p1.CreationTimestamp.Sub(readyAt); readyAt.IsZero() || gap < 3*time.Second {
		t.Errorf("slow-1 created %v after slow-0 became ready (at %v), want at least 3s", gap, readyAt)
	}
	if out := s.mustKubectl(t, kubectl, "get", "sts", "slow", "-o", "jsonpath={.status.readyReplicas}/{.status.availableReplicas}"); out != "2/2" {
		t.Errorf("kubectl get sts slow ready/available: %q, want 2/2", out)
	}
}
