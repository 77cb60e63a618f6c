package loadgen

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// defaultWatchWriteRate is the writer's rate when Config.Rate is 0.
const defaultWatchWriteRate = 100

// deliveryWait bounds how long the run waits, after the last write, for
// watchers to receive it.
const deliveryWait = 10 * time.Second

// write is one acknowledged write of the watch writer.
type write struct {
	sent, acked time.Time
}

// receipt is one event a watcher received.
type receipt struct {
	rv string
	at time.Time
}

// watcher is one client's Node watch.
type watcher struct {
	mu       sync.Mutex
	receipts []receipt
	lastRV   atomic.Int64
	closed   atomic.Int64
}

// runWatch opens one Node watch per client, updates Node statuses at Rate
// from Inflight writers on the first client, and measures for every write
// and watcher the time from the write's acknowledgement (and from its send)
// to the event's receipt.
func (r *runner) runWatch(ctx context.Context, res *Result) error {
	cfg := &r.cfg
	if cfg.Rate == 0 {
		cfg.Rate = defaultWatchWriteRate
	}
	var nodes []*corev1.Node
	if err := r.prepareNodes(ctx, res, &nodes); err != nil {
		return err
	}
	res.ObjectJSONBytes, res.ObjectProtobufBytes = objectSizes(nodes[0])
	list, err := r.client(0).CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}

	watchCtx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	watchers := make([]*watcher, len(cfg.Clients))
	var wg sync.WaitGroup
	for i, c := range cfg.Clients {
		w := &watcher{}
		watchers[i] = w
		rv, _ := strconv.ParseInt(list.ResourceVersion, 10, 64)
		w.lastRV.Store(rv)
		wi, err := c.CoreV1().Nodes().Watch(watchCtx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true})
		if err != nil {
			return fmt.Errorf("watch %d: %w", i, err)
		}
		wg.Go(func() { r.watch(watchCtx, c, w, wi) })
	}
	defer wg.Wait()

	var mu sync.Mutex
	writes := map[string]write{}
	var maxRV atomic.Int64
	locks := make([]sync.Mutex, cfg.Objects)
	var next atomic.Int64
	writeOp := func(ctx context.Context, c kubernetes.Interface, _ int, _ int64) error {
		i := int(next.Add(1)-1) % cfg.Objects
		locks[i].Lock()
		defer locks[i].Unlock()
		sent := cfg.Clock.Now()
		err := r.updateNodeStatus(ctx, c, nodes, i)
		if err != nil {
			return err
		}
		acked := cfg.Clock.Now()
		rv := nodes[i].ResourceVersion
		mu.Lock()
		writes[rv] = write{sent: sent, acked: acked}
		mu.Unlock()
		if n, err := strconv.ParseInt(rv, 10, 64); err == nil {
			for cur := maxRV.Load(); n > cur && !maxRV.CompareAndSwap(cur, n); cur = maxRV.Load() {
			}
		}
		return nil
	}
	// The writer uses the first client; with one client it shares the
	// connection with its watch, as an agent would.
	writers := cfg.Inflight
	if err := r.loop(ctx, res, cfg.Clients[:1], writers, -1, writeOp); err != nil {
		return err
	}
	// The writer's latency is from each write's intended start; its service
	// latency is not a watch figure.
	res.Watch = &Watch{Watchers: len(watchers), WriteLatency: res.Latency}
	res.Service = nil
	res.Inflight = writers
	res.TargetPerSecond = cfg.Rate

	// Wait until every watcher has seen the last write (or give up).
	deadline := cfg.Clock.Now().Add(deliveryWait)
	for cfg.Clock.Now().Before(deadline) {
		caughtUp := true
		for _, w := range watchers {
			caughtUp = caughtUp && w.lastRV.Load() >= maxRV.Load()
		}
		if caughtUp {
			break
		}
		if err := r.sleepUntil(ctx, cfg.Clock.Now().Add(20*time.Millisecond)); err != nil {
			break
		}
	}
	stopWatches()
	wg.Wait()

	// Join receipts to writes of the measured phase.
	var lat, fromSend recorder
	measured := 0
	for _, wr := range writes {
		if !wr.sent.Before(r.measureStart) {
			measured++
		}
	}
	for _, w := range watchers {
		w.mu.Lock()
		for _, rc := range w.receipts {
			wr, ok := writes[rc.rv]
			if !ok || wr.sent.Before(r.measureStart) {
				continue
			}
			res.Watch.Received++
			d := rc.at.Sub(wr.acked)
			if d < 0 {
				res.Watch.Early++
				d = 0
			}
			lat.add(d)
			fromSend.add(rc.at.Sub(wr.sent))
		}
		w.mu.Unlock()
		res.Watch.Closed += int(w.closed.Load())
	}
	res.Watch.Writes = measured
	res.Watch.Expected = measured * len(watchers)
	res.Latency = lat.summary()
	res.Watch.FromSend = fromSend.summary()
	return nil
}

// watch reads events into w until ctx ends, re-opening the watch from the
// last resourceVersion seen when the server closes it.
func (r *runner) watch(ctx context.Context, c kubernetes.Interface, w *watcher, wi watch.Interface) {
	for {
		for ev := range wi.ResultChan() {
			now := r.cfg.Clock.Now()
			node, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			if rv, err := strconv.ParseInt(node.ResourceVersion, 10, 64); err == nil {
				w.lastRV.Store(rv)
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			w.mu.Lock()
			w.receipts = append(w.receipts, receipt{rv: node.ResourceVersion, at: now})
			w.mu.Unlock()
		}
		wi.Stop()
		if ctx.Err() != nil {
			return
		}
		w.closed.Add(1)
		var err error
		for {
			wi, err = c.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: strconv.FormatInt(w.lastRV.Load(), 10), AllowWatchBookmarks: true})
			if err == nil {
				break
			}
			r.fail(err)
			if r.sleepUntil(ctx, r.cfg.Clock.Now().Add(100*time.Millisecond)) != nil {
				return
			}
		}
	}
}
