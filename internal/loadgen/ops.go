package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// op is one request of a create, get, update or list run. worker is the
// caller's index and seq the request's number; it returns the error of
// the request.
type op func(ctx context.Context, c kubernetes.Interface, worker int, seq int64) error

// runOps runs the create, get, update and list modes: Clients × Inflight
// workers, closed loop or paced by a shared Pacer.
func (r *runner) runOps(ctx context.Context, res *Result) error {
	cfg := r.cfg
	workers := len(cfg.Clients) * cfg.Inflight
	res.Inflight = cfg.Inflight
	res.TargetPerSecond = cfg.Rate
	res.ObjectJSONBytes, res.ObjectProtobufBytes = objectSizes(NewNode(NodeName(cfg.Prefix, 0), 0, cfg.Clock.Now()))

	var fn op
	limit := int64(-1) // requests to send; -1 = until the duration ends
	switch cfg.Mode {
	case ModeCreate:
		limit = int64(cfg.Objects)
		fn = func(ctx context.Context, c kubernetes.Interface, _ int, seq int64) error {
			name := NodeName(cfg.Prefix, int(seq))
			_, err := c.CoreV1().Nodes().Create(ctx, NewNode(name, int(seq), cfg.Clock.Now()), metav1.CreateOptions{})
			if err == nil {
				r.noteCreated(&r.createdNodes, name)
			}
			return err
		}
	case ModeGet:
		if err := r.prepareNodes(ctx, res, nil); err != nil {
			return err
		}
		rands := workerRands(cfg.Rand, workers)
		fn = func(ctx context.Context, c kubernetes.Interface, w int, _ int64) error {
			name := NodeName(cfg.Prefix, rands[w].IntN(cfg.Objects))
			_, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{ResourceVersion: cfg.ResourceVersion})
			return err
		}
	case ModeUpdate:
		var nodes []*corev1.Node
		if err := r.prepareNodes(ctx, res, &nodes); err != nil {
			return err
		}
		// Worker w owns nodes w, w+workers, w+2·workers, … so workers do
		// not race each other when there are enough nodes.
		next := make([]int, workers)
		locks := make([]sync.Mutex, cfg.Objects)
		fn = func(ctx context.Context, c kubernetes.Interface, w int, _ int64) error {
			i := (w + next[w]*workers) % cfg.Objects
			if w+(next[w]+1)*workers >= cfg.Objects {
				next[w] = 0
			} else {
				next[w]++
			}
			locks[i].Lock()
			defer locks[i].Unlock()
			return r.updateNodeStatus(ctx, c, nodes, i)
		}
	case ModeList:
		if err := r.prepareNodes(ctx, res, nil); err != nil {
			return err
		}
		var items atomic.Int64
		fn = func(ctx context.Context, c kubernetes.Interface, _ int, _ int64) error {
			l, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: cfg.ResourceVersion})
			if err == nil {
				items.Store(int64(len(l.Items)))
			}
			return err
		}
		defer func() { res.ListItems = int(items.Load()) }()
	default:
		return fmt.Errorf("mode %q is not a request mode", cfg.Mode)
	}
	cfg.Logger.Info("running load", "mode", string(cfg.Mode), "clients", len(cfg.Clients), "workers", workers, "rate", cfg.Rate)
	return r.loop(ctx, res, cfg.Clients, workers, limit, fn)
}

// prepareNodes ensures the run's Nodes exist, keeping their objects in
// *nodes when nodes is not nil.
func (r *runner) prepareNodes(ctx context.Context, res *Result, nodes *[]*corev1.Node) error {
	got, setup, err := r.ensureNodes(ctx, r.cfg.Objects)
	if err != nil {
		return err
	}
	res.Setup = append(res.Setup, setup)
	if nodes != nil {
		*nodes = got
	}
	return nil
}

// loop runs fn from workers goroutines (worker w on clients[w % len])
// until the measured phase ends or limit requests were sent (-1: no
// limit), recording requests that started in the measured phase.
func (r *runner) loop(ctx context.Context, res *Result, clients []kubernetes.Interface, workers int, limit int64, fn op) error {
	cfg := r.cfg
	clk := cfg.Clock
	start := clk.Now()
	measureFrom := start.Add(cfg.Warmup)
	var end time.Time // zero: no time limit
	if cfg.Duration > 0 {
		end = measureFrom.Add(cfg.Duration)
	}
	var pacer *Pacer
	if cfg.Rate > 0 {
		pacer = NewPacer(start, cfg.Rate)
	}
	if cfg.Warmup == 0 {
		if err := r.beginMeasure(); err != nil {
			return err
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var seq, measured atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		c := clients[w%len(clients)]
		wg.Go(func() {
			for runCtx.Err() == nil {
				intended := clk.Now()
				if pacer != nil {
					intended = pacer.Next()
					if !end.IsZero() && !intended.Before(end) {
						return
					}
					if err := r.sleepUntil(runCtx, intended); err != nil {
						return
					}
				}
				n := seq.Add(1) - 1
				if limit >= 0 && n >= limit {
					return
				}
				sent := clk.Now()
				if !end.IsZero() && !sent.Before(end) {
					return
				}
				err := fn(runCtx, c, w, n)
				finished := clk.Now()
				if sent.Before(measureFrom) {
					continue
				}
				if err != nil && runCtx.Err() != nil {
					return // stopped mid-request: not the server's fault
				}
				measured.Add(1)
				r.observe(finished.Sub(intended))
				if pacer != nil {
					r.svc.add(finished.Sub(sent))
				}
				if err != nil {
					r.fail(err)
				}
			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	if cfg.Warmup > 0 {
		if err := r.sleepUntil(ctx, measureFrom); err != nil {
			stop()
			<-finished
			return err
		}
		if err := r.beginMeasure(); err != nil {
			stop()
			<-finished
			return err
		}
	}
	if !end.IsZero() {
		timer := clk.NewTimer(end.Sub(clk.Now()))
		select {
		case <-timer.C():
		case <-finished:
		case <-ctx.Done():
		}
		timer.Stop()
	} else {
		select {
		case <-finished:
		case <-ctx.Done():
		}
	}
	// Requests already sent finish; the phase ends when the last does.
	<-finished
	r.endMeasure(res)
	stop()
	res.Requests = int(measured.Load())
	if res.DurationSeconds > 0 {
		res.AchievedPerSecond = float64(res.Requests) / res.DurationSeconds
	}
	res.Latency = r.lat.summary()
	if pacer != nil {
		s := r.svc.summary()
		res.Service = &s
	}
	return nil
}

// updateNodeStatus writes node i's status with fresh condition heartbeats,
// from the object last written; on a conflict it reads and retries once.
func (r *runner) updateNodeStatus(ctx context.Context, c kubernetes.Interface, nodes []*corev1.Node, i int) error {
	reread := false
	return retry.RetryOnConflict(retryOnce, func() error {
		if reread {
			r.conflicts.Add(1)
			n, err := c.CoreV1().Nodes().Get(ctx, nodes[i].Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			nodes[i] = n
		}
		reread = true
		n := nodes[i]
		now := metav1.NewTime(r.cfg.Clock.Now())
		for j := range n.Status.Conditions {
			n.Status.Conditions[j].LastHeartbeatTime = now
		}
		out, err := c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		if err == nil {
			nodes[i] = out
		}
		return err
	})
}

// workerRands derives one random source per worker from r.
func workerRands(r *rand.Rand, n int) []*rand.Rand {
	out := make([]*rand.Rand, n)
	for i := range out {
		out[i] = rand.New(rand.NewPCG(r.Uint64(), r.Uint64()))
	}
	return out
}

// objectSizes returns the JSON and protobuf (without the envelope) size of
// obj.
func objectSizes(obj interface {
	Size() int
}) (jsonBytes, protoBytes int) {
	data, err := json.Marshal(obj)
	if err == nil {
		jsonBytes = len(data)
	}
	return jsonBytes, obj.Size()
}
