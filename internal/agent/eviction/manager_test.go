package eviction

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeplane/nodeplane/internal/agent/config"
	"github.com/nodeplane/nodeplane/internal/agent/host"
)

type fakePods struct {
	pods    []Pod
	evicted []string
}

func (f *fakePods) Active() []Pod { return f.pods }

func (f *fakePods) Evict(_ context.Context, e Eviction) error {
	f.evicted = append(f.evicted, e.Pod.Name)
	f.pods = slices.DeleteFunc(f.pods, func(p Pod) bool { return p.Pod.Name == e.Pod.Name })
	return nil
}

func TestManagerEvictsOnePodPerObservation(t *testing.T) {
	s := config.Defaults()
	s.EvictionHard = map[config.Signal]config.Threshold{config.SignalMemoryAvailable: {Percent: 50}}
	s.EvictionPressureTransitionPeriod = 30 * time.Second
	available := int64(100 * mi)
	clk := clocktesting.NewFakeClock(t0)
	pods := &fakePods{pods: []Pod{using(mkPod("guaranteed", withMemory("64Mi")), 10), using(mkPod("besteffort"), 5)}}
	changes := 0
	reg := prometheus.NewRegistry()
	m, err := New(Config{
		Settings: s,
		Observe: func() (host.Signals, error) {
			return host.Signals{Memory: host.Signal{Available: available, Capacity: 1024 * mi}}, nil
		},
		Pods: pods, OnChange: func() { changes++ }, Metrics: reg, Clock: clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	m.Synchronize(ctx)
	if mem, _, _ := m.Pressure(); !mem || changes != 1 {
		t.Fatalf("MemoryPressure %v after %d changes, want true after 1", mem, changes)
	}
	if !slices.Equal(pods.evicted, []string{"besteffort"}) {
		t.Fatalf("evicted %v after one observation, want only the BestEffort pod", pods.evicted)
	}
	if ok, _, msg := m.Admit(mkPod("new")); ok || msg != "The node had condition: [MemoryPressure]. " {
		t.Errorf("a new BestEffort pod under memory pressure: admitted %v (%q)", ok, msg)
	}
	clk.Step(10 * time.Second)
	m.Synchronize(ctx)
	if !slices.Equal(pods.evicted, []string{"besteffort", "guaranteed"}) {
		t.Fatalf("evicted %v after two observations, want the Guaranteed pod second", pods.evicted)
	}
	if got := evictionsCounted(t, reg, "memory.available"); got != 2 {
		t.Errorf("kubelet_evictions{memory.available} = %v, want 2", got)
	}

	available = 900 * mi // recovered
	clk.Step(10 * time.Second)
	m.Synchronize(ctx)
	if mem, _, _ := m.Pressure(); !mem {
		t.Error("MemoryPressure cleared 10 s after recovery, want it held for the 30 s transition period")
	}
	clk.Step(20 * time.Second)
	m.Synchronize(ctx)
	if mem, _, _ := m.Pressure(); mem || changes != 2 {
		t.Errorf("MemoryPressure %v after %d changes 30 s after recovery, want false after 2", mem, changes)
	}
	if ok, _, _ := m.Admit(mkPod("new")); !ok {
		t.Error("a BestEffort pod is refused after the pressure cleared")
	}
}

// evictionsCounted reads kubelet_evictions{eviction_signal=signal} from reg.
func evictionsCounted(t *testing.T, reg *prometheus.Registry, signal string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kubelet_evictions" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "eviction_signal" && l.GetValue() == signal {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}
