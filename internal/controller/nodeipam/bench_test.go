package nodeipam

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// benchNodes is the cluster size of the benchmarks.
const benchNodes = 100_000

// benchOptions: a /8 cut into /25 blocks (131,072) holds 100,000 nodes; a
// dual-stack pair cannot (an IPv6 range is cut into at most 2^16 blocks).
var benchOptions = Options{ClusterCIDR: "10.0.0.0/8", NodeCIDRMaskSize: 25, ServiceClusterIPRange: "10.96.0.0/12"}

// BenchmarkAllocate100kNodes reserves a block for each of 100,000 nodes in
// a fresh allocator, metrics on.
//
//	go test -run '^$' -bench 'BenchmarkAllocate100kNodes|BenchmarkRebuild100kNodes|BenchmarkAllocateNearlyFull' -benchmem ./internal/controller/nodeipam/
func BenchmarkAllocate100kNodes(b *testing.B) {
	cfg := mustConfig(b, benchOptions)
	b.ReportAllocs()
	var spent time.Duration
	for range b.N {
		a, err := NewAllocator(cfg, NewMetrics(prometheus.NewRegistry()))
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for range benchNodes {
			if _, err := a.Reserve(); err != nil {
				b.Fatal(err)
			}
		}
		spent += time.Since(start)
	}
	b.ReportMetric(float64(benchNodes*b.N)/spent.Seconds(), "allocations/s")
}

// BenchmarkRebuild100kNodes is the start-up rebuild: occupy the ranges
// 100,000 nodes already hold.
func BenchmarkRebuild100kNodes(b *testing.B) {
	cfg := mustConfig(b, benchOptions)
	seed, err := NewAllocator(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	held := make([][]string, benchNodes)
	for i := range held {
		if held[i], err = seed.Reserve(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		a, err := NewAllocator(cfg, NewMetrics(prometheus.NewRegistry()))
		if err != nil {
			b.Fatal(err)
		}
		for i, cidrs := range held {
			if err := a.Occupy(fmt.Sprint("n", i), cidrs); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(benchNodes*b.N)/b.Elapsed().Seconds(), "nodes/s")
}

// BenchmarkAllocateNearlyFull is the worst case of the next-candidate
// search: one free block in 131,072, just behind the search position.
func BenchmarkAllocateNearlyFull(b *testing.B) {
	cfg := mustConfig(b, Options{ClusterCIDR: "10.0.0.0/8", NodeCIDRMaskSize: 25})
	a, err := NewAllocator(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	var last []string
	for {
		got, err := a.Reserve()
		if err != nil {
			break
		}
		last = got
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := a.Release(last); err != nil {
			b.Fatal(err)
		}
		if last, err = a.Reserve(); err != nil {
			b.Fatal(err)
		}
	}
}
