package memstore

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodeplane/nodeplane/internal/storage"
)

// newMeteredStore returns a store recording into a fresh registry under
// backend "memory", with one key /m/k created.
func newMeteredStore(t *testing.T) (*Store, prometheus.Gatherer, int64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m, err := storage.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	s := newTestStore(t, Config{InitialRevision: 1, Metrics: m.Backend("memory")})
	return s, reg, mustCreate(t, s, "/m/k", "v")
}

// requestCounts returns the number of observations of every operation of
// nodeplane_storage_request_duration_seconds, failing on a series of
// another backend.
func requestCounts(t *testing.T, g prometheus.Gatherer) map[string]uint64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatalf("Gather = %v", err)
	}
	out := map[string]uint64{}
	for _, f := range families {
		if f.GetName() != "nodeplane_storage_request_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["backend"] != "memory" {
				t.Errorf("series %v, want backend memory", labels)
			}
			out[labels["operation"]] = m.GetHistogram().GetSampleCount()
		}
	}
	return out
}

func TestEveryOperationIsTimedInItsOwnHistogram(t *testing.T) {
	tests := []struct {
		name string
		op   string
		call func(t *testing.T, s *Store, rev int64)
	}{
		{"a get is timed as get", "get", func(t *testing.T, s *Store, _ int64) {
			if _, err := s.Get(t.Context(), "/m/k"); err != nil {
				t.Fatal(err)
			}
		}},
		{"a get of a missing key is timed too", "get", func(t *testing.T, s *Store, _ int64) {
			_, _ = s.Get(t.Context(), "/m/missing")
		}},
		{"a list is timed as list", "list", func(t *testing.T, s *Store, _ int64) {
			if _, err := s.List(t.Context(), "/m/", storage.ListOptions{}); err != nil {
				t.Fatal(err)
			}
		}},
		{"a count is timed as count", "count", func(t *testing.T, s *Store, _ int64) {
			if _, err := s.Count(t.Context(), "/m/"); err != nil {
				t.Fatal(err)
			}
		}},
		{"a create is timed as create", "create", func(t *testing.T, s *Store, _ int64) {
			mustCreate(t, s, "/m/other", "v")
		}},
		{"an update is timed as update", "update", func(t *testing.T, s *Store, rev int64) {
			mustUpdate(t, s, "/m/k", "v2", rev)
		}},
		{"a conflicting update is timed too", "update", func(t *testing.T, s *Store, rev int64) {
			_, _ = s.Update(t.Context(), "/m/k", []byte("v2"), rev+100)
		}},
		{"an update refused before the lock is timed too", "update", func(t *testing.T, s *Store, _ int64) {
			_, _ = s.Update(t.Context(), "/m/k", []byte("v2"), 0)
		}},
		{"a delete is timed as delete", "delete", func(t *testing.T, s *Store, rev int64) {
			if _, _, err := s.Delete(t.Context(), "/m/k", rev); err != nil {
				t.Fatal(err)
			}
		}},
		{"a watch is timed as watch", "watch", func(t *testing.T, s *Store, _ int64) {
			if _, err := s.Watch(t.Context(), "/m/", storage.WatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}},
		{"reading the current revision is timed as current_revision", "current_revision", func(t *testing.T, s *Store, _ int64) {
			if _, err := s.CurrentRevision(t.Context()); err != nil {
				t.Fatal(err)
			}
		}},
		{"a compaction is timed as compact", "compact", func(t *testing.T, s *Store, rev int64) {
			if err := s.Compact(t.Context(), rev); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, reg, rev := newMeteredStore(t)
			before := requestCounts(t, reg)
			tt.call(t, s, rev)
			after := requestCounts(t, reg)
			for op, n := range after {
				want := before[op]
				if op == tt.op {
					want++
				}
				if n != want {
					t.Errorf("operation %q: %d observations, want %d", op, n, want)
				}
			}
			if _, ok := after[tt.op]; !ok {
				t.Errorf("no series for operation %q", tt.op)
			}
		})
	}
}
