package nodelifecycle

import (
	"encoding/json"
	"fmt"
	"sort"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// threeZones joins 4 nodes in each of zones a, b and c and runs a pass.
func threeZones(t testing.TB) *cluster {
	cl := newCluster(t, DefaultConfig())
	for _, z := range []string{"a", "b", "c"} {
		for i := 0; i < 4; i++ {
			cl.join(fmt.Sprintf("%s%d", z, i), inZone("r", z))
		}
	}
	cl.monitor()
	return cl
}

// silence advances the clock by d in 5 s passes; every node except those
// in silent renews its lease each pass.
func silence(cl *cluster, d time.Duration, silent func(name string) bool) {
	for step := time.Duration(0); step < d; step += 5 * time.Second {
		cl.step(5 * time.Second)
		for name := range cl.nodes {
			if !silent(name) {
				cl.renew(name)
			}
		}
		cl.monitor()
		cl.taint()
	}
}

func TestSummary(t *testing.T) {
	inZoneB := func(name string) bool { return name[0] == 'b' }
	tests := []struct {
		name  string
		run   func(cl *cluster)
		worst int
		check func(t *testing.T, s Summary)
	}{
		{
			name:  "a healthy cluster counts every node Ready in its zone",
			run:   func(cl *cluster) { silence(cl, 10*time.Second, func(string) bool { return false }) },
			worst: 3,
			check: func(t *testing.T, s Summary) {
				if s.Nodes != 12 || len(s.Zones) != 3 {
					t.Fatalf("nodes %d zones %+v", s.Nodes, s.Zones)
				}
				for _, z := range s.Zones {
					if z.State != StateNormal || z.Size != 4 || z.Ready != 4 || z.Unhealthy != 0 || z.Unknown != 0 || z.Tainted != 0 {
						t.Errorf("zone %+v", z)
					}
				}
				if len(s.Worst) != 3 {
					t.Errorf("worst %+v, want 3 nodes", s.Worst)
				}
			},
		},
		{
			name:  "a zone gone dark is FullDisruption with every node Unknown and its nodes the worst",
			run:   func(cl *cluster) { silence(cl, 60*time.Second, inZoneB) },
			worst: 5,
			check: func(t *testing.T, s Summary) {
				for _, z := range s.Zones {
					switch z.Name {
					case "r/b":
						if z.State != StateFullDisruption || z.Unhealthy != 4 || z.Unknown != 4 || z.Ready != 0 {
							t.Errorf("zone b %+v", z)
						}
					default:
						if z.State != StateNormal || z.Ready != 4 {
							t.Errorf("zone %s %+v", z.Name, z)
						}
					}
				}
				if len(s.Worst) != 5 {
					t.Fatalf("worst %+v", s.Worst)
				}
				for i, n := range s.Worst[:4] {
					if n.Zone != "r/b" || n.Ready != corev1.ConditionUnknown || n.SinceHeartbeatSeconds < 60 {
						t.Errorf("worst[%d] = %+v, want a silent zone-b node", i, n)
					}
				}
				if s.Worst[0].Name != "b0" || s.Worst[3].Name != "b3" || s.Worst[4].Zone == "r/b" {
					t.Errorf("worst not ordered by age then name: %+v", s.Worst)
				}
			},
		},
		{
			name:  "one silent node in a big zone is queued and then tainted at the zone's rate",
			run:   func(cl *cluster) { silence(cl, 60*time.Second, func(n string) bool { return n == "c2" }) },
			worst: 1,
			check: func(t *testing.T, s Summary) {
				c := s.Zones[2]
				if c.Name != "r/c" || c.Unhealthy != 1 || c.Unknown != 1 || c.Tainted != 1 || c.Evictions != 1 {
					t.Errorf("zone c %+v", c)
				}
				if len(s.Worst) != 1 || s.Worst[0].Name != "c2" || s.Worst[0].NoExecute != corev1.TaintNodeUnreachable {
					t.Errorf("worst %+v", s.Worst)
				}
			},
		},
		{
			name:  "no worst nodes asked gives none",
			run:   func(cl *cluster) {},
			worst: 0,
			check: func(t *testing.T, s Summary) {
				if len(s.Worst) != 0 {
					t.Errorf("worst %+v", s.Worst)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := threeZones(t)
			tt.run(cl)
			tt.check(t, cl.core.Summary(cl.now, tt.worst))
		})
	}
}

// TestSummaryWorstMatchesAFullSort: the heap's top N equals sorting every
// node by time since its heartbeat.
func TestSummaryWorstMatchesAFullSort(t *testing.T) {
	cl := newCluster(t, DefaultConfig())
	for i := 0; i < 300; i++ {
		cl.join(fmt.Sprintf("n%03d", i), inZone("r", fmt.Sprintf("z%d", i%3)))
	}
	cl.monitor()
	// Node i last renews (i*7)%30 seconds before the final pass.
	for s := 30; s > 0; s-- {
		cl.step(time.Second)
		for i := 0; i < 300; i++ {
			if (i*7)%30 < s {
				cl.renew(fmt.Sprintf("n%03d", i))
			}
		}
		cl.monitor()
	}
	var all []NodeView
	for _, z := range cl.core.View(cl.now).Zones {
		all = append(all, z.Nodes...)
	}
	sort.Slice(all, func(i, j int) bool {
		return older(time.Duration(all[i].SinceHeartbeatSeconds*1e9), all[i].Name, time.Duration(all[j].SinceHeartbeatSeconds*1e9), all[j].Name)
	})
	got := cl.core.Summary(cl.now, 25).Worst
	if len(got) != 25 {
		t.Fatalf("got %d worst nodes", len(got))
	}
	for i := range got {
		if got[i].Name != all[i].Name {
			t.Fatalf("worst[%d] = %s (%.0fs), full sort has %s (%.0fs)", i, got[i].Name, got[i].SinceHeartbeatSeconds, all[i].Name, all[i].SinceHeartbeatSeconds)
		}
	}
}

// BenchmarkSummary100k is the zone view's sample after a monitor pass over
// 100,000 nodes in 3 zones, one zone dark (docs/performance.md).
func BenchmarkSummary100k(b *testing.B) {
	cl := newCluster(b, DefaultConfig())
	for i := 0; i < 100000; i++ {
		cl.join(fmt.Sprintf("n%06d", i), inZone("r", fmt.Sprintf("z%d", i%3)))
	}
	cl.monitor()
	silence(cl, 60*time.Second, func(name string) bool { return name[len(name)-1]%3 == 0 })
	data, err := json.Marshal(cl.core.Summary(cl.now, 20))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	// The process's CPU time too: on a shared machine the wall time per op
	// (ns/op) includes time spent waiting for a core.
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = cl.core.Summary(cl.now, 20)
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(len(data)), "json-bytes")
}

// cpuTime is the user+system CPU time this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
