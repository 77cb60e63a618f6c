package replicaset

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
	// Workers is how many ReplicaSets sync at once (upstream
	// --concurrent-replicaset-syncs, 5).
	Workers int
	// BurstReplicas caps the pods one sync creates or deletes (500).
	BurstReplicas int
	// ExpectationsTimeout is how long a sync waits for the informer to
	// show its creates and deletes before trusting the cache anyway
	// (5 min).
	ExpectationsTimeout time.Duration
}

// DefaultConfig returns upstream's settings (Client still to be set).
func DefaultConfig() Config {
	return Config{Workers: 5, BurstReplicas: DefaultBurstReplicas, ExpectationsTimeout: ownership.DefaultExpectationsTimeout}
}

// Controller is the shell around Decide: informer events enqueue
// ReplicaSet keys, workers sync them and carry out the plans.
type Controller struct {
	cfg Config

	// per term
	sets     appslisters.ReplicaSetLister
	setIndex cache.Indexer
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
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "replicaset", Clock: c.cfg.Clock})
	c.exp = ownership.NewExpectations(c.cfg.ExpectationsTimeout)
	si := term.Informers.Apps().V1().ReplicaSets()
	pi := term.Informers.Core().V1().Pods()
	c.sets = si.Lister()
	var err error
	if c.setIndex, err = ownership.OwnerIndexer(si.Informer()); err != nil {
		return err
	}
	if c.pods, err = ownership.OwnerIndexer(pi.Informer()); err != nil {
		return err
	}
	if _, err := si.Informer().AddEventHandler(ownership.EnqueueFuncs(c.queue.Add, func(key string, _ metav1.Object) { c.exp.Forget(key) })); err != nil {
		return err
	}
	h := &ownership.Handlers[*appsv1.ReplicaSet]{
		Kind:         Kind,
		Get:          func(ns, name string) (*appsv1.ReplicaSet, error) { return c.sets.ReplicaSets(ns).Get(name) },
		List:         func(ns string) ([]*appsv1.ReplicaSet, error) { return c.sets.ReplicaSets(ns).List(labels.Everything()) },
		Selector:     func(rs *appsv1.ReplicaSet) *metav1.LabelSelector { return rs.Spec.Selector },
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
	manager.RunWorkers(ctx, c.queue, c.cfg.Workers, c.sync, c.cfg.Logger, "replica set")
}

// sync runs one ReplicaSet's plan. It returns when to sync again, and an
// error to retry with back-off.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	rs, err := c.sets.ReplicaSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.exp.Forget(key)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	now := c.cfg.Clock.Now()
	pods, err := ownership.Candidates[*corev1.Pod](c.pods, rs)
	if err != nil {
		return 0, err
	}
	related, err := c.related(rs)
	if err != nil {
		return 0, err
	}
	plan, err := Decide(Input{
		RS: rs, Pods: pods, Related: related, Settled: c.exp.Satisfied(key, now),
		BurstReplicas: c.cfg.BurstReplicas, Now: now,
	})
	if err != nil {
		c.cfg.Logger.Error("replica set not synced", "replicaSet", key, "err", err)
		return 0, nil
	}
	client := c.cfg.Client.AppsV1().ReplicaSets(ns)
	if err := ownership.ApplyClaim(ctx, rs, Kind, client.Get, c.cfg.Client.CoreV1().Pods(ns).Patch,
		ownership.Claimed[*corev1.Pod]{Adopt: plan.Adopt, Release: plan.Release}); err != nil {
		return 0, err
	}
	w := ownership.PodWriter{Pods: c.cfg.Client.CoreV1().Pods(ns), Recorder: c.recorder, Owner: rs, Key: key, Expectations: c.exp}
	var reason, msg string
	var manageErr error
	switch {
	case plan.Create > 0:
		c.exp.Expect(key, plan.Create, nil, now)
		tmpl := PodFromTemplate(&rs.Spec.Template, ns, rs.Name+"-", *metav1.NewControllerRef(rs, Kind))
		if manageErr = w.Create(ctx, plan.Create, func(int) *corev1.Pod { return tmpl.DeepCopy() }); manageErr != nil {
			reason, msg = ReasonFailedCreate, manageErr.Error()
		}
	case len(plan.Delete) > 0:
		c.exp.Expect(key, 0, uids(plan.Delete), now)
		if manageErr = w.Delete(ctx, plan.Delete); manageErr != nil {
			reason, msg = ReasonFailedDelete, manageErr.Error()
		}
	}
	st := WithFailure(plan.Status, reason, msg, now)
	if !apiequality.Semantic.DeepEqual(rs.Status, st) {
		set := func(rs *appsv1.ReplicaSet) { rs.Status = st }
		if err := ownership.WriteStatus(ctx, rs.DeepCopy(), set, client.Get, client.UpdateStatus); err != nil {
			return 0, errors.Join(manageErr, err)
		}
	}
	return plan.RequeueAfter, manageErr
}

// uids returns the pods' UIDs.
func uids(pods []*corev1.Pod) []types.UID {
	out := make([]types.UID, len(pods))
	for i, p := range pods {
		out[i] = p.UID
	}
	return out
}

// related returns the active pods of rs's siblings (the other ReplicaSets
// of its controller).
func (c *Controller) related(rs *appsv1.ReplicaSet) ([]*corev1.Pod, error) {
	ref := metav1.GetControllerOfNoCopy(rs)
	if ref == nil {
		return nil, nil
	}
	sibs, err := c.setIndex.ByIndex(ownership.OwnerIndex, ownership.ControlledKey(ref.UID))
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, o := range sibs {
		sib, ok := o.(*appsv1.ReplicaSet)
		if !ok || sib.UID == rs.UID {
			continue
		}
		objs, err := c.pods.ByIndex(ownership.OwnerIndex, ownership.ControlledKey(sib.UID))
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if p, ok := o.(*corev1.Pod); ok && PodActive(p) {
				out = append(out, p)
			}
		}
	}
	return out, nil
}
