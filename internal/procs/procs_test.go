package procs

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestPolicyNext(t *testing.T) {
	p := DefaultPolicy(8)
	tests := []struct {
		name string
		in   State
		busy float64
		want State
	}{
		{"a saturated processor doubles at once", State{Procs: 1}, 0.97, State{Procs: 2}},
		{"processors busy past the grow share two intervals running double", State{Procs: 2, Last: 1.6}, 1.6, State{Procs: 4}},
		{"one interval past the grow share is a spike and adds none", State{Procs: 1, Last: 0.4}, 0.9, State{Procs: 1, Last: 0.9}},
		{"the interval after a spike decides with it", State{Procs: 1, Last: 0.9}, 0.7, State{Procs: 2}},
		{"growth stops at the maximum", State{Procs: 6}, 5.9, State{Procs: 8}},
		{"at the maximum nothing grows", State{Procs: 8, Last: 7.9}, 7.9, State{Procs: 8, Last: 7.9}},
		{"growth forgets a calm spell", State{Procs: 2, Calm: 9}, 1.95, State{Procs: 4}},
		{"a calm interval is counted", State{Procs: 2, Calm: 3}, 0.3, State{Procs: 2, Last: 0.3, Calm: 4}},
		{"the last calm interval of a spell takes a processor away", State{Procs: 2, Calm: 9}, 0.3, State{Procs: 1}},
		{"one processor fewer at a time", State{Procs: 8, Calm: 9}, 0.1, State{Procs: 7}},
		{"an interval between the thresholds ends the calm spell", State{Procs: 2, Calm: 9}, 0.65, State{Procs: 2, Last: 0.65}},
		{"one processor never shrinks", State{Procs: 1, Calm: 20}, 0, State{Procs: 1}},
		{"load one processor fewer could carry only with little room is not calm", State{Procs: 4, Calm: 5}, 2, State{Procs: 4, Last: 2}},
		{"a state above the maximum is brought down to it", State{Procs: 16}, 5, State{Procs: 8, Last: 5}},
		{"a state below one is brought up to it", State{Procs: 0}, 0, State{Procs: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.Next(tt.in, tt.busy); got != tt.want {
				t.Errorf("Next(%+v, %g) = %+v, want %+v", tt.in, tt.busy, got, tt.want)
			}
		})
	}
}

// TestPolicyDoesNotOscillate: for any steady load, once the processors
// have settled they stay, whatever the extra cost a processor adds (the
// load measured with more processors is never lower than with fewer).
func TestPolicyDoesNotOscillate(t *testing.T) {
	p := DefaultPolicy(8)
	for work := 0.05; work < 8; work += 0.05 {
		for _, overhead := range []float64{0, 0.05, 0.15, 0.3} {
			busyAt := func(procs int) float64 {
				// Work that needs more than the processors can give
				// saturates them.
				return min(work*(1+overhead*float64(procs-1)), float64(procs))
			}
			s := State{Procs: 8}
			var seen []int
			for range 400 {
				s = p.Next(s, busyAt(s.Procs))
				seen = append(seen, s.Procs)
			}
			tail := seen[len(seen)-100:]
			for _, n := range tail {
				if n != tail[0] {
					t.Fatalf("work %.2f cores, overhead %.2f per processor: processors still change after 300 intervals: %v", work, overhead, tail)
				}
			}
			if b := busyAt(tail[0]); b > p.Grow*float64(tail[0]) && tail[0] < p.Max {
				t.Errorf("work %.2f cores, overhead %.2f: settled at %d processors %.2f busy, past the grow share", work, overhead, tail[0], b)
			}
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		name string
		p    Policy
		ok   bool
	}{
		{"the default is valid", DefaultPolicy(2), true},
		{"no processor is refused", Policy{Max: 0, Grow: 0.7, Saturated: 0.9, Shrink: 0.5, ShrinkAfter: 1}, false},
		{"a grow share of one could never see a saturated processor", Policy{Max: 2, Grow: 1, Saturated: 1, Shrink: 0.5, ShrinkAfter: 1}, false},
		{"a saturation share of one could never be reached", Policy{Max: 2, Grow: 0.7, Saturated: 1, Shrink: 0.5, ShrinkAfter: 1}, false},
		{"a saturation share below the grow share is refused", Policy{Max: 2, Grow: 0.7, Saturated: 0.6, Shrink: 0.5, ShrinkAfter: 1}, false},
		{"a shrink share at the grow share would oscillate", Policy{Max: 2, Grow: 0.7, Saturated: 0.9, Shrink: 0.7, ShrinkAfter: 1}, false},
		{"shrinking needs a calm interval at least", Policy{Max: 2, Grow: 0.7, Saturated: 0.9, Shrink: 0.5}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.p.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

func TestEnabled(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if !Enabled(true, getenv) {
		t.Error("asked, GOMAXPROCS unset: want enabled")
	}
	if Enabled(false, getenv) {
		t.Error("not asked: want disabled")
	}
	env["GOMAXPROCS"] = "2"
	if Enabled(true, getenv) {
		t.Error("GOMAXPROCS set by the operator: want disabled")
	}
}

// fakeProcess is a process whose CPU use and processors a test controls.
type fakeProcess struct {
	mu    sync.Mutex
	cpu   time.Duration
	procs int
	sets  chan int
	reads chan struct{} // a value per reading of the CPU time, if not nil
}

func (f *fakeProcess) cpuTime() (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reads != nil {
		f.reads <- struct{}{}
	}
	return f.cpu, nil
}

func (f *fakeProcess) setProcs(n int) int {
	f.mu.Lock()
	prev := f.procs
	if n > 0 {
		f.procs = n
	}
	f.mu.Unlock()
	if n > 0 {
		f.sets <- n
	}
	return prev
}

func (f *fakeProcess) use(d time.Duration) {
	f.mu.Lock()
	f.cpu += d
	f.mu.Unlock()
}

// TestRunFollowsTheCPUUsed drives Run with a fake clock and a fake
// process: calm intervals take processors away, a busy one doubles them,
// and the end of the run gives back the number the process started with.
func TestRunFollowsTheCPUUsed(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	proc := &fakeProcess{procs: 4, sets: make(chan int, 100), reads: make(chan struct{}, 1)}
	read, stop := startRun(t, proc, Config{
		Policy:   Policy{Max: 4, Grow: 0.7, Saturated: 0.9, Shrink: 0.5, ShrinkAfter: 3},
		Interval: 100 * time.Millisecond, Clock: clk,
	})
	read() // Run's first reading, before its ticker starts
	waitFor(t, "Run to wait on its ticker", clk.HasWaiters)
	// interval is one interval in which the process used busy cores; it
	// returns once Run has read the CPU time at its end.
	interval := func(busy float64) {
		t.Helper()
		proc.use(time.Duration(busy * float64(100*time.Millisecond)))
		clk.Step(100 * time.Millisecond)
		read()
	}
	expect := func(want int) {
		t.Helper()
		select {
		case got := <-proc.sets:
			if got != want {
				t.Fatalf("processors set to %d, want %d", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("processors never set (want %d)", want)
		}
	}
	// Three calm intervals (0.2 cores < 0.5 × 3): 4 → 3; three more
	// (< 0.5 × 2): 3 → 2; three more (< 0.5 × 1): 2 → 1.
	for _, want := range []int{3, 2, 1} {
		for range 3 {
			interval(0.2)
		}
		expect(want)
	}
	interval(0.95) // one saturated processor
	expect(2)
	interval(1.5) // two intervals past 0.7 × 2 on average
	interval(1.5)
	expect(4)
	stop()
	expect(4) // given back what it started with
	if len(proc.sets) != 0 {
		t.Errorf("%d unexpected changes", len(proc.sets))
	}
}

// startRun runs Run on the fake process with cfg. read waits for Run's
// next reading of the CPU time (proc.reads must be set); stop ends Run and
// fails the test on its error.
func startRun(t *testing.T, proc *fakeProcess, cfg Config) (read, stop func()) {
	t.Helper()
	cfg.CPUTime, cfg.SetProcs = proc.cpuTime, proc.setProcs
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	read = func() {
		t.Helper()
		select {
		case <-proc.reads:
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not read the CPU time")
		}
	}
	stop = func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
	return read, stop
}

// lateClock is a fake clock whose Now, as Run reads it, runs late by an
// offset the test sets: a tick handled late.
type lateClock struct {
	*clocktesting.FakeClock
	mu   sync.Mutex
	off  time.Duration
	nows chan struct{} // a value per call of Now
}

func (c *lateClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nows <- struct{}{}
	return c.FakeClock.Now().Add(c.off)
}

func (c *lateClock) setLate(d time.Duration) {
	c.mu.Lock()
	c.off = d
	c.mu.Unlock()
}

// TestRunFoldsAnEarlyTickIntoTheNext: a tick handled late (the process was
// throttled) is followed by one a few milliseconds later; that short span
// is not measured — 10 ms of CPU in 5 ms would read as two saturated
// processors — but folded into the next interval.
func TestRunFoldsAnEarlyTickIntoTheNext(t *testing.T) {
	clk := &lateClock{FakeClock: clocktesting.NewFakeClock(time.Unix(1_000_000, 0)), nows: make(chan struct{}, 1)}
	proc := &fakeProcess{procs: 1, sets: make(chan int, 100), reads: make(chan struct{}, 1)}
	read, stop := startRun(t, proc, Config{
		Policy:   DefaultPolicy(2),
		Interval: 100 * time.Millisecond, Clock: clk,
	})
	// tick steps to the next tick and returns once Run has read the time.
	tick := func() {
		t.Helper()
		clk.Step(100 * time.Millisecond)
		select {
		case <-clk.nows:
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not take the tick")
		}
	}
	read()
	<-clk.nows // the start of the first interval
	waitFor(t, "Run to wait on its ticker", clk.HasWaiters)
	clk.setLate(95 * time.Millisecond) // the first tick is handled 95 ms late
	tick()
	read()
	clk.setLate(0) // the second on time: 5 ms after the first
	proc.use(10 * time.Millisecond)
	tick()
	tick() // the third: 10 ms over 105 ms
	read()
	tick() // one more, so that the third's decision is made
	read()
	stop()
	close(proc.sets)
	var sets []int
	for n := range proc.sets {
		sets = append(sets, n)
	}
	if len(sets) != 1 || sets[0] != 1 {
		t.Errorf("processors set to %v, want only the start's 1 given back at the end", sets)
	}
}

func TestRunRefusesASecondSizer(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	proc := &fakeProcess{procs: 2, sets: make(chan int, 100)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Clock: clk, CPUTime: proc.cpuTime, SetProcs: proc.setProcs})
	}()
	waitFor(t, "the first Run to wait on its ticker", clk.HasWaiters)
	err := Run(ctx, Config{Clock: clk, CPUTime: proc.cpuTime, SetProcs: proc.setProcs})
	if !errors.Is(err, ErrRunning) {
		t.Errorf("second Run: %v, want ErrRunning", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("first Run: %v", err)
	}
}

func TestRunWithOneProcessorDoesNothing(t *testing.T) {
	proc := &fakeProcess{procs: 1, sets: make(chan int, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := Run(ctx, Config{CPUTime: proc.cpuTime, SetProcs: proc.setProcs}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if ctx.Err() != nil {
		t.Error("Run waited for the context instead of returning at once")
	}
	if len(proc.sets) != 0 {
		t.Errorf("processors changed to %d", <-proc.sets)
	}
}

func TestProcessCPUTimeGrowsWithWork(t *testing.T) {
	before, err := processCPUTime()
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	deadline := time.Now().Add(10 * time.Second)
	for {
		after, err := processCPUTime()
		if err != nil {
			t.Fatal(err)
		}
		if after > before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU time stayed at %v through 10 s of work", before)
		}
		for i := range 1_000_000 {
			x += i
		}
	}
}

// waitFor polls cond, yielding between polls, until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		runtime.Gosched()
	}
}
