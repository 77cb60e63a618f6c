package loadgen

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	tests := []struct {
		name    string
		samples []time.Duration
		q       float64
		want    time.Duration
	}{
		{"no samples give zero", nil, 0.99, 0},
		{"one sample is every percentile", ms(7), 0.5, 7 * time.Millisecond},
		{"q 0 is the minimum", ms(1, 2, 3), 0, time.Millisecond},
		{"q 1 is the maximum", ms(1, 2, 3), 1, 3 * time.Millisecond},
		{"median of an odd count is the middle sample", ms(1, 2, 3), 0.5, 2 * time.Millisecond},
		{"median of an even count is the lower middle (nearest rank)", ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{"p99 of 1..100 is 99", hundred, 0.99, 99 * time.Millisecond},
		{"p90 of ten samples is the ninth despite float rounding", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.9, 9 * time.Millisecond},
		{"p99 of ten samples is the maximum", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.99, 10 * time.Millisecond},
		{"p99.9 of 1..100 is the maximum", hundred, 0.999, 100 * time.Millisecond},
		{"a tiny q still picks the first sample", hundred, 0.001, time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.samples, tt.q); got != tt.want {
				t.Errorf("Percentile(q=%v) = %v, want %v", tt.q, got, tt.want)
			}
		})
	}
}

func TestSummarizeSortsAndSummarises(t *testing.T) {
	samples := []time.Duration{4 * time.Millisecond, time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond, 1500 * time.Microsecond}
	got := Summarize(samples)
	want := Summary{Count: 5, MeanMs: 2.3, P50Ms: 2, P90Ms: 4, P99Ms: 4, P999Ms: 4, MaxMs: 4}
	if got != want {
		t.Errorf("Summarize = %+v, want %+v", got, want)
	}
	if (Summarize(nil) != Summary{}) {
		t.Errorf("Summarize(nil) = %+v, want the zero Summary", Summarize(nil))
	}
}

func TestRecorderSummaryKeepsRecording(t *testing.T) {
	var r recorder
	r.add(2 * time.Millisecond)
	r.add(time.Millisecond)
	if got := r.summary(); got.Count != 2 || got.MaxMs != 2 {
		t.Fatalf("summary = %+v, want 2 samples, max 2ms", got)
	}
	r.add(5 * time.Millisecond)
	if got := r.summary(); got.Count != 3 || got.MaxMs != 5 {
		t.Errorf("summary = %+v, want 3 samples, max 5ms", got)
	}
}
