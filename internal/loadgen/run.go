package loadgen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Run prepares the objects cfg.Mode needs, runs the load and returns what
// it measured. Request errors are counted in the Result, not returned; Run
// fails only when the run cannot be set up or ctx ends during setup.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg}
	res := &Result{Mode: cfg.Mode, Clients: len(cfg.Clients), Objects: cfg.Objects}
	var err error
	switch cfg.Mode {
	case ModeLease:
		err = r.runLease(ctx, res)
	case ModeWatch:
		err = r.runWatch(ctx, res)
	default:
		err = r.runOps(ctx, res)
	}
	if err != nil {
		return nil, err
	}
	res.Errors, res.ErrorExamples, res.ErrorCount = r.errs.snapshot()
	res.Conflicts = int(r.conflicts.Load())
	if cfg.Cleanup {
		if err := r.cleanup(context.WithoutCancel(ctx), res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// runner is the state of one run.
type runner struct {
	cfg Config

	lat       recorder // the Result's Latency
	win       recorder // Latency samples since the last progress report
	svc       recorder // open-loop service latency
	errs      errorCounts
	conflicts atomic.Int64

	// created records what to delete on Cleanup.
	createdNodes, createdLeases []string
	createdMu                   sync.Mutex

	// measurement of the measured phase
	measureStart time.Time
	selfCPU0     time.Duration
	hostCPU0     hostCPU
	proc         *procWatcher
	stopProgress func()
	wire0        WireCounts
}

// observe records the latency of a measured request.
func (r *runner) observe(d time.Duration) {
	r.lat.add(d)
	r.win.add(d)
}

func (r *runner) client(i int) kubernetes.Interface { return r.cfg.Clients[i%len(r.cfg.Clients)] }

// beginMeasure marks the start of the measured phase.
func (r *runner) beginMeasure() error {
	r.measureStart = r.cfg.Clock.Now()
	r.selfCPU0 = selfCPU()
	r.hostCPU0, _ = readHostCPU()
	if r.cfg.Wire != nil {
		r.wire0 = r.cfg.Wire.Counts()
	}
	r.stopProgress = r.startProgress()
	if r.cfg.ServerPID > 0 {
		w, err := startProcWatcher(r.cfg.ServerPID, r.cfg.Clock)
		if err != nil {
			return err
		}
		r.proc = w
	}
	return nil
}

// endMeasure marks the end of the measured phase and records its length,
// the generator's CPU and the server's stats.
func (r *runner) endMeasure(res *Result) {
	r.stopProgress()
	elapsed := r.cfg.Clock.Since(r.measureStart)
	res.DurationSeconds = elapsed.Seconds()
	cpu := (selfCPU() - r.selfCPU0).Seconds()
	res.Generator = ProcStats{CPUSeconds: cpu}
	if elapsed > 0 {
		res.Generator.CPUCores = cpu / elapsed.Seconds()
	}
	if host, err := readHostCPU(); err == nil && r.hostCPU0.total > 0 {
		res.Host = host.since(r.hostCPU0)
	}
	if r.cfg.Wire != nil {
		c := r.cfg.Wire.Counts().sub(r.wire0)
		res.Wire = &c
	}
	if r.proc != nil {
		st := r.proc.stop()
		res.Server = &st
	}
}

// fail counts a failed request.
func (r *runner) fail(err error) {
	r.errs.add(errorReason(err), err.Error())
}

// startProgress logs the rate and latency of the last ProgressInterval
// until the returned function is called.
func (r *runner) startProgress() func() {
	every := r.cfg.ProgressInterval
	if every <= 0 {
		return func() {}
	}
	r.win.drain()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := r.cfg.Clock.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
				s := Summarize(r.win.drain())
				_, _, errs := r.errs.snapshot()
				r.cfg.Logger.Info("progress", "perSecond", int(float64(s.Count)/every.Seconds()), "p50Ms", s.P50Ms, "p99Ms", s.P99Ms, "maxMs", s.MaxMs, "errorsTotal", errs)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// errorReason names an error for the error counts: the API Status reason
// when there is one, else "Timeout", "Canceled" or "Transport".
func errorReason(err error) string {
	if reason := apierrors.ReasonForError(err); reason != metav1.StatusReasonUnknown {
		return string(reason)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return fmt.Sprintf("HTTP%d", status.Status().Code)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "Timeout"
	case errors.Is(err, context.Canceled):
		return "Canceled"
	}
	return "Transport"
}

// cleanup deletes the objects the run created.
func (r *runner) cleanup(ctx context.Context, res *Result) error {
	r.createdMu.Lock()
	nodes, leases := r.createdNodes, r.createdLeases
	r.createdMu.Unlock()
	_, err := r.parallel(ctx, len(leases)+len(nodes), func(ctx context.Context, c kubernetes.Interface, i int) (bool, error) {
		var err error
		if i < len(leases) {
			err = c.CoordinationV1().Leases(NodeLeaseNamespace).Delete(ctx, leases[i], metav1.DeleteOptions{})
		} else {
			err = c.CoreV1().Nodes().Delete(ctx, nodes[i-len(leases)], metav1.DeleteOptions{})
		}
		if apierrors.IsNotFound(err) {
			err = nil
		}
		return false, err
	})
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	r.cfg.Logger.Info("cleaned up", "leases", len(leases), "nodes", len(nodes), "mode", string(res.Mode))
	return nil
}

// parallel calls fn for i in [0, n) from SetupConcurrency goroutines; call
// i uses client i. It returns the number of calls that reported created
// and stops at the first error.
func (r *runner) parallel(ctx context.Context, n int, fn func(ctx context.Context, c kubernetes.Interface, i int) (created bool, err error)) (int, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next, created atomic.Int64
	var wg sync.WaitGroup
	for range min(r.cfg.SetupConcurrency, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				ok, err := fn(ctx, r.client(i), i)
				if err != nil {
					cancel(err)
					return
				}
				if ok {
					created.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return int(created.Load()), err
	}
	return int(created.Load()), nil
}

// sleepUntil waits on the clock until t or ctx ends.
func (r *runner) sleepUntil(ctx context.Context, t time.Time) error {
	d := t.Sub(r.cfg.Clock.Now())
	if d <= 0 {
		return ctx.Err()
	}
	timer := r.cfg.Clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C():
		return nil
	}
}
