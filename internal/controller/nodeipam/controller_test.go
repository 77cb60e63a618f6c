package nodeipam_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeplane/nodeplane/internal/controller/manager"
	"github.com/nodeplane/nodeplane/internal/controller/nodeipam"
)

func node(name string, cidrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
	if len(cidrs) > 0 {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = cidrs[0], cidrs
	}
	return n
}

// start runs the controller for one term against a fake clientset.
func start(t *testing.T, opts nodeipam.Options, objs ...*corev1.Node) (*fake.Clientset, *nodeipam.Controller, context.Context) {
	t.Helper()
	cfg, err := opts.Parse()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientset()
	for _, o := range objs {
		if _, err := c.CoreV1().Nodes().Create(context.Background(), o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctrl, err := nodeipam.NewController(nodeipam.ShellConfig{IPAM: cfg, Client: c})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	term := &manager.Term{Informers: informers.NewSharedInformerFactory(c, 0)}
	if err := ctrl.Prepare(term); err != nil {
		t.Fatal(err)
	}
	term.Informers.Start(ctx.Done())
	term.Informers.WaitForCacheSync(ctx.Done())
	done := make(chan struct{})
	go func() { defer close(done); ctrl.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		term.Informers.Shutdown()
	})
	return c, ctrl, ctx
}

func waitCIDRs(t *testing.T, ctx context.Context, c *fake.Clientset, name string, want ...string) {
	t.Helper()
	var got *corev1.Node
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		var err error
		got, err = c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && slices.Equal(got.Spec.PodCIDRs, want) && got.Spec.PodCIDR == want[0], nil
	})
	if err != nil {
		t.Fatalf("node %s: podCIDRs %v, want %v", name, got.Spec.PodCIDRs, want)
	}
}

// TestControllerRebuildsAllocatesAndReuses: a term starts from the nodes'
// existing ranges, hands out the lowest free blocks, reports exhaustion
// with upstream's event, and gives a deleted node's block to the node that
// waits for one.
func TestControllerRebuildsAllocatesAndReuses(t *testing.T) {
	opts := nodeipam.Options{AllocateNodeCIDRs: true, CIDRAllocatorType: nodeipam.RangeAllocator, ClusterCIDR: "10.0.0.0/22", NodeCIDRMaskSize: 24}
	c, ctrl, ctx := start(t, opts, node("old1", "10.0.0.0/24"), node("old2", "10.0.2.0/24"))

	for _, step := range []struct{ node, want string }{{"n1", "10.0.1.0/24"}, {"n2", "10.0.3.0/24"}} {
		if _, err := c.CoreV1().Nodes().Create(ctx, node(step.node), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitCIDRs(t, ctx, c, step.node, step.want)
	}
	if _, err := c.CoreV1().Nodes().Create(ctx, node("n3"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		evs, err := c.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == "n3" && e.Reason == "CIDRNotAvailable" && e.Type == corev1.EventTypeNormal &&
				e.Message == "Node n3 status is now: CIDRNotAvailable" && e.Source.Component == "cidrAllocator" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no CIDRNotAvailable event for n3: %v", err)
	}
	if got := ctrl.Stats(); len(got) != 1 || got[0].Allocated != 4 || got[0].Max != 4 {
		t.Fatalf("Stats() = %+v, want 4 of 4 blocks in use", got)
	}
	if err := c.CoreV1().Nodes().Delete(ctx, "old1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCIDRs(t, ctx, c, "n3", "10.0.0.0/24")
}

// TestControllerStopsOnNodesThatDoNotFit: a node holding a range outside
// the cluster CIDR stops the controller for the term; no node is patched.
func TestControllerStopsOnNodesThatDoNotFit(t *testing.T) {
	opts := nodeipam.Options{AllocateNodeCIDRs: true, CIDRAllocatorType: nodeipam.RangeAllocator, ClusterCIDR: "10.0.0.0/16"}
	c, ctrl, ctx := start(t, opts, node("stray", "192.168.0.0/24"), node("fresh"))
	// Watch node changes for a bounded window: the first patch of a node
	// fails the test.
	w, err := c.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if n, err := c.CoreV1().Nodes().Get(ctx, "fresh", metav1.GetOptions{}); err != nil || len(n.Spec.PodCIDRs) > 0 {
		t.Fatalf("node fresh got %v (%v) from a controller that should not have started", n.Spec.PodCIDRs, err)
	}
	window := time.NewTimer(500 * time.Millisecond)
	defer window.Stop()
	for {
		select {
		case ev := <-w.ResultChan():
			if n, ok := ev.Object.(*corev1.Node); ok && len(n.Spec.PodCIDRs) > 0 && n.Name != "stray" {
				t.Fatalf("node %s got %v from a controller that should not have started", n.Name, n.Spec.PodCIDRs)
			}
		case <-window.C:
			if ctrl.Stats() != nil {
				t.Fatalf("Stats() = %+v, want nil: the rebuild failed", ctrl.Stats())
			}
			return
		}
	}
}
