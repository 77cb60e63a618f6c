// Package procs sizes the Go scheduler to a process's load: GOMAXPROCS
// follows the CPU the process uses, between one processor and the number
// the runtime chose at start (the machine's CPUs, or its container's limit).
//
// Why: each processor (P) the runtime has but does not need costs CPU. A
// goroutine made runnable while a P is idle wakes a thread for it (a futex
// call); the thread looks for work — the run queues, the network poller,
// the other processors' queues — finds little, and goes back to sleep. A
// server handling many small requests wakes goroutines several times per
// request (a connection's reader, a worker, the watchers of what it wrote),
// so at a few thousand requests a second on two CPUs one processor instead
// of two saves 15–25 % of its CPU (docs/performance.md, "One processor
// while one is enough"). With one
// P there is nobody to wake: the goroutine runs when the current one parks.
// Under load every P is busy, nothing is woken in vain, and the process
// needs them all: so the P's grow as soon as the CPU used nears what they
// can give, and shrink only after a calm spell.
//
// Policy is the decision, a pure function of the CPU used; Run is the
// shell that measures (getrusage) and applies (runtime.GOMAXPROCS).
package procs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/utils/clock"
)

// Policy decides how many processors the process gets from the CPU it used
// over the last intervals. Busy is CPU time used / wall time: the cores the
// process kept busy on average.
type Policy struct {
	// Max is the most processors (GOMAXPROCS) given; at least 1.
	Max int
	// Grow and Saturated: the processors double, up to Max, when the
	// process kept more than Grow of them busy over the last two intervals
	// (busy > Grow × procs on average), or more than Saturated of them over
	// the last one — a burst. Two intervals for Grow, so that a spike (a
	// garbage collection, a controller's pass) does not add processors
	// that then take a calm spell to go; both below 1, so that a saturated
	// processor, which can never show more than itself busy, is noticed.
	// Defaults 0.75 and 0.95.
	Grow, Saturated float64
	// Shrink and ShrinkAfter: one processor goes when the process kept less
	// than Shrink of one processor fewer busy (busy < Shrink × (procs − 1))
	// for ShrinkAfter intervals in a row. Shrink is below Grow, so that the
	// smaller set is far from growing back (with fewer processors the same
	// work costs less CPU, never more). Defaults 0.6 and 10.
	Shrink      float64
	ShrinkAfter int
}

// DefaultPolicy is the policy for up to max processors.
func DefaultPolicy(max int) Policy {
	return Policy{Max: max, Grow: 0.75, Saturated: 0.95, Shrink: 0.6, ShrinkAfter: 10}
}

// Validate reports a policy that could not work.
func (p Policy) Validate() error {
	switch {
	case p.Max < 1:
		return fmt.Errorf("max processors %d, want at least 1", p.Max)
	case p.Grow <= 0 || p.Grow >= 1:
		return fmt.Errorf("grow threshold %g, want between 0 and 1", p.Grow)
	case p.Saturated < p.Grow || p.Saturated >= 1:
		return fmt.Errorf("saturation threshold %g, want from the grow threshold %g to below 1", p.Saturated, p.Grow)
	case p.Shrink <= 0 || p.Shrink >= p.Grow:
		return fmt.Errorf("shrink threshold %g, want above 0 and below the grow threshold %g", p.Shrink, p.Grow)
	case p.ShrinkAfter < 1:
		return fmt.Errorf("shrink after %d intervals, want at least 1", p.ShrinkAfter)
	}
	return nil
}

// State is what the policy remembers between intervals.
type State struct {
	// Procs is the number of processors the process has.
	Procs int
	// Last is the busy of the interval before, with the same processors
	// (0 after a change).
	Last float64
	// Calm counts the intervals in a row that were calm enough to shrink.
	Calm int
}

// Next is the state after an interval in which the process kept busy
// cores busy.
func (p Policy) Next(s State, busy float64) State {
	procs := min(max(s.Procs, 1), p.Max)
	n := float64(procs)
	switch {
	case procs < p.Max && (busy > p.Saturated*n || (busy+s.Last)/2 > p.Grow*n):
		return State{Procs: min(2*procs, p.Max)}
	case procs > 1 && busy < p.Shrink*(n-1):
		if s.Calm+1 >= p.ShrinkAfter {
			return State{Procs: procs - 1}
		}
		return State{Procs: procs, Last: busy, Calm: s.Calm + 1}
	}
	return State{Procs: procs, Last: busy}
}

// Config configures Run. Zero values take the defaults named.
type Config struct {
	// Policy decides; default DefaultPolicy of the GOMAXPROCS the process
	// has when Run starts.
	Policy Policy
	// Interval is how often the CPU used is measured and the policy
	// applied. Default 200 ms: a burst waits at most about that long for
	// more processors.
	Interval time.Duration
	// Clock paces the measurements. Default: the real clock.
	Clock clock.WithTicker
	// CPUTime is the CPU time the process has used so far, user and
	// system. Default: getrusage(RUSAGE_SELF).
	CPUTime func() (time.Duration, error)
	// SetProcs sets the processors and returns the previous number, as
	// runtime.GOMAXPROCS. Default: runtime.GOMAXPROCS.
	SetProcs func(n int) int
	// Logger receives each change at debug level. Default: discard.
	Logger *slog.Logger
}

// Enabled says whether the process should size its own processors: when
// asked to (a command's flag), and only when GOMAXPROCS is not set in its
// environment — an operator who set it has chosen.
func Enabled(asked bool, getenv func(string) string) bool {
	return asked && getenv("GOMAXPROCS") == ""
}

// ErrRunning is Run's error while another Run sizes the same process.
var ErrRunning = errors.New("procs: the processors are already sized by another caller")

var running atomic.Bool

// Run sizes the process's processors until ctx ends, then gives it back
// the number it had. Only one Run at a time may size a process
// (ErrRunning). With a Max of one there is nothing to size: it returns at
// once.
func Run(ctx context.Context, cfg Config) error {
	if cfg.SetProcs == nil {
		cfg.SetProcs = runtime.GOMAXPROCS
	}
	start := cfg.SetProcs(0)
	if cfg.Policy == (Policy{}) {
		cfg.Policy = DefaultPolicy(start)
	}
	if err := cfg.Policy.Validate(); err != nil {
		return fmt.Errorf("procs: %w", err)
	}
	if cfg.Policy.Max == 1 {
		return nil
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 200 * time.Millisecond
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.CPUTime == nil {
		cfg.CPUTime = processCPUTime
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if !running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer running.Store(false)
	defer cfg.SetProcs(start)

	cpu, err := cfg.CPUTime()
	if err != nil {
		return fmt.Errorf("procs: read the process's CPU time: %w", err)
	}
	state := State{Procs: min(start, cfg.Policy.Max)}
	if state.Procs != start {
		cfg.SetProcs(state.Procs)
	}
	last := cfg.Clock.Now()
	tick := cfg.Clock.NewTicker(cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C():
		}
		now := cfg.Clock.Now()
		elapsed := now.Sub(last)
		if elapsed < cfg.Interval/2 {
			// A tick delivered late, right before the next one (the
			// process was throttled or descheduled): too short a span to
			// measure; it is folded into the next interval.
			continue
		}
		used, err := cfg.CPUTime()
		if err != nil {
			return fmt.Errorf("procs: read the process's CPU time: %w", err)
		}
		busy := float64(used-cpu) / float64(elapsed)
		cpu, last = used, now
		next := cfg.Policy.Next(state, busy)
		if next.Procs != state.Procs {
			cfg.SetProcs(next.Procs)
			cfg.Logger.Debug("scheduler processors resized", "from", state.Procs, "to", next.Procs, "busyCores", math.Round(busy*100)/100)
		}
		state = next
	}
}

// processCPUTime is the CPU time the process has used, user and system.
func processCPUTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
