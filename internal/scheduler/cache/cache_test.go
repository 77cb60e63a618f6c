package cache_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodeplane/nodeplane/internal/scheduler/cache"
	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
	ft "github.com/nodeplane/nodeplane/internal/scheduler/framework/frameworktest"
	"github.com/nodeplane/nodeplane/internal/scheduler/plugins/noderesources"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newCache(t *testing.T, ttl time.Duration) (*cache.Cache, *testingclock.FakeClock) {
	t.Helper()
	clk := testingclock.NewFakeClock(t0)
	c, err := cache.New(cache.Config{Clock: clk, AssumedPodTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return c, clk
}

// fits runs NodeResourcesFit for pod against the snapshot's node.
func fits(t *testing.T, c *cache.Cache, s *cache.Snapshot, node string, pod *corev1.Pod) *framework.Status {
	t.Helper()
	c.UpdateSnapshot(s)
	ni := s.Get(node)
	if ni == nil {
		t.Fatalf("node %s not in the snapshot", node)
	}
	fit, err := noderesources.NewFit(noderesources.DefaultFitConfig())
	if err != nil {
		t.Fatal(err)
	}
	state := framework.NewCycleState()
	fit.PreFilter(context.Background(), state, pod, s.List())
	return fit.Filter(context.Background(), state, pod, ni)
}

func TestAssumeTakesTheLastSlotAndForgetFreesIt(t *testing.T) {
	c, _ := newCache(t, 0)
	c.AddNode(ft.Node("n1", ft.Allocatable("cpu", "1", "memory", "1Gi", "pods", "2")))
	c.AddPod(ft.Pod("running", ft.OnNode("n1"), ft.Container("cpu", "500m")))
	s := cache.NewSnapshot()

	first := ft.Pod("first", ft.Container("cpu", "500m"))
	if st := fits(t, c, s, "n1", first); !st.IsSuccess() {
		t.Fatalf("first pod does not fit an empty slot: %v", st)
	}
	if err := c.AssumePod(first, "n1"); err != nil {
		t.Fatal(err)
	}
	if first.Spec.NodeName != "" {
		t.Error("AssumePod modified the caller's pod")
	}
	second := ft.Pod("second", ft.Container("cpu", "100m"))
	if st := fits(t, c, s, "n1", second); st.Message() != "Too many pods, Insufficient cpu" {
		t.Fatalf("after assuming the last slot: %v, want Too many pods and Insufficient cpu", st)
	}
	if err := c.AssumePod(first, "n1"); !errors.Is(err, cache.ErrAlreadyCached) {
		t.Errorf("assuming twice gave %v, want ErrAlreadyCached", err)
	}
	if err := c.ForgetPod(first); err != nil {
		t.Fatal(err)
	}
	if st := fits(t, c, s, "n1", second); !st.IsSuccess() {
		t.Errorf("after forgetting: %v, want the slot free", st)
	}
}

func TestConfirmedPodsCannotBeForgotten(t *testing.T) {
	c, _ := newCache(t, 0)
	c.AddNode(ft.Node("n1"))
	p := ft.Pod("p", ft.Container("cpu", "1"))
	if err := c.AssumePod(p, "n1"); err != nil {
		t.Fatal(err)
	}
	bound := p.DeepCopy()
	bound.Spec.NodeName = "n1"
	c.AddPod(bound)
	if c.IsAssumed(p) {
		t.Error("the informer's Add did not confirm the assumed pod")
	}
	if err := c.ForgetPod(p); !errors.Is(err, cache.ErrNotAssumed) {
		t.Errorf("forgetting a confirmed pod gave %v, want ErrNotAssumed", err)
	}
	if err := c.ForgetPod(ft.Pod("never-seen")); err != nil {
		t.Errorf("forgetting an unknown pod gave %v, want nil", err)
	}
	if c.PodCount() != 1 {
		t.Errorf("pod count %d, want 1", c.PodCount())
	}
}

func TestAssumedPodsExpire(t *testing.T) {
	c, clk := newCache(t, 30*time.Second)
	c.AddNode(ft.Node("n1"))
	unconfirmed := ft.Pod("unconfirmed", ft.Container("cpu", "1"))
	confirmed := ft.Pod("confirmed", ft.Container("cpu", "1"))
	binding := ft.Pod("binding", ft.Container("cpu", "1"))
	for _, p := range []*corev1.Pod{unconfirmed, confirmed, binding} {
		if err := c.AssumePod(p, "n1"); err != nil {
			t.Fatal(err)
		}
	}
	c.FinishBinding(unconfirmed)
	c.FinishBinding(confirmed)
	bound := confirmed.DeepCopy()
	bound.Spec.NodeName = "n1"
	c.AddPod(bound)

	clk.Step(30*time.Second - time.Nanosecond)
	if got := c.CleanupExpired(); len(got) != 0 {
		t.Fatalf("expired %d pods before the TTL", len(got))
	}
	clk.Step(time.Nanosecond)
	got := c.CleanupExpired()
	if len(got) != 1 || got[0].Name != "unconfirmed" {
		t.Fatalf("expired %v, want only the unconfirmed pod whose binding finished", got)
	}
	s := cache.NewSnapshot()
	c.UpdateSnapshot(s)
	if req := s.Get("n1").Requested.MilliCPU; req != 2000 {
		t.Errorf("node requests %dm after expiry, want 2000m (confirmed + still binding)", req)
	}
}

func TestZeroTTLNeverExpires(t *testing.T) {
	c, clk := newCache(t, 0)
	c.AddNode(ft.Node("n1"))
	p := ft.Pod("p")
	if err := c.AssumePod(p, "n1"); err != nil {
		t.Fatal(err)
	}
	c.FinishBinding(p)
	clk.Step(24 * time.Hour)
	if got := c.CleanupExpired(); len(got) != 0 || !c.IsAssumed(p) {
		t.Errorf("with TTL 0 a pod expired: %v", got)
	}
}

func TestPodLifecycle(t *testing.T) {
	c, _ := newCache(t, 0)
	c.AddNode(ft.Node("n1"))
	c.AddNode(ft.Node("n2"))
	p := ft.Pod("p", ft.OnNode("n1"), ft.Container("cpu", "1"))
	c.AddPod(p)
	s := cache.NewSnapshot()
	c.UpdateSnapshot(s)
	if got := s.Get("n1").Requested.MilliCPU; got != 1000 {
		t.Fatalf("n1 requests %dm, want 1000m", got)
	}

	bigger := ft.Pod("p", ft.OnNode("n1"), ft.Container("cpu", "2"))
	c.UpdatePod(bigger)
	c.UpdateSnapshot(s)
	if got := s.Get("n1").Requested.MilliCPU; got != 2000 || len(s.Get("n1").Pods) != 1 {
		t.Fatalf("after update n1 requests %dm with %d pods, want 2000m with 1", got, len(s.Get("n1").Pods))
	}

	done := bigger.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	c.UpdatePod(done)
	c.UpdateSnapshot(s)
	if got := s.Get("n1").Requested.MilliCPU; got != 0 || c.PodCount() != 0 {
		t.Errorf("a succeeded pod still holds %dm (%d pods cached)", got, c.PodCount())
	}
}

func TestRemovedNodeLeavesTheSnapshotButKeepsItsPods(t *testing.T) {
	c, _ := newCache(t, 0)
	c.AddNode(ft.Node("n1"))
	c.AddNode(ft.Node("n2"))
	p := ft.Pod("p", ft.OnNode("n1"), ft.Container("cpu", "1"))
	c.AddPod(p)
	s := cache.NewSnapshot()
	c.UpdateSnapshot(s)
	c.RemoveNode("n1")
	c.UpdateSnapshot(s)
	if len(s.List()) != 1 || s.Get("n1") != nil || c.NodeCount() != 1 {
		t.Fatalf("after removing n1 the snapshot lists %d nodes (n1: %v)", len(s.List()), s.Get("n1"))
	}
	// The node comes back (re-registered): its pod is still accounted.
	c.AddNode(ft.Node("n1"))
	c.UpdateSnapshot(s)
	if ni := s.Get("n1"); ni == nil || ni.Requested.MilliCPU != 1000 {
		t.Fatalf("re-added n1: %v, want its pod's 1000m", ni)
	}
	c.RemovePod(p)
	c.RemoveNode("n1")
	c.UpdateSnapshot(s)
	if len(s.List()) != 1 {
		t.Errorf("snapshot lists %d nodes, want 1", len(s.List()))
	}
}

func TestPodsMayArriveBeforeTheirNode(t *testing.T) {
	c, _ := newCache(t, 0)
	c.AddPod(ft.Pod("early", ft.OnNode("late"), ft.Container("cpu", "1")))
	s := cache.NewSnapshot()
	c.UpdateSnapshot(s)
	if len(s.List()) != 0 || s.Get("late") != nil {
		t.Fatal("a node known only from its pods was listed")
	}
	c.AddNode(ft.Node("late"))
	c.UpdateSnapshot(s)
	if ni := s.Get("late"); ni == nil || ni.Requested.MilliCPU != 1000 || len(s.List()) != 1 {
		t.Errorf("node late: %v, want listed with the early pod's 1000m", ni)
	}
}

func TestSnapshotCopiesOnlyChangedNodes(t *testing.T) {
	c, _ := newCache(t, 0)
	for _, n := range []string{"n1", "n2", "n3"} {
		c.AddNode(ft.Node(n))
	}
	s := cache.NewSnapshot()
	c.UpdateSnapshot(s)
	n1, n2 := s.Get("n1"), s.Get("n2")
	before := n2.Generation

	if err := c.AssumePod(ft.Pod("p", ft.Container("cpu", "1")), "n1"); err != nil {
		t.Fatal(err)
	}
	if n1.Requested.MilliCPU != 0 {
		t.Fatal("the snapshot changed before UpdateSnapshot")
	}
	c.UpdateSnapshot(s)
	if s.Get("n1") != n1 || n1.Requested.MilliCPU != 1000 {
		t.Errorf("n1 was not updated in place: same pointer %v, requests %dm", s.Get("n1") == n1, n1.Requested.MilliCPU)
	}
	if n2.Generation != before {
		t.Errorf("unchanged n2 was copied again (generation %d → %d)", before, n2.Generation)
	}
}

func TestSnapshotInterleavesZones(t *testing.T) {
	c, _ := newCache(t, 0)
	for _, n := range []struct{ name, zone string }{{"a1", "a"}, {"a2", "a"}, {"a3", "a"}, {"b1", "b"}, {"c1", "c"}, {"c2", "c"}} {
		c.AddNode(ft.Node(n.name, ft.Zone(n.zone)))
	}
	s := cache.NewSnapshot()
	c.UpdateSnapshot(s)
	var names []string
	for _, ni := range s.List() {
		names = append(names, ni.Name())
	}
	if got := strings.Join(names, ","); got != "a1,b1,c1,a2,c2,a3" {
		t.Errorf("order %s, want a1,b1,c1,a2,c2,a3", got)
	}
	// Moving a node to another zone reorders the list.
	c.UpdateNode(ft.Node("a3", ft.Zone("b")))
	c.UpdateSnapshot(s)
	names = names[:0]
	for _, ni := range s.List() {
		names = append(names, ni.Name())
	}
	if got := strings.Join(names, ","); got != "a1,b1,c1,a2,a3,c2" {
		t.Errorf("after moving a3 to zone b: %s, want a1,b1,c1,a2,a3,c2", got)
	}
}
