package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestStatefulSet runs the StatefulSet controller against a real server
// and agent: a 3-replica OrderedReady set comes up web-0, web-1, web-2,
// each only after the previous is Ready; `kubectl rollout status` returns;
// scaling to 1 deletes web-2 before web-1; and a set with a claim template
// gets one PersistentVolumeClaim per ordinal, named <template>-<set>-<n>.
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
}
