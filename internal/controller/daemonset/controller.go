package daemonset

import (
	"context"
	"errors"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/controller/manager"
	"github.com/nodeplane/nodeplane/internal/controller/ownership"
)

// Config configures the controller shell.
type Config struct {
	Client kubernetes.Interface
	Clock  clock.WithTicker
	Logger *slog.Logger
	// Workers is how many DaemonSets sync at once (upstream
	// --concurrent-daemonset-syncs, 2).
	Workers int
	// BurstReplicas caps the pods one sync creates or deletes (250).
	BurstReplicas int
	// ExpectationsTimeout: see replicaset.Config (5 min).
	ExpectationsTimeout time.Duration
}

// DefaultConfig returns upstream's settings (Client still to be set).
func DefaultConfig() Config {
	return Config{Workers: 2, BurstReplicas: DefaultBurstReplicas, ExpectationsTimeout: ownership.DefaultExpectationsTimeout}
}

// Controller is the shell around Core.
type Controller struct {
	cfg Config

	// per term
	core     *Core
	sets     appslisters.DaemonSetLister
	nodes    corelisters.NodeLister
	pods     cache.Indexer
	queue    workqueue.TypedRateLimitingInterface[string]
	exp      *ownership.Expectations
	recorder record.EventRecorder
}

// NewController returns the controller; zero Config fields take
// DefaultConfig's values.
func NewController(cfg Config) *Controller {
	def := DefaultConfig()
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Workers <= 0 {
		cfg.Workers = def.Workers
	}
	if cfg.BurstReplicas <= 0 {
		cfg.BurstReplicas = def.BurstReplicas
	}
	if cfg.ExpectationsTimeout <= 0 {
		cfg.ExpectationsTimeout = def.ExpectationsTimeout
	}
	cfg.Logger = cfg.Logger.With("controller", ControllerName)
	return &Controller{cfg: cfg}
}

// Name implements manager.Controller.
func (c *Controller) Name() string { return ControllerName }

// Prepare implements manager.Controller.
func (c *Controller) Prepare(term *manager.Term) error {
	c.core = New()
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "daemonset", Clock: c.cfg.Clock})
	c.exp = ownership.NewExpectations(c.cfg.ExpectationsTimeout)
	si := term.Informers.Apps().V1().DaemonSets()
	ni := term.Informers.Core().V1().Nodes()
	pi := term.Informers.Core().V1().Pods()
	c.sets = si.Lister()
	c.nodes = ni.Lister()
	var err error
	if c.pods, err = ownership.OwnerIndexer(pi.Informer()); err != nil {
		return err
	}
	if _, err := si.Informer().AddEventHandler(ownership.EnqueueFuncs(c.queue.Add, func(key string, ds metav1.Object) {
		c.exp.Forget(key)
		c.core.Forget(ds.GetUID())
	})); err != nil {
		return err
	}
	if _, err := ni.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.enqueueAll() },
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*corev1.Node)
			n, ok2 := cur.(*corev1.Node)
			// Only what Placer.Fits reads matters.
			if ok1 && ok2 && (!labels.Equals(o.Labels, n.Labels) || !apiequality.Semantic.DeepEqual(o.Spec.Taints, n.Spec.Taints)) {
				c.enqueueAll()
			}
		},
		DeleteFunc: func(any) { c.enqueueAll() },
	}); err != nil {
		return err
	}
	h := &ownership.Handlers[*appsv1.DaemonSet]{
		Kind:         Kind,
		Get:          func(ns, name string) (*appsv1.DaemonSet, error) { return c.sets.DaemonSets(ns).Get(name) },
		List:         func(ns string) ([]*appsv1.DaemonSet, error) { return c.sets.DaemonSets(ns).List(labels.Everything()) },
		Selector:     func(ds *appsv1.DaemonSet) *metav1.LabelSelector { return ds.Spec.Selector },
		Enqueue:      c.queue.Add,
		Expectations: c.exp,
	}
	_, err = pi.Informer().AddEventHandler(h.Funcs())
	return err
}

// Run implements manager.Controller.
func (c *Controller) Run(ctx context.Context) {
	recorder, stop := manager.EventRecorder(ctx, c.cfg.Client, ControllerName)
	defer stop()
	c.recorder = recorder
	manager.RunWorkers(ctx, c.queue, c.cfg.Workers, c.sync, c.cfg.Logger, "daemon set")
}

func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	ds, err := c.sets.DaemonSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.exp.Forget(key)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return 0, err
	}
	pods, err := ownership.Candidates[*corev1.Pod](c.pods, ds)
	if err != nil {
		return 0, err
	}
	now := c.cfg.Clock.Now()
	plan, err := c.core.Decide(Input{
		DS: ds, Nodes: nodes, Pods: pods, Settled: c.exp.Satisfied(key, now),
		BurstReplicas: c.cfg.BurstReplicas, Now: now,
	})
	if err != nil {
		c.cfg.Logger.Error("daemon set not synced", "daemonSet", key, "err", err)
		return 0, nil
	}
	for _, e := range plan.Events {
		c.recorder.Event(ds, e.Type, e.Reason, e.Message)
	}
	if err := ownership.ApplyClaim(ctx, ds, Kind, c.cfg.Client.AppsV1().DaemonSets(ns).Get, c.cfg.Client.CoreV1().Pods(ns).Patch,
		ownership.Claimed[*corev1.Pod]{Adopt: plan.Adopt, Release: plan.Release}); err != nil {
		return 0, err
	}
	var manageErr error
	if len(plan.Create) > 0 || len(plan.Delete) > 0 {
		uids := make([]types.UID, len(plan.Delete))
		for i, p := range plan.Delete {
			uids[i] = p.UID
		}
		c.exp.Expect(key, len(plan.Create), uids, now)
		w := ownership.PodWriter{Pods: c.cfg.Client.CoreV1().Pods(ns), Recorder: c.recorder, Owner: ds, Key: key, Expectations: c.exp}
		manageErr = errors.Join(
			w.Create(ctx, len(plan.Create), func(i int) *corev1.Pod { return PodForNode(ds, plan.Create[i], plan.Hash) }),
			w.Delete(ctx, plan.Delete))
	}
	if !apiequality.Semantic.DeepEqual(ds.Status, plan.Status) {
		client := c.cfg.Client.AppsV1().DaemonSets(ns)
		set := func(ds *appsv1.DaemonSet) { ds.Status = plan.Status }
		if err := ownership.WriteStatus(ctx, ds.DeepCopy(), set, client.Get, client.UpdateStatus); err != nil {
			return 0, errors.Join(manageErr, err)
		}
	}
	return plan.RequeueAfter, manageErr
}
func (c *Controller) enqueueAll() {
	sets, err := c.sets.List(labels.Everything())
	if err != nil {
		return
	}
	for _, ds := range sets {
		c.queue.Add(ds.Namespace + "/" + ds.Name)
	}
}

