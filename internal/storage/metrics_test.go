package storage

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestBackendsShareOneHistogramTellingThemApart(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	etcd, memory := m.Backend("etcd"), m.Backend("memory")
	etcd.Observe(OpUpdate, time.Millisecond)
	memory.Observe(OpUpdate, time.Microsecond)
	memory.Observe(OpUpdate, time.Microsecond)
	memory.Observe(OpWatch, time.Microsecond)

	got := observations(t, reg)

	tests := []struct {
		name             string
		backend, op      string
		wantObservations uint64
	}{
		{"an etcd update is counted under etcd", "etcd", "update", 1},
		{"memory updates are counted under memory", "memory", "update", 2},
		{"an operation of one backend is not counted under the other", "etcd", "watch", 0},
		{"an operation nobody ran has an empty series", "memory", "compact", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, ok := got[series{tt.backend, tt.op}]
			if !ok {
				t.Fatalf("no series {backend=%q, operation=%q}", tt.backend, tt.op)
			}
			if n != tt.wantObservations {
				t.Errorf("%d observations, want %d", n, tt.wantObservations)
			}
		})
	}
	// Backend creates the series of every operation up front.
	if want := 2 * int(numOperations); len(got) != want {
		t.Errorf("%d series, want %d (every operation of both backends)", len(got), want)
	}
}

// series is one backend's operation.
type series struct{ backend, op string }

// observations gathers reg and returns the sample count of every series of
// nodeplane_storage_request_duration_seconds.
func observations(t *testing.T, reg prometheus.Gatherer) map[series]uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather = %v", err)
	}
	out := map[series]uint64{}
	for _, f := range families {
		if f.GetName() != "nodeplane_storage_request_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			var s series
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "backend":
					s.backend = l.GetValue()
				case "operation":
					s.op = l.GetValue()
				}
			}
			out[s] = m.GetHistogram().GetSampleCount()
		}
	}
	return out
}

func TestNewMetricsRefusesToRegisterTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Error("second NewMetrics on one registry succeeded")
	}
}

func TestNilMetricsRecordNothing(t *testing.T) {
	var m *Metrics
	b := m.Backend("etcd")
	if b != nil {
		t.Fatalf("Backend of nil Metrics = %v, want nil", b)
	}
	b.Observe(OpGet, time.Second) // must not panic
}
