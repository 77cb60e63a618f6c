package etcd

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
)

func rss() string {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS") {
			return strings.TrimSpace(strings.TrimPrefix(l, "VmRSS:"))
		}
	}
	return ""
}

func heap() string {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return fmt.Sprintf("heapInuse=%dMB sys=%dMB goroutines=%d", m.HeapInuse>>20, m.Sys>>20, runtime.NumGoroutine())
}

func TestScratchMem(t *testing.T) {
	t.Logf("before: rss=%s %s", rss(), heap())
	m := startMember(t, EmbeddedConfig{})
	t.Logf("started: rss=%s %s", rss(), heap())
	s := newTestStore(t, m)
	for i := range 10000 {
		s.Create(t.Context(), leaseKey(i), leaseValue)
	}
	t.Logf("10k leases: rss=%s %s", rss(), heap())
	revs := map[int]int64{}
	for round := range 5 {
		for i := range 10000 {
			kv, _ := s.Get(t.Context(), leaseKey(i))
			revs[i] = kv.ModRevision
			_ = round
		}
		for i := range 10000 {
			s.Update(t.Context(), leaseKey(i), leaseValue, revs[i])
		}
	}
	t.Logf("50k updates: rss=%s %s", rss(), heap())
	cur, _ := s.CurrentRevision(t.Context())
	s.Compact(t.Context(), cur)
	t.Logf("compacted: rss=%s %s", rss(), heap())
}
