package loadgen

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestScheduleSpreadsFirstRenewalsOverOneInterval(t *testing.T) {
	const n = 10_000
	s := NewSchedule(n, t0, 10*time.Second, 0.04, rand.New(rand.NewPCG(1, 2)))
	due := s.PopDue(t0.Add(10*time.Second), nil)
	if len(due) != n {
		t.Fatalf("%d leases due within one interval, want all %d", len(due), n)
	}
	// Uniform spread: each of the ten seconds holds about a tenth.
	var perSecond [10]int
	for i, d := range due {
		if i > 0 && d.At.Before(due[i-1].At) {
			t.Fatalf("due[%d] at %v is before due[%d] at %v: not in time order", i, d.At, i-1, due[i-1].At)
		}
		perSecond[int(d.At.Sub(t0)/time.Second)]++
	}
	for sec, got := range perSecond {
		if got < 800 || got > 1200 {
			t.Errorf("second %d has %d first renewals, want about 1000", sec, got)
		}
	}
}

func TestScheduleRenewsAfterIntervalPlusJitterFromCompletion(t *testing.T) {
	const interval = 10 * time.Second
	s := NewSchedule(1, t0, interval, 0.04, rand.New(rand.NewPCG(3, 4)))
	if got := s.PopDue(t0.Add(interval), nil); len(got) != 1 {
		t.Fatalf("PopDue = %v, want the one lease", got)
	}
	if _, ok := s.Next(); ok {
		t.Fatal("Next reports a lease waiting while its renewal is in flight")
	}
	finished := t0.Add(12 * time.Second) // a slow renewal
	for range 1000 {
		s.Done(0, finished)
		next, ok := s.Next()
		if !ok {
			t.Fatal("Next after Done: no lease waiting")
		}
		if min, max := finished.Add(interval), finished.Add(interval+400*time.Millisecond); next.Before(min) || !next.Before(max) {
			t.Fatalf("next renewal at +%v after completion, want in [10s, 10.4s)", next.Sub(finished))
		}
		if got := s.PopDue(next.Add(-time.Nanosecond), nil); len(got) != 0 {
			t.Fatalf("PopDue just before the due time returned %v", got)
		}
		if got := s.PopDue(next, nil); len(got) != 1 || !got[0].At.Equal(next) {
			t.Fatalf("PopDue at the due time = %v, want the lease due at %v", got, next)
		}
	}
}

func TestScheduleWithoutJitterIsExact(t *testing.T) {
	s := NewSchedule(0, t0, time.Second, 0, rand.New(rand.NewPCG(5, 6)))
	s.Done(7, t0)
	s.Done(3, t0.Add(500*time.Millisecond))
	got := s.PopDue(t0.Add(2*time.Second), nil)
	want := []Due{{Lease: 7, At: t0.Add(time.Second)}, {Lease: 3, At: t0.Add(1500 * time.Millisecond)}}
	if len(got) != len(want) {
		t.Fatalf("PopDue = %v, want %v", got, want)
	}
	for i := range want {
		if got[i].Lease != want[i].Lease || !got[i].At.Equal(want[i].At) {
			t.Errorf("PopDue[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestScheduleSustainsTargetRate drives a schedule with a fake clock and
// instant renewals and counts renewals per second over many intervals.
func TestScheduleSustainsTargetRate(t *testing.T) {
	const n, interval, jitter = 1000, time.Second, 0.04
	clk := clocktesting.NewFakeClock(t0)
	s := NewSchedule(n, clk.Now(), interval, jitter, rand.New(rand.NewPCG(7, 8)))
	renewals := 0
	var due []Due
	const steps = 60_000 // 60 s in 1 ms steps
	for range steps {
		clk.Step(time.Millisecond)
		due = s.PopDue(clk.Now(), due[:0])
		for _, d := range due {
			renewals++
			s.Done(d.Lease, clk.Now())
		}
	}
	got := float64(renewals) / 60
	want := TargetRate(n, interval, jitter)
	if math.Abs(got-want)/want > 0.02 {
		t.Errorf("%.0f renewals/s, want %.0f ± 2%%", got, want)
	}
}

func TestTargetRate(t *testing.T) {
	tests := []struct {
		name     string
		n        int
		interval time.Duration
		jitter   float64
		want     float64
	}{
		{"100,000 kubelets at 10 s without jitter are 10,000/s", 100_000, 10 * time.Second, 0, 10_000},
		{"the kubelet's 4% jitter lengthens the mean interval by 2%", 100_000, 10 * time.Second, 0.04, 10_000 / 1.02},
		{"no interval is no rate", 10, 0, 0.04, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TargetRate(tt.n, tt.interval, tt.jitter); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("TargetRate = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLeaseIntervalFromRate(t *testing.T) {
	c := Config{Objects: 10_000, Rate: 10_000, JitterFactor: 0.04, Interval: 10 * time.Second}
	got := c.leaseInterval()
	if rate := TargetRate(c.Objects, got, c.JitterFactor); math.Abs(rate-10_000) > 1 {
		t.Errorf("interval %v gives %.1f/s, want 10,000/s", got, rate)
	}
	c.Rate = 0
	if got := c.leaseInterval(); got != 10*time.Second {
		t.Errorf("without a rate the interval is %v, want the configured 10s", got)
	}
}

func TestPacerHandsOutEvenlySpacedStartTimes(t *testing.T) {
	p := NewPacer(t0, 4) // every 250 ms
	for i := range 8 {
		if got, want := p.Next(), t0.Add(time.Duration(i)*250*time.Millisecond); !got.Equal(want) {
			t.Errorf("start %d at %v, want %v", i, got.Sub(t0), want.Sub(t0))
		}
	}
}
