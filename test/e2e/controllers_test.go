package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLeaseGoesWithItsNode: deleting a Node deletes the heartbeat Lease that
// names it as owner (the garbage collector), and nothing else.
func TestLeaseGoesWithItsNode(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{})
	cs := s.client()
	mk := func(name string) *corev1.Node {
		n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		holder := name
		_, err = cs.CoordinationV1().Leases("kube-node-lease").Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: name, UID: n.UID}}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	mk("gone")
	mk("stays")
	if err := cs.CoreV1().Nodes().Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "lease of the deleted node removed", func() error {
		_, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, "gone", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("lease still there (err %v)", err)
	})
	if _, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, "stays", metav1.GetOptions{}); err != nil {
		t.Errorf("lease of an existing node: %v", err)
	}
	if _, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, "kube-controller-manager", metav1.GetOptions{}); err != nil {
		t.Errorf("no leader election lease: %v", err)
	}
}

// TestTaintEviction: pods on a node with a NoExecute taint they do not
// tolerate are evicted at once, pods tolerating it for a while are evicted
// after that while (with the DisruptionTarget condition and a
// TaintManagerEviction event), pods tolerating it forever stay, and removing
// the taint cancels a pending eviction.
func TestTaintEviction(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{})
	cs := s.client()
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tainted"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := func(name string, seconds *int64, tolerate bool) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			NodeName: "tainted", Containers: []corev1.Container{{Name: "c", Image: "sleep"}}}}
		if tolerate {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db",
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds}}
		}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	three, sixty := int64(3), int64(60)
	pod("intolerant", nil, false)
	pod("three-seconds", &three, true)
	pod("forever", nil, true)
	pod("sixty-seconds", &sixty, true)

	taint := corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoExecute}
	setTaints(t, s, "tainted", []corev1.Taint{taint})
	start := time.Now()

	evicted := func(name string) (bool, *corev1.Pod) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return p.DeletionTimestamp != nil, p
	}
	eventually(t, 10*time.Second, "intolerant pod evicted", func() error {
		if ok, _ := evicted("intolerant"); !ok {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	if ok, _ := evicted("three-seconds"); ok && time.Since(start) < 2*time.Second {
		t.Errorf("pod tolerating 3 s evicted after %v", time.Since(start))
	}
	eventually(t, 15*time.Second, "pod tolerating 3 s evicted", func() error {
		if ok, _ := evicted("three-seconds"); !ok {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	if d := time.Since(start); d < 2500*time.Millisecond || d > 8*time.Second {
		t.Errorf("pod tolerating 3 s evicted after %v, want about 3 s", d)
	}
	if _, p := evicted("three-seconds"); p != nil {
		found := false
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "DeletionByTaintManager" {
				found = true
			}
		}
		if !found {
			t.Errorf("evicted pod lacks the DisruptionTarget condition: %+v", p.Status.Conditions)
		}
	}
	// The taint goes: the pending eviction of the 60 s pod is cancelled.
	setTaints(t, s, "tainted", nil)
	eventually(t, 15*time.Second, "cancellation event", func() error {
		evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=sixty-seconds"})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == "TaintManagerEviction" && e.Message == "Cancelling deletion of Pod default/sixty-seconds" {
				return nil
			}
		}
		return fmt.Errorf("events: %+v", evs.Items)
	})
	for _, name := range []string{"forever", "sixty-seconds"} {
		if ok, _ := evicted(name); ok {
			t.Errorf("pod %s was evicted", name)
		}
	}
	evs, _ := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=intolerant"})
	marked := false
	for _, e := range evs.Items {
		if e.Reason == "TaintManagerEviction" && e.Message == "Marking for deletion Pod default/intolerant" && e.Source.Component == "taint-eviction-controller" {
			marked = true
		}
	}
	if !marked {
		t.Errorf("no TaintManagerEviction marking event for the intolerant pod: %+v", evs.Items)
	}
}

func setTaints(t *testing.T, s *serverProc, node string, taints []corev1.Taint) {
	t.Helper()
	cs := s.client()
	for range 5 {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Spec.Taints = taints
		if _, err = cs.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err == nil {
			return
		}
	}
	t.Fatalf("could not set taints on %s", node)
}
