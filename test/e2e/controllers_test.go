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

// TestPodGC: terminated pods beyond --terminated-pod-gc-threshold are deleted
// oldest first; an unscheduled pod stuck terminating is force-deleted; pods
// of a deleted node are deleted after the 40 s quarantine.
func TestPodGC(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{args: []string{"--terminated-pod-gc-threshold=2", "--leader-elect=false"}})
	cs := s.client()
	mkPod := func(name, node string, finalizer bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "sleep"}}}}
		if finalizer {
			p.Finalizers = []string{"example.com/hold"}
		}
		p, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "keeper"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		p := mkPod(fmt.Sprintf("done-%d", i), "keeper", false)
		p.Status.Phase = corev1.PodSucceeded
		if _, err := cs.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Distinct creation seconds give a defined "oldest": wait until the
		// clock (the server's, on this machine) is past this pod's second.
		created := p.CreationTimestamp.Unix()
		eventually(t, 3*time.Second, "the clock passes the pod's creation second", func() error {
			if now := time.Now().Unix(); now <= created {
				return fmt.Errorf("now %d, created %d", now, created)
			}
			return nil
		})
	}
	mkPod("orphan", "doomed", false)
	stuck := mkPod("stuck", "", true)
	if err := cs.CoreV1().Pods("default").Delete(ctx, stuck.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Nodes().Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	nodeDeleted := time.Now()
	gone := func(name string) bool {
		_, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
	eventually(t, 45*time.Second, "two oldest terminated pods deleted", func() error {
		if !gone("done-0") || !gone("done-1") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	if gone("done-2") || gone("done-3") {
		t.Errorf("newer terminated pods deleted too")
	}
	eventually(t, 45*time.Second, "unscheduled terminating pod force-deleted", func() error {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "stuck", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		// Force deletion sets grace 0; the finalizer keeps the object.
		if p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds == 0 {
			return nil
		}
		return fmt.Errorf("grace %v", p.DeletionGracePeriodSeconds)
	})
	eventually(t, 90*time.Second, "orphaned pod deleted after the quarantine", func() error {
		if !gone("orphan") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	if d := time.Since(nodeDeleted); d < 40*time.Second {
		t.Errorf("orphan deleted %v after its node, before the 40 s quarantine", d)
	}
}
