package shutdown

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// StateFileName is the shutdown record in the agent's data dir (GNS-8).
const StateFileName = "graceful_node_shutdown_state"

// State is the last shutdown's start and end (end zero while running).
type State struct {
	StartTime time.Time `json:"startTime"`
	EndTime   time.Time `json:"endTime"`
}

// ReadState reads the state file; a missing file is the zero State.
func ReadState(path string) (State, error) {
	var st State
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read shutdown state: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("decode shutdown state %s: %w", path, err)
	}
	return st, nil
}

// WriteState writes the state file atomically: a temporary file in the
// same directory, mode 0644, synced, then renamed over the old one.
func WriteState(path string, st State) error {
	b, err := json.Marshal(stateJSON(st))
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"*")
	if err != nil {
		return fmt.Errorf("write shutdown state: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename there is nothing to remove
	err = f.Chmod(0o644)
	if err == nil {
		_, err = f.Write(b)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("write shutdown state: %w", err)
	}
	return nil
}

// stateJSON writes RFC 3339 times, omitting a zero end.
func stateJSON(st State) map[string]string {
	out := map[string]string{"startTime": st.StartTime.UTC().Format(time.RFC3339)}
	if !st.EndTime.IsZero() {
		out["endTime"] = st.EndTime.UTC().Format(time.RFC3339)
	}
	return out
}

// Gauges are kubelet_graceful_shutdown_{start,end}_time_seconds.
type Gauges struct {
	Start, End prometheus.Gauge
}

// NewGauges creates the gauges and registers them with reg (nil: not
// registered).
func NewGauges(reg prometheus.Registerer) (*Gauges, error) {
	g := &Gauges{
		Start: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: "kubelet", Name: "graceful_shutdown_start_time_seconds",
			Help: "Last graceful shutdown start time since unix epoch in seconds",
		}),
		End: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: "kubelet", Name: "graceful_shutdown_end_time_seconds",
			Help: "Last graceful shutdown end time since unix epoch in seconds",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{g.Start, g.End} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register shutdown gauges: %w", err)
			}
		}
	}
	return g, nil
}

func (g *Gauges) set(st State) {
	g.Start.Set(unixOrZero(st.StartTime))
	g.End.Set(unixOrZero(st.EndTime))
}

func unixOrZero(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.Unix())
}
