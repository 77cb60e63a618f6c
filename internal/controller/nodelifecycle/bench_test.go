package nodelifecycle

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkMonitor10k is one monitor pass plus tainting step over 10,000
// nodes in 10 zones, every agent renewing, one in fifty silent.
func BenchmarkMonitor10k(b *testing.B) { benchmarkMonitor(b, 10000) }

// BenchmarkMonitor100k is the same over 100,000 nodes.
func BenchmarkMonitor100k(b *testing.B) { benchmarkMonitor(b, 100000) }

func benchmarkMonitor(b *testing.B, nodes int) {
	cl := newCluster(b, DefaultConfig())
	var alive []string
	for i := 0; i < nodes; i++ {
		name := fmt.Sprintf("n%06d", i)
		cl.join(name, inZone("r", fmt.Sprintf("z%d", i%10)))
		if i%50 != 0 {
			alive = append(alive, name)
		}
	}
	cl.monitor()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		cl.step(5 * time.Second)
		for _, n := range alive {
			cl.renew(n)
		}
		obs := cl.observations()
		b.StartTimer()
		cl.core.Monitor(cl.now, true, obs)
		cl.core.Taint(cl.now, true)
	}
}
