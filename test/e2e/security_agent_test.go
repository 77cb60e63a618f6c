package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// TestSecurityAgent covers issue 10 defect 6 against a real server and real
// agents: a node cannot make its agent run a pod by creating a mirror pod
// for itself, and an agent whose Node is deleted says so and does not keep
// recreating a Lease for the deleted Node.
func TestSecurityAgent(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{})
	cs := s.client()

	t.Run("a mirror pod created by the node identity is deleted and never run", func(t *testing.T) {
		a := startAgent(t, s, agentOptions{name: "mirror", config: agentTestConfig})
		var node *corev1.Node
		eventually(t, 30*time.Second, "node mirror registered", func() error {
			var err error
			node, err = cs.CoreV1().Nodes().Get(ctx, "mirror", metav1.GetOptions{})
			return err
		})
		marker := filepath.Join(t.TempDir(), "mirror-pod-ran")
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: "static-web-mirror", Namespace: "default",
				Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "hash"},
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Node", Name: "mirror", UID: node.UID, Controller: new(true),
				}},
			},
			Spec: corev1.PodSpec{
				NodeName: "mirror",
				Containers: []corev1.Container{{
					Name: "c", Image: "sh",
					Command: []string{"/bin/sh", "-c", "echo ran > " + marker + "; exec sleep 3600"},
				}},
			},
		}
		// As the node itself (NodeRestriction lets a node create its own
		// mirror pods, SPEC AUTH-7).
		created, err := nodeClient(t, s, a).CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create mirror pod as the node: %v", err)
		}
		w, err := cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", pod.Name).String(),
			ResourceVersion: created.ResourceVersion,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()

		ran := func() error {
			if _, err := os.Stat(marker); err == nil {
				return fmt.Errorf("the mirror pod's command ran: %s exists", marker)
			}
			if pids := processesMentioning(marker); len(pids) > 0 {
				return fmt.Errorf("processes %v run the mirror pod's command", pids)
			}
			return nil
		}
		// Until the pod is deleted, and for a few seconds more, no process
		// runs and the agent writes no status: every sighting fails.
		deadline := time.After(60 * time.Second)
		var deletedAt <-chan time.Time
		poll := time.NewTicker(50 * time.Millisecond)
		defer poll.Stop()
	observe:
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("pod watch closed")
				}
				p, _ := ev.Object.(*corev1.Pod)
				if p == nil || p.UID != created.UID {
					continue
				}
				if p.Status.Phase != created.Status.Phase || len(p.Status.ContainerStatuses) > 0 {
					t.Fatalf("the mirror pod got a status: phase %q, containers %+v", p.Status.Phase, p.Status.ContainerStatuses)
				}
				if ev.Type == watch.Deleted && deletedAt == nil {
					deletedAt = time.After(3 * time.Second)
				}
			case <-poll.C:
				if err := ran(); err != nil {
					t.Fatal(err)
				}
			case <-deletedAt:
				break observe
			case <-deadline:
				t.Fatalf("the mirror pod was not deleted within 60s\n%s", a.logs())
			}
		}
		if _, err := cs.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("get mirror pod after its deletion = %v, want NotFound", err)
		}
		if !strings.Contains(a.logs(), "deleting mirror pod") {
			t.Errorf("the agent did not say why it deleted the mirror pod:\n%s", a.logs())
		}
	})

	t.Run("a deleted node is reported, registered again, and its lease follows the new node", func(t *testing.T) {
		a := startAgent(t, s, agentOptions{name: "phoenix", config: agentTestConfig})
		leases := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
		var old *corev1.Node
		var lease *coordinationv1.Lease
		eventually(t, 30*time.Second, "node phoenix and its lease", func() error {
			var err error
			if old, err = cs.CoreV1().Nodes().Get(ctx, "phoenix", metav1.GetOptions{}); err != nil {
				return err
			}
			if lease, err = leases.Get(ctx, "phoenix", metav1.GetOptions{}); err != nil {
				return err
			}
			if owner := leaseOwner(lease); owner != old.UID {
				return fmt.Errorf("lease owned by %q, want node %q", owner, old.UID)
			}
			return nil
		})
		w, err := leases.Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", "phoenix").String(),
			ResourceVersion: lease.ResourceVersion,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()

		s.mustKubectl(t, kubectlPath(t), "delete", "node", "phoenix")

		eventually(t, 30*time.Second, "the agent reports the deletion", func() error {
			logs := a.logs()
			for _, line := range strings.Split(logs, "\n") {
				if strings.Contains(line, "node was deleted from the cluster") && strings.Contains(line, "phoenix") {
					return nil
				}
			}
			return fmt.Errorf("no line naming node phoenix as deleted from the cluster")
		})
		var fresh *corev1.Node
		eventually(t, 30*time.Second, "node phoenix registered again", func() error {
			var err error
			if fresh, err = cs.CoreV1().Nodes().Get(ctx, "phoenix", metav1.GetOptions{}); err != nil {
				return err
			}
			if fresh.UID == old.UID {
				return fmt.Errorf("still the old node")
			}
			return nil
		})

		// From the deletion on, no lease for the deleted Node is created
		// again; a lease of the new Node appears, then stays and is renewed
		// for three lease durations (renewals every second) without the
		// garbage collector deleting it.
		var ownedByNew *coordinationv1.Lease
		deadline := time.After(45 * time.Second)
		var settled <-chan time.Time
	observe:
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("lease watch closed")
				}
				l, _ := ev.Object.(*coordinationv1.Lease)
				if l == nil {
					continue
				}
				owner := leaseOwner(l)
				switch {
				case ev.Type == watch.Added && owner == old.UID:
					t.Fatalf("a lease owned by the deleted node %s was created again", old.UID)
				case ev.Type == watch.Deleted && ownedByNew != nil:
					t.Fatalf("the new node's lease was deleted (owner %q)\n%s", owner, a.logs())
				case ev.Type != watch.Deleted && owner == fresh.UID:
					if ownedByNew == nil {
						settled = time.After(12 * time.Second)
					}
					ownedByNew = l
				}
			case <-settled:
				break observe
			case <-deadline:
				t.Fatalf("no lease owned by the new node %s within 45s\n%s", fresh.UID, a.logs())
			}
		}
		got, err := leases.Get(ctx, "phoenix", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("lease after re-registration: %v", err)
		}
		if leaseOwner(got) != fresh.UID {
			t.Errorf("lease owned by %q, want the new node %q", leaseOwner(got), fresh.UID)
		}
		if got.Spec.RenewTime == nil || time.Since(got.Spec.RenewTime.Time) > 4*time.Second {
			t.Errorf("lease not renewed lately: renewTime %v", got.Spec.RenewTime)
		}
	})
}

// leaseOwner is the UID of the Node that owns l, or "".
func leaseOwner(l *coordinationv1.Lease) types.UID {
	for _, ref := range l.OwnerReferences {
		if ref.Kind == "Node" {
			return ref.UID
		}
	}
	return ""
}

// processesMentioning returns the pids whose command line contains s.
func processesMentioning(s string) []string {
	entries, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range entries {
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmd), s) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}
