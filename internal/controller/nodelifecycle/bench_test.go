package nodelifecycle

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkMonitor10k is one monitor pass plus tainting step over 10,000
// nodes in 10 zones, every agent renewing, one in fifty silent.
func BenchmarkMonitor10k(b *testing.B) {
	cl := newCluster(b, DefaultConfig())
	var alive []string
	for i := 0; i < 10000; i++ {
		name := fmt.Sprintf("n%05d", i)
		cl.join(name, inZone("r", fmt.Sprintf("z%d", i%10)))
		if i%50 != 0 {
			alive = append(alive, name)
		}
	}
	cl.monitor()
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
