package plugins_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodeplane/nodeplane/internal/scheduler/cache"
	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
	ft "github.com/nodeplane/nodeplane/internal/scheduler/framework/frameworktest"
	"github.com/nodeplane/nodeplane/internal/scheduler/plugins"
	"github.com/nodeplane/nodeplane/internal/scheduler/plugins/podtopologyspread"
)

// scheduler is the pure loop the shell will run: snapshot, schedule,
// assume.
type scheduler struct {
	fw    *framework.Framework
	cache *cache.Cache
	snap  *cache.Snapshot
}

func newScheduler(tb testing.TB, cfg plugins.Config, seed uint64) *scheduler {
	tb.Helper()
	pl, err := plugins.Default(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	fw, err := framework.New(framework.Config{Plugins: pl, Seed: seed})
	if err != nil {
		tb.Fatal(err)
	}
	c, err := cache.New(cache.Config{Clock: testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
	if err != nil {
		tb.Fatal(err)
	}
	return &scheduler{fw: fw, cache: c, snap: cache.NewSnapshot()}
}

func (s *scheduler) schedule(tb testing.TB, pod *corev1.Pod) (string, error) {
	s.cache.UpdateSnapshot(s.snap)
	res, err := s.fw.Schedule(context.Background(), pod, s.snap.List())
	if err != nil {
		return "", err
	}
	if err := s.cache.AssumePod(pod, res.NodeName); err != nil {
		tb.Fatal(err)
	}
	return res.NodeName, nil
}

func TestReplicasSpreadAcrossZones(t *testing.T) {
	replica := func(i int) *corev1.Pod {
		return ft.Pod(fmt.Sprintf("web-7f9c-%d", i), ft.Labels("app", "web", "pod-template-hash", "7f9c"),
			ft.OwnedBy("ReplicaSet", "web-7f9c"), ft.Container("cpu", "500m", "memory", "1Gi"))
	}
	// Zone a's node is eight times bigger, so resource scoring alone would
	// put every replica there; only spreading gives 2/2/2.
	nodes := func() []*corev1.Node {
		return []*corev1.Node{
			ft.Node("big-a", ft.Zone("a"), ft.Allocatable("cpu", "32", "memory", "64Gi", "pods", "110")),
			ft.Node("small-b", ft.Zone("b")),
			ft.Node("small-c", ft.Zone("c")),
		}
	}
	run := func(t *testing.T, cfg plugins.Config, seed uint64) map[string]int {
		s := newScheduler(t, cfg, seed)
		for _, n := range nodes() {
			s.cache.AddNode(n)
		}
		counts := map[string]int{}
		for i := range 6 {
			node, err := s.schedule(t, replica(i))
			if err != nil {
				t.Fatal(err)
			}
			counts[node]++
		}
		return counts
	}
	for seed := range uint64(10) {
		t.Run(fmt.Sprintf("six replicas end 2/2/2 with seed %d", seed), func(t *testing.T) {
			got := run(t, plugins.DefaultConfig(), seed)
			if got["big-a"] != 2 || got["small-b"] != 2 || got["small-c"] != 2 {
				t.Errorf("placement %v, want 2 per zone", got)
			}
		})
	}
	t.Run("without default spreading they all pile onto the big node", func(t *testing.T) {
		cfg := plugins.DefaultConfig()
		cfg.Spread = podtopologyspread.Config{DefaultConstraints: []corev1.TopologySpreadConstraint{}}
		if got := run(t, cfg, 0); got["big-a"] != 6 {
			t.Errorf("placement %v, want all 6 on big-a (this is what the spreading test guards against)", got)
		}
	})
}

func TestFailedSchedulingMessageWithTheDefaultPlugins(t *testing.T) {
	s := newScheduler(t, plugins.DefaultConfig(), 0)
	unschedulableTaint := corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	notReady := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
	s.cache.AddNode(ft.Node("cordoned", ft.Cordoned(), ft.Taints(unschedulableTaint)))
	s.cache.AddNode(ft.Node("not-ready", ft.Taints(notReady)))
	s.cache.AddNode(ft.Node("busy", ft.Allocatable("cpu", "2", "memory", "8Gi", "pods", "110")))
	s.cache.AddNode(ft.Node("tiny", ft.Allocatable("cpu", "500m", "memory", "8Gi", "pods", "110")))
	s.cache.AddPod(ft.Pod("hog", ft.OnNode("busy"), ft.Container("cpu", "1500m")))

	_, err := s.schedule(t, ft.Pod("p", ft.Container("cpu", "1")))
	var fe *framework.FitError
	if !errors.As(err, &fe) {
		t.Fatalf("got %v, want a FitError", err)
	}
	want := "0/4 nodes are available: 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable, 2 Insufficient cpu. " +
		"preemption: 0/4 nodes are available: 1 No preemption victims found for incoming pod, 3 Preemption is not helpful for scheduling."
	if got := fe.Error(); got != want {
		t.Errorf("\n got: %s\nwant: %s", got, want)
	}

	// A pod tolerating both taints and asking less fits the cordoned node,
	// the only one with room left (busy has 500m, tiny has 500m).
	tolerant := ft.Pod("tolerant", ft.Container("cpu", "600m"), ft.Tolerations(
		corev1.Toleration{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists},
		corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists}))
	if node, err := s.schedule(t, tolerant); err != nil || (node != "cordoned" && node != "not-ready") {
		t.Errorf("tolerant pod went to %q (%v), want cordoned or not-ready", node, err)
	}
}

func TestCordonedNodesGetNoNewPods(t *testing.T) {
	s := newScheduler(t, plugins.DefaultConfig(), 0)
	s.cache.AddNode(ft.Node("n1", ft.Zone("a")))
	s.cache.AddNode(ft.Node("n2", ft.Zone("b"), ft.Cordoned()))
	for i := range 20 {
		node, err := s.schedule(t, ft.Pod(fmt.Sprintf("p%d", i), ft.Container("cpu", "10m")))
		if err != nil || node != "n1" {
			t.Fatalf("pod %d went to %q (%v), want n1", i, node, err)
		}
	}
}

// benchCluster adds nodes nodes spread over three zones.
func benchCluster(s *scheduler, nodes int) {
	for i := range nodes {
		s.cache.AddNode(ft.Node(fmt.Sprintf("node-%05d", i), ft.Zone(string(rune('a'+i%3))),
			ft.Allocatable("cpu", "8", "memory", "32Gi", "pods", "110")))
	}
}

// benchmarkSchedule schedules pods onto nodes through the framework and the
// cache, one at a time as the scheduler does, and reports pods/s.
func benchmarkSchedule(b *testing.B, nodes int, pods []*corev1.Pod) {
	b.ReportAllocs()
	scheduled := 0
	for b.Loop() {
		b.StopTimer()
		s := newScheduler(b, plugins.DefaultConfig(), 0)
		benchCluster(s, nodes)
		s.cache.UpdateSnapshot(s.snap)
		b.StartTimer()
		for _, p := range pods {
			if _, err := s.schedule(b, p); err != nil {
				b.Fatal(err)
			}
		}
		scheduled += len(pods)
	}
	b.ReportMetric(float64(scheduled)/b.Elapsed().Seconds(), "pods/s")
}

// BenchmarkSchedule10kPodsOn5kNodes is the upstream perf gate's shape:
// 10,000 plain pending pods onto 5,000 nodes.
func BenchmarkSchedule10kPodsOn5kNodes(b *testing.B) {
	pods := make([]*corev1.Pod, 10000)
	for i := range pods {
		pods[i] = ft.Pod(fmt.Sprintf("pod-%05d", i), ft.Container("cpu", "100m", "memory", "128Mi"))
	}
	benchmarkSchedule(b, 5000, pods)
}

// BenchmarkSchedule10kReplicasOn5kNodes schedules 100 ReplicaSets of 100
// replicas, so default topology spreading counts siblings every cycle.
func BenchmarkSchedule10kReplicasOn5kNodes(b *testing.B) {
	pods := make([]*corev1.Pod, 10000)
	for i := range pods {
		rs := fmt.Sprintf("app%02d-5d8f", i%100)
		pods[i] = ft.Pod(fmt.Sprintf("%s-%05d", rs, i), ft.Labels("app", rs[:5], "pod-template-hash", "5d8f"),
			ft.OwnedBy("ReplicaSet", rs), ft.Container("cpu", "100m", "memory", "128Mi"))
	}
	benchmarkSchedule(b, 5000, pods)
}
