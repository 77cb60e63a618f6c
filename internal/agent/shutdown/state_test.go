package shutdown

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestStateFileRoundTripAndGaugesRestored(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, StateFileName)
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	if err := WriteState(path, State{StartTime: start, EndTime: start.Add(25 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if want := `{"endTime":"2026-03-01T10:00:25Z","startTime":"2026-03-01T10:00:00Z"}`; string(b) != want {
		t.Errorf("state file %s, want %s", b, want)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("state file mode %o, want 644", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}

	reg := prometheus.NewRegistry()
	g, err := NewGauges(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{StatePath: path, Gauges: g}); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range families {
		got[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
	}
	want := map[string]float64{
		"kubelet_graceful_shutdown_start_time_seconds": float64(start.Unix()),
		"kubelet_graceful_shutdown_end_time_seconds":   float64(start.Unix() + 25),
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s = %v, want %v (restored from the state file)", name, got[name], v)
		}
	}
}

func TestMissingStateFileIsZero(t *testing.T) {
	st, err := ReadState(filepath.Join(t.TempDir(), StateFileName))
	if err != nil || !st.StartTime.IsZero() || !st.EndTime.IsZero() {
		t.Errorf("ReadState = %+v, %v; want zero, nil", st, err)
	}
}
