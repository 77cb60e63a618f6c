package tainteviction

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/controller/manager"
)

// podsByNode indexes pods by spec.nodeName in the shared pod informer.
const podsByNode = "spec.nodeName"

// evictionWorkers bounds the evictions carried out at once.
const evictionWorkers = 32

// Config configures the controller shell.
type Config struct {
	Client   kubernetes.Interface
	Clock    clock.WithTicker
	Logger   *slog.Logger
	Registry prometheus.Registerer
}

// Controller is the shell around Core: informers feed it, a timer fires
// due evictions, which it carries out through the API.
type Controller struct {
	cfg       Config
	deletions prometheus.Counter
	latency   prometheus.Histogram

	// per term
	mu       sync.Mutex
	core     *Core
	nodes    corelisters.NodeLister
	pods     cache.Indexer
	queue    workqueue.TypedRateLimitingInterface[string]
	wake     chan struct{}
	recorder record.EventRecorder
}

// NewController returns the controller and registers its metrics.
func NewController(cfg Config) *Controller {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Controller{
		cfg: cfg,
		deletions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricPodDeletions, Help: "Pods deleted by the taint eviction controller since it started.",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: MetricPodDeletionDuration, Help: "Seconds from when a pod became due for eviction to its deletion.",
			Buckets: []float64{0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 30, 60, 120, 180, 240},
		}),
	}
	if cfg.Registry != nil {
		cfg.Registry.MustRegister(c.deletions, c.latency)
	}
	c.cfg.Logger = cfg.Logger.With("controller", ControllerName)
	return c
}

// Name implements manager.Controller.
func (c *Controller) Name() string { return ControllerName }

// Prepare implements manager.Controller: a fresh core per term, rebuilt from
// the taints' timeAdded (SPEC P3-3).
func (c *Controller) Prepare(term *manager.Term) error {
	c.core = New()
	c.queue = manager.NewQueue("taint-eviction-nodes", c.cfg.Clock)
	c.wake = make(chan struct{}, 1)
	ni := term.Informers.Core().V1().Nodes()
	pi := term.Informers.Core().V1().Pods()
	c.nodes = ni.Lister()
	pods, err := term.PodsByNodeIndexer()
	if err != nil {
		return err
	}
	c.pods = pods
	if _, err := ni.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.enqueueNode(obj) },
		UpdateFunc: func(old, cur any) {
			o, n := old.(*corev1.Node), cur.(*corev1.Node)
			if !apiequality.Semantic.DeepEqual(noExecute(o.Spec.Taints), noExecute(n.Spec.Taints)) {
				c.enqueueNode(cur)
			}
		},
		DeleteFunc: func(obj any) {
			if n, ok := nodeOf(obj); ok {
				c.mu.Lock()
				c.core.ForgetNode(n.Name)
				c.mu.Unlock()
			}
		},
	}); err != nil {
		return err
	}
	_, err = pi.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.observePod(obj) },
		UpdateFunc: func(_, cur any) { c.observePod(cur) },
		DeleteFunc: func(obj any) {
			p, ok := obj.(*corev1.Pod)
			if !ok {
				if d, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
					p, ok = d.Obj.(*corev1.Pod)
				}
			}
			if ok {
				c.mu.Lock()
				evs := c.core.ForgetPod(p.UID)
				c.mu.Unlock()
				c.record(evs)
				c.poke()
			}
		},
	})
	return err
}

// Run implements manager.Controller.
func (c *Controller) Run(ctx context.Context) {
	recorder, stopEvents := manager.EventRecorder(ctx, c.cfg.Client, ControllerName)
	defer stopEvents()
	c.recorder = recorder
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()

	go func() {
		for c.nextNode(ctx) {
		}
	}()
	// Evictions run in parallel (upstream fires each in its own
	// goroutine): one at a time, a pod whose deadline comes waited behind
	// every eviction due before it — three API calls each — so under load
	// (a node with many pods that tolerate nothing, on a busy server) a
	// timed eviction came tens of seconds late (issue 12).
	sem := make(chan struct{}, evictionWorkers)
	var inflight sync.WaitGroup
	defer inflight.Wait()
	for {
		c.mu.Lock()
		due := c.core.Due(c.cfg.Clock.Now())
		next, ok := c.core.NextDue()
		c.mu.Unlock()
		for _, e := range due {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			inflight.Add(1)
			go func() {
				defer func() { <-sem; inflight.Done() }()
				c.evict(ctx, e)
			}()
		}
		if len(due) > 0 {
			continue
		}
		var timer clock.Timer
		var fire <-chan time.Time
		if ok {
			timer = c.cfg.Clock.NewTimer(max(next.Sub(c.cfg.Clock.Now()), 0))
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-c.wake:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

func (c *Controller) nextNode(ctx context.Context) bool {
	name, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(name)
	node, err := c.nodes.Get(name)
	if err != nil {
		c.queue.Forget(name)
		return true
	}
	objs, err := c.pods.ByIndex(manager.PodsByNode, name)
	if err != nil {
		c.queue.AddRateLimited(name)
		return true
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		pods = append(pods, o.(*corev1.Pod))
	}
	c.mu.Lock()
	evs := c.core.ObserveNode(c.cfg.Clock.Now(), node, pods)
	c.mu.Unlock()
	c.record(evs)
	c.queue.Forget(name)
	c.poke()
	return ctx.Err() == nil
}

func (c *Controller) observePod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Spec.NodeName == "" {
		return
	}
	c.mu.Lock()
	evs := c.core.ObservePod(c.cfg.Clock.Now(), p)
	c.mu.Unlock()
	c.record(evs)
	c.poke()
}

// evict marks the pod with the DisruptionTarget condition and deletes it.
func (c *Controller) evict(ctx context.Context, e Eviction) {
	c.record([]Event{e.Event})
	var err error
	for attempt := range 5 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return
			case <-c.cfg.Clock.After(10 * time.Millisecond):
			}
		}
		if err = c.deletePod(ctx, e); err == nil {
			break
		}
	}
	if err != nil {
		c.cfg.Logger.Warn("taint eviction failed; will retry", "pod", e.Pod.Namespace+"/"+e.Pod.Name, "err", err)
		c.mu.Lock()
		c.core.Failed(e.Pod.UID, c.cfg.Clock.Now().Add(time.Second))
		c.mu.Unlock()
		c.poke() // the run loop re-arms its timer for the retry
		return
	}
	c.deletions.Inc()
	c.latency.Observe(c.cfg.Clock.Since(e.At).Seconds())
	c.cfg.Logger.Info("evicted pod for a NoExecute taint", "pod", e.Pod.Namespace+"/"+e.Pod.Name, "node", e.Pod.NodeName, "taint", e.Taint.Key)
}

func (c *Controller) deletePod(ctx context.Context, e Eviction) error {
	pods := c.cfg.Client.CoreV1().Pods(e.Pod.Namespace)
	pod, err := pods.Get(ctx, e.Pod.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && pod.UID != e.Pod.UID) {
		return nil
	}
	if err != nil {
		return err
	}
	cond := e.Condition
	cond.ObservedGeneration = pod.Generation
	if SetCondition(&pod.Status, cond, c.cfg.Clock.Now()) {
		if _, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	uid := e.Pod.UID
	err = pods.Delete(ctx, e.Pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

func (c *Controller) record(evs []Event) {
	if c.recorder == nil {
		return
	}
	for _, e := range evs {
		ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: e.Pod.Namespace, Name: e.Pod.Name, UID: e.Pod.UID}
		c.recorder.Event(ref, e.Type, e.Reason, e.Message)
	}
}

func (c *Controller) enqueueNode(obj any) {
	if n, ok := nodeOf(obj); ok {
		c.queue.Add(n.Name)
	}
}

func (c *Controller) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func nodeOf(obj any) (*corev1.Node, bool) {
	if n, ok := obj.(*corev1.Node); ok {
		return n, true
	}
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		n, ok := d.Obj.(*corev1.Node)
		return n, ok
	}
	return nil, false
}

func noExecute(ts []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range ts {
		if t.Effect == corev1.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	return out
}
