package loadgen

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Summary describes a set of latency samples. Durations are reported in
// milliseconds in JSON (fields ending in Ms).
type Summary struct {
	Count  int     `json:"count"`
	MeanMs float64 `json:"meanMs"`
	P50Ms  float64 `json:"p50Ms"`
	P90Ms  float64 `json:"p90Ms"`
	P99Ms  float64 `json:"p99Ms"`
	P999Ms float64 `json:"p999Ms"`
	MaxMs  float64 `json:"maxMs"`
}

// Percentile returns the q-quantile (0 ≤ q ≤ 1) of sorted samples by the
// nearest-rank method: the smallest sample such that at least q of all
// samples are less than or equal to it. It returns 0 for no samples.
//
// Nearest rank never interpolates, so a reported p99 is a latency some
// request really had, and p100 is the maximum.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if q <= 0 {
		return sorted[0]
	}
	if q >= 1 {
		return sorted[n-1]
	}
	// rank = ceil(q·n), 1-based; the epsilon absorbs binary rounding such
	// as 0.9·10 = 9.000000000000002, which would otherwise round up to 10.
	rank := int(math.Ceil(q*float64(n) - 1e-9))
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

// Summarize sorts samples in place and summarises them.
func Summarize(samples []time.Duration) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	slices.Sort(samples)
	var sum time.Duration
	for _, d := range samples {
		sum += d
	}
	return Summary{
		Count:  len(samples),
		MeanMs: ms(sum / time.Duration(len(samples))),
		P50Ms:  ms(Percentile(samples, 0.50)),
		P90Ms:  ms(Percentile(samples, 0.90)),
		P99Ms:  ms(Percentile(samples, 0.99)),
		P999Ms: ms(Percentile(samples, 0.999)),
		MaxMs:  ms(samples[len(samples)-1]),
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// recorder collects latency samples from many goroutines. Samples are kept
// exactly (8 bytes each: a 60 s run at 10,000/s is 4.8 MB), so percentiles
// are exact rather than bucketed.
type recorder struct {
	mu      sync.Mutex
	samples []time.Duration
}

func (r *recorder) add(d time.Duration) {
	r.mu.Lock()
	r.samples = append(r.samples, d)
	r.mu.Unlock()
}

// drain returns the samples recorded since the last drain and forgets them.
func (r *recorder) drain() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.samples
	r.samples = nil
	return s
}

// summary summarises what was recorded so far; the recorder may keep
// recording.
func (r *recorder) summary() Summary {
	r.mu.Lock()
	s := slices.Clone(r.samples)
	r.mu.Unlock()
	return Summarize(s)
}

// errorCounts counts failed requests by reason (see errorReason) and keeps
// the first message of each reason as an example.
type errorCounts struct {
	mu      sync.Mutex
	m       map[string]int
	example map[string]string
}

func (e *errorCounts) add(reason, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m, e.example = map[string]int{}, map[string]string{}
	}
	e.m[reason]++
	if _, ok := e.example[reason]; !ok {
		e.example[reason] = message
	}
}

// snapshot returns the counts, one example message per reason, and the
// total.
func (e *errorCounts) snapshot() (counts map[string]int, examples map[string]string, total int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	counts = make(map[string]int, len(e.m))
	examples = make(map[string]string, len(e.example))
	for k, v := range e.m {
		counts[k] = v
		total += v
	}
	for k, v := range e.example {
		examples[k] = v
	}
	return counts, examples, total
}
