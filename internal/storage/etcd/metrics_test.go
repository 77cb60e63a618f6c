package etcd

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodeplane/nodeplane/internal/storage"
)

func TestMetricsRecordRequestLatencyByOperation(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	metrics, err := storage.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m := startMember(t, EmbeddedConfig{})
	cfg := m.StoreConfig()
	cfg.Metrics = metrics.Backend("etcd")
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rev, _ := s.Create(t.Context(), "/metrics/k", []byte("v"))
	_, _ = s.Update(t.Context(), "/metrics/k", []byte("v2"), rev)
	_, _ = s.Update(t.Context(), "/metrics/k", []byte("v3"), rev) // a conflict counts too
	_, _ = s.Get(t.Context(), "/metrics/missing")

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, f := range families {
		if f.GetName() != "nodeplane_storage_request_duration_seconds" {
			continue
		}
		for _, metric := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range metric.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["backend"] != "etcd" {
				t.Errorf("series %v, want backend etcd", labels)
			}
			got[labels["operation"]] = metric.GetHistogram().GetSampleCount()
		}
	}
	for op, want := range map[string]uint64{"create": 1, "update": 2, "get": 1, "list": 0} {
		if got[op] != want {
			t.Errorf("operation %q: %d samples, want %d", op, got[op], want)
		}
	}
}
