package loadgen

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/util/retry"
)

// renewal is the outcome of one lease renewal.
type renewal struct {
	lease    int
	due      time.Time
	started  time.Time
	finished time.Time
	err      error
	// throttled: at least one attempt was answered 429 (client-go then
	// waited Retry-After and tried again).
	throttled bool
}

// runLease is the heartbeat path: every lease is renewed on its own
// kubelet-like schedule (see Schedule) by the client it belongs to.
func (r *runner) runLease(ctx context.Context, res *Result) error {
	cfg := r.cfg
	var nodes []*corev1.Node
	if cfg.WithNodes {
		var setup *Setup
		var err error
		if nodes, setup, err = r.ensureNodes(ctx, cfg.Objects); err != nil {
			return err
		}
		res.Setup = append(res.Setup, setup)
	}
	leases, setup, err := r.ensureLeases(ctx, cfg.Objects, nodes)
	if err != nil {
		return err
	}
	res.Setup = append(res.Setup, setup)
	res.ObjectJSONBytes, res.ObjectProtobufBytes = objectSizes(leases[0])
	if cfg.NodeClients != nil {
		res.NodeConnections = &NodeConnections{Connections: len(cfg.NodeClients)}
	}
	if cfg.NodeWatches {
		nw, err := r.openNodeWatches(ctx)
		if err != nil {
			return err
		}
		defer func() {
			res.NodeConnections.EndedEarly = nw.stop()
			res.NodeConnections.Watches = nw.started
			res.NodeConnections.Events = nw.events.Load()
		}()
		cfg.Logger.Info("node watches open", "watches", nw.started)
	}

	interval := cfg.leaseInterval()
	res.IntervalSeconds, res.JitterFactor = interval.Seconds(), cfg.JitterFactor
	res.TargetPerSecond = TargetRate(cfg.Objects, interval, cfg.JitterFactor)
	cfg.Logger.Info("renewing leases", "leases", cfg.Objects, "clients", len(cfg.Clients), "interval", interval, "target", fmt.Sprintf("%.0f/s", res.TargetPerSecond))

	var lag recorder
	var measured, throttled, throttledOK int
	clk := cfg.Clock
	start := clk.Now()
	measureFrom, end := start.Add(cfg.Warmup), start.Add(cfg.Warmup+cfg.Duration)
	sched := NewSchedule(cfg.Objects, start, interval, cfg.JitterFactor, cfg.Rand)
	done := make(chan renewal, cfg.Objects)
	inflight := 0
	measuring := false
	timer := clk.NewTimer(time.Hour)
	defer timer.Stop()
	record := func(rn renewal) {
		if rn.started.Before(measureFrom) || !rn.started.Before(end) {
			return
		}
		measured++
		r.observe(rn.finished.Sub(rn.started))
		lag.add(rn.started.Sub(rn.due))
		if rn.err != nil {
			r.fail(rn.err)
		}
		if rn.throttled {
			throttled++
			if rn.err == nil {
				throttledOK++
			}
		}
	}
	var due []Due
	for {
		now := clk.Now()
		if !measuring && !now.Before(measureFrom) {
			if err := r.beginMeasure(); err != nil {
				return err
			}
			measuring = true
		}
		if !now.Before(end) || ctx.Err() != nil {
			break
		}
		due = sched.PopDue(now, due[:0])
		for _, d := range due {
			inflight++
			go func(d Due) {
				rn := renewal{lease: d.Lease, due: d.At, started: clk.Now()}
				actx, a := withAttempts(ctx)
				rn.err = r.renew(actx, leases, d.Lease)
				rn.finished = clk.Now()
				rn.throttled = a.tooMany.Load() > 0
				done <- rn
			}(d)
		}
		wake := end
		if !measuring {
			wake = measureFrom
		}
		if next, ok := sched.Next(); ok && next.Before(wake) {
			wake = next
		}
		timer.Reset(wake.Sub(now))
		select {
		case <-ctx.Done():
		case rn := <-done:
			inflight--
			record(rn)
			sched.Done(rn.lease, rn.finished)
		case <-timer.C():
		}
	}
	// Renewals started in the window count even when they finish after it.
	for ; inflight > 0; inflight-- {
		record(<-done)
	}
	if measuring {
		r.endMeasure(res)
	}
	res.Requests = measured
	res.Throttled, res.ThrottledSucceeded = throttled, throttledOK
	if res.DurationSeconds > 0 {
		res.AchievedPerSecond = float64(measured) / res.DurationSeconds
	}
	res.Latency = r.lat.summary()
	l := lag.summary()
	res.Lag = &l
	return nil
}

// renew renews lease i as the kubelet does: it updates the object it last
// wrote (no read first) with a new renewTime; on a conflict it reads the
// current object and tries once more. leases[i] is only touched by the one
// renewal of lease i in flight.
func (r *runner) renew(ctx context.Context, leases []*coordinationv1.Lease, i int) error {
	var c coordinationv1client.LeaseInterface
	if r.cfg.NodeClients != nil {
		c = r.cfg.NodeClients[i].Coordination.Leases(NodeLeaseNamespace)
	} else {
		c = r.client(i).CoordinationV1().Leases(NodeLeaseNamespace)
	}
	reread := false
	return retry.RetryOnConflict(retryOnce, func() error {
		if reread {
			r.conflicts.Add(1)
			l, err := c.Get(ctx, leases[i].Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			leases[i] = l
		}
		reread = true
		l := leases[i]
		l.Spec.RenewTime = &metav1.MicroTime{Time: r.cfg.Clock.Now()}
		out, err := c.Update(ctx, l, metav1.UpdateOptions{})
		if err == nil {
			leases[i] = out
		}
		return err
	})
}

// retryOnce is the kubelet's back-off for a heartbeat write: after a
// conflict, re-read and try once more at once.
var retryOnce = wait.Backoff{Steps: 2, Factor: 1}
