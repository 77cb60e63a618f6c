package sim

import (
	"math"
	"sync/atomic"
	"time"
)

// histogram counts durations in logarithmic buckets (about 4% wide) from
// 10 µs to ~100 s, lock-free, for percentiles without keeping samples.
type histogram struct {
	buckets [nBuckets]atomic.Int64
	count   atomic.Int64
	max     atomic.Int64
}

const (
	nBuckets   = 420
	minBucket  = 10 * time.Microsecond
	bucketBase = 1.04
)

func bucketOf(d time.Duration) int {
	if d <= minBucket {
		return 0
	}
	i := int(math.Log(float64(d)/float64(minBucket))/math.Log(bucketBase)) + 1
	return min(i, nBuckets-1)
}

func bucketUpper(i int) time.Duration {
	return time.Duration(float64(minBucket) * math.Pow(bucketBase, float64(i)))
}

func (h *histogram) observe(d time.Duration) {
	h.buckets[bucketOf(d)].Add(1)
	h.count.Add(1)
	for {
		m := h.max.Load()
		if int64(d) <= m || h.max.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// quantile returns the upper bound of the bucket holding quantile q.
func (h *histogram) quantile(q float64) time.Duration {
	n := h.count.Load()
	if n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(n)))
	var seen int64
	for i := range h.buckets {
		seen += h.buckets[i].Load()
		if seen >= rank {
			return min(bucketUpper(i), time.Duration(h.max.Load()))
		}
	}
	return time.Duration(h.max.Load())
}

// reset clears the histogram (not atomic as a whole; fine for reporting windows).
func (h *histogram) reset() {
	for i := range h.buckets {
		h.buckets[i].Store(0)
	}
	h.count.Store(0)
	h.max.Store(0)
}
