package sim

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/utils/clock"
)

func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.observe(time.Duration(i) * time.Millisecond)
	}
	tests := []struct {
		name string
		q    float64
		want time.Duration
	}{
		{"the median of 1..1000 ms is about 500 ms", 0.5, 500 * time.Millisecond},
		{"the 99th percentile is about 990 ms", 0.99, 990 * time.Millisecond},
		{"the maximum is exact", 1, 1000 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := h.quantile(tt.q)
			if got < tt.want*96/100 || got > tt.want*105/100 {
				t.Errorf("quantile(%v) = %v, want within 4%% of %v", tt.q, got, tt.want)
			}
		})
	}
	h.reset()
	if h.quantile(0.5) != 0 {
		t.Error("reset histogram still reports values")
	}
}

func TestSchedulerRunsEachTaskAtItsInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		s := newScheduler(clock.RealClock{}, 4)
		start := time.Now()
		var mu sync.Mutex
		runs := map[string][]time.Duration{}
		for _, job := range []struct {
			name  string
			every time.Duration
		}{{"fast", time.Second}, {"slow", 3 * time.Second}} {
			s.add(start, func(context.Context) time.Duration {
				mu.Lock()
				runs[job.name] = append(runs[job.name], time.Since(start))
				mu.Unlock()
				return job.every
			})
		}
		go s.run(ctx, 4)
		time.Sleep(6500 * time.Millisecond) // bubble time: synctest advances the fake clock at once
		cancel()
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if n := len(runs["fast"]); n != 7 {
			t.Errorf("the 1 s task ran %d times in 6.5 s, want 7 (%v)", n, runs["fast"])
		}
		if n := len(runs["slow"]); n != 3 {
			t.Errorf("the 3 s task ran %d times in 6.5 s, want 3 (%v)", n, runs["slow"])
		}
		for i, at := range runs["slow"] {
			if want := time.Duration(i) * 3 * time.Second; at != want {
				t.Errorf("slow run %d at %v, want %v", i, at, want)
			}
		}
	})
}

func TestParseZones(t *testing.T) {
	got := ParseZones(" a, b,,c ")
	if len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Errorf("ParseZones = %q", got)
	}
	if ParseZones("") != nil {
		t.Error("empty --zones gave zones")
	}
}

func TestSelectorPicksNodes(t *testing.T) {
	s := &Sim{cfg: Config{Nodes: 9, Zones: []string{"a", "b", "c"}, NamePrefix: "sim-"}}
	var nodes []*node
	for i := range 9 {
		nodes = append(nodes, &node{name: s.Name(i), index: i, zone: s.cfg.Zones[i%3]})
	}
	tests := []struct {
		name string
		sel  Selector
		want []int
	}{
		{"a node name picks that node only", Selector{Node: "sim-4"}, []int{4}},
		{"a zone picks all of its nodes", Selector{Zone: "b"}, []int{1, 4, 7}},
		{"a zone with a count picks its first nodes by index", Selector{Zone: "b", Count: 2}, []int{1, 4}},
		{"a count larger than the zone picks the whole zone", Selector{Zone: "c", Count: 50}, []int{2, 5, 8}},
		{"an unknown zone picks nothing", Selector{Zone: "d"}, nil},
		{"an empty selector picks nothing", Selector{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int
			for _, n := range nodes {
				if s.selects(tt.sel, n) {
					got = append(got, n.index)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("selected %v, want %v", got, tt.want)
			}
		})
	}
}
