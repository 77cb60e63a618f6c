package nodelifecycle

import (
	"reflect"
	"testing"
	"time"
)

// grants returns the offsets from t0 at which a bucket grants tokens when
// asked every 100 ms for span.
func grants(b *tokenBucket, from time.Time, span time.Duration) []time.Duration {
	var out []time.Duration
	for d := time.Duration(0); d <= span; d += 100 * time.Millisecond {
		if b.take(from.Add(d)) {
			out = append(out, d)
		}
	}
	return out
}

func TestTokenBucketPacing(t *testing.T) {
	tests := []struct {
		name string
		rate float64
		span time.Duration
		want []time.Duration
	}{
		{"the primary rate grants one at once and then one every 10 s", 0.1, 35 * time.Second,
			[]time.Duration{0, 10 * time.Second, 20 * time.Second, 30 * time.Second}},
		{"the secondary rate grants one every 100 s", 0.01, 250 * time.Second,
			[]time.Duration{0, 100 * time.Second, 200 * time.Second}},
		{"rate 0 grants nothing, not even at first", 0, time.Hour, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newTokenBucket(tt.rate, t0)
			if got := grants(&b, t0, tt.span); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("grants = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTokenBucketDoesNotSaveUpBeyondBurst(t *testing.T) {
	b := newTokenBucket(0.1, t0)
	later := t0.Add(time.Hour)
	if !b.take(later) {
		t.Fatal("a full bucket refused")
	}
	if b.take(later.Add(time.Second)) {
		t.Error("a second token an hour later: burst is 1")
	}
}

func TestTokenBucketSetRate(t *testing.T) {
	tests := []struct {
		name     string
		prepare  func(b *tokenBucket) // at t0, rate 0.1
		newRate  float64
		firstAt  time.Duration // first grant after the swap at t0+1s; -1: none within 10 min
		sameRate bool
	}{
		{"a full bucket stays full when the rate drops", func(b *tokenBucket) {}, 0.01, 0, false},
		{"an exhausted bucket is drained when the rate drops", func(b *tokenBucket) { b.take(t0) }, 0.01, 100 * time.Second, false},
		{"an exhausted bucket is drained when the rate rises (no burst)", func(b *tokenBucket) { b.take(t0) }, 1, time.Second, false},
		{"rate 0 grants nothing", func(b *tokenBucket) {}, 0, -1, false},
		{"the same rate changes nothing", func(b *tokenBucket) { b.take(t0) }, 0.1, 9 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newTokenBucket(0.1, t0)
			tt.prepare(&b)
			swap := t0.Add(time.Second)
			b.setRate(tt.newRate, swap)
			got := grants(&b, swap, 10*time.Minute)
			if tt.firstAt < 0 {
				if len(got) != 0 {
					t.Errorf("grants = %v, want none", got)
				}
				return
			}
			if len(got) == 0 || got[0] != tt.firstAt {
				t.Errorf("first grant after the swap at %v, want %v (all: %v)", got, tt.firstAt, got)
			}
		})
	}
}

func TestTokenBucketLeavingZeroStartsEmpty(t *testing.T) {
	b := newTokenBucket(0.1, t0)
	b.setRate(0, t0)
	b.setRate(0.1, t0.Add(time.Hour))
	got := grants(&b, t0.Add(time.Hour), 15*time.Second)
	if want := []time.Duration{10 * time.Second}; !reflect.DeepEqual(got, want) {
		t.Errorf("grants after leaving rate 0 = %v, want %v", got, want)
	}
}

func TestTokenBucketSeed(t *testing.T) {
	tests := []struct {
		name string
		last time.Duration // relative to now
		want time.Duration // first grant relative to now
	}{
		{"a taint 3 s ago leaves 7 s to wait", -3 * time.Second, 7 * time.Second},
		{"a taint long ago leaves the bucket full", -time.Minute, 0},
		{"a taint stamped in the future counts as now", time.Minute, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := t0.Add(time.Hour)
			b := newTokenBucket(0.1, now)
			b.seed(now.Add(tt.last), now)
			got := grants(&b, now, 20*time.Second)
			if len(got) == 0 || got[0] != tt.want {
				t.Errorf("grants = %v, want the first at %v", got, tt.want)
			}
		})
	}
}

func TestTaintQueueIsFIFOAndUnique(t *testing.T) {
	q := newTaintQueue()
	q.push("b")
	q.push("a")
	q.push("b")
	q.push("c")
	q.remove("a")
	q.pushFront("c")
	if got, want := q.names(), []string{"c", "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("queue = %v, want %v", got, want)
	}
	if h, _ := q.head(); h != "c" {
		t.Errorf("head = %q, want c", h)
	}
}
