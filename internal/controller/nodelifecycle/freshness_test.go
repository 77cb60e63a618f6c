package nodelifecycle

import (
	"errors"
	"testing"
	"time"
)

func TestFreshness(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	type step struct {
		probeAt  float64
		probeRV  string
		probeErr error
		seen     string
		checkAt  float64
		want     bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"no probe yet is stale", []step{{probeAt: -1, checkAt: 0, want: false}}},
		{"a probe the informer has reached is fresh", []step{{probeAt: 0, probeRV: "10", seen: "10", checkAt: 1, want: true}}},
		{"the informer may lag by less than MaxLag", []step{{probeAt: 0, probeRV: "10", seen: "9", checkAt: 4, want: true}}},
		{"a watch lagging past MaxLag is stale", []step{{probeAt: 0, probeRV: "10", seen: "9", checkAt: 6, want: false}}},
		{"catching up makes it fresh again", []step{
			{probeAt: 0, probeRV: "10", seen: "9", checkAt: 6, want: false},
			{probeAt: 7, probeRV: "12", seen: "12", checkAt: 7, want: true},
		}},
		{"failing probes make it stale after MaxProbeAge", []step{
			{probeAt: 0, probeRV: "10", seen: "10", checkAt: 0, want: true},
			{probeAt: 5, probeErr: errors.New("timeout"), checkAt: 9, want: true},
			{probeAt: 10, probeErr: errors.New("timeout"), checkAt: 11, want: false},
		}},
		{"no writes at all stays fresh", []step{
			{probeAt: 0, probeRV: "10", seen: "10", checkAt: 0, want: true},
			{probeAt: 5, probeRV: "10", checkAt: 60, want: false},
			{probeAt: 61, probeRV: "10", checkAt: 61, want: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &Freshness{MaxProbeAge: 10 * time.Second, MaxLag: 5 * time.Second}
			for i, s := range tt.steps {
				if s.probeAt >= 0 {
					f.Probe(at(s.probeAt), s.probeRV, s.probeErr)
				}
				if s.seen != "" {
					f.Seen(s.seen)
				}
				if got, why := f.Fresh(at(s.checkAt)); got != s.want {
					t.Errorf("step %d: fresh = %v (%s), want %v", i, got, why, s.want)
				}
			}
		})
	}
}
