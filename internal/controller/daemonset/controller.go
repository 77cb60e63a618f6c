package daemonset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
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
	"github.com/nodeplane/nodeplane/internal/controller/replicaset"
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
	return Config{Workers: 2, BurstReplicas: DefaultBurstReplicas, ExpectationsTimeout: replicaset.DefaultExpectationsTimeout}
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
	exp      *replicaset.Expectations
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
	c.exp = replicaset.NewExpectations(c.cfg.ExpectationsTimeout)
	si := term.Informers.Apps().V1().DaemonSets()
	ni := term.Informers.Core().V1().Nodes()
	pi := term.Informers.Core().V1().Pods()
	c.sets = si.Lister()
	c.nodes = ni.Lister()
	var err error
	if c.pods, err = replicaset.OwnerIndexer(pi.Informer()); err != nil {
		return err
	}
	if _, err := si.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, cur any) { c.enqueue(cur) },
		DeleteFunc: c.deleteSet,
	}); err != nil {
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
	_, err = pi.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addPod,
		UpdateFunc: c.updatePod,
		DeleteFunc: c.deletePod,
	})
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
	pods, err := replicaset.Candidates[*corev1.Pod](c.pods, ds)
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
	if err := c.claim(ctx, ds, plan); err != nil {
		return 0, err
	}
	var manageErr error
	if len(plan.Create) > 0 || len(plan.Delete) > 0 {
		uids := make([]types.UID, len(plan.Delete))
		for i, p := range plan.Delete {
			uids[i] = p.UID
		}
		c.exp.Expect(key, len(plan.Create), uids, now)
		manageErr = errors.Join(c.create(ctx, key, ds, plan), c.delete(ctx, key, ds, plan.Delete))
	}
	if err := c.writeStatus(ctx, ds, plan.Status); err != nil {
		return 0, errors.Join(manageErr, err)
	}
	return plan.RequeueAfter, manageErr
}

func (c *Controller) create(ctx context.Context, key string, ds *appsv1.DaemonSet, plan Plan) error {
	if len(plan.Create) == 0 {
		return nil
	}
	pods := c.cfg.Client.CoreV1().Pods(ds.Namespace)
	var next atomic.Int64
	ok, err := replicaset.SlowStart(ctx, len(plan.Create), func(ctx context.Context) error {
		node := plan.Create[next.Add(1)-1]
		pod, err := pods.Create(ctx, PodForNode(ds, node, plan.Hash), metav1.CreateOptions{})
		if err != nil {
			c.recorder.Eventf(ds, corev1.EventTypeWarning, ReasonFailedCreate, "Error creating: %v", err)
			return err
		}
		c.recorder.Eventf(ds, corev1.EventTypeNormal, ReasonSuccessfulCreate, "Created pod: %s", pod.Name)
		return nil
	})
	for range len(plan.Create) - ok {
		c.exp.Created(key)
	}
	if err != nil {
		return fmt.Errorf("create daemon pods for %s: %w", key, err)
	}
	return nil
}

func (c *Controller) delete(ctx context.Context, key string, ds *appsv1.DaemonSet, victims []*corev1.Pod) error {
	pods := c.cfg.Client.CoreV1().Pods(ds.Namespace)
	errs := make([]error, len(victims))
	var wg sync.WaitGroup
	for i, p := range victims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
			switch {
			case err == nil:
				c.recorder.Eventf(ds, corev1.EventTypeNormal, ReasonSuccessfulDelete, "Deleted pod: %s", p.Name)
			case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
				c.exp.Deleted(key, p.UID)
			default:
				c.exp.Deleted(key, p.UID)
				c.recorder.Eventf(ds, corev1.EventTypeWarning, ReasonFailedDelete, "Error deleting: %v", err)
				errs[i] = fmt.Errorf("delete pod %s: %w", p.Name, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// claim adopts and releases pods, rechecking ds with the API server first
// when adopting.
func (c *Controller) claim(ctx context.Context, ds *appsv1.DaemonSet, plan Plan) error {
	if len(plan.Adopt) > 0 {
		fresh, err := c.cfg.Client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("recheck daemon set %s/%s before adopting: %w", ds.Namespace, ds.Name, err)
		}
		if fresh.UID != ds.UID || fresh.DeletionTimestamp != nil {
			return fmt.Errorf("daemon set %s/%s is gone or being deleted: not adopting", ds.Namespace, ds.Name)
		}
	}
	pods := c.cfg.Client.CoreV1().Pods(ds.Namespace)
	ref := *metav1.NewControllerRef(ds, Kind)
	var errs []error
	for _, p := range plan.Adopt {
		if _, err := pods.Patch(ctx, p.Name, types.StrategicMergePatchType, replicaset.AdoptPatch(ref, p.UID), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("adopt pod %s: %w", p.Name, err))
		}
	}
	for _, p := range plan.Release {
		if _, err := pods.Patch(ctx, p.Name, types.StrategicMergePatchType, replicaset.ReleasePatch(ds.UID, p.UID), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("release pod %s: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// writeStatus writes st unless ds has it; on a conflict it retries once on
// a fresh copy.
func (c *Controller) writeStatus(ctx context.Context, ds *appsv1.DaemonSet, st appsv1.DaemonSetStatus) error {
	if apiequality.Semantic.DeepEqual(ds.Status, st) {
		return nil
	}
	client := c.cfg.Client.AppsV1().DaemonSets(ds.Namespace)
	cur := ds.DeepCopy()
	for attempt := 0; ; attempt++ {
		cur.Status = st
		_, err := client.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt > 0 {
			return fmt.Errorf("update status of daemon set %s/%s: %w", ds.Namespace, ds.Name, err)
		}
		if cur, err = client.Get(ctx, ds.Name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("get daemon set %s/%s: %w", ds.Namespace, ds.Name, err)
		}
		if cur.UID != ds.UID {
			return nil
		}
	}
}

func (c *Controller) enqueue(obj any) {
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
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

func (c *Controller) deleteSet(obj any) {
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok {
		tomb, isTomb := obj.(cache.DeletedFinalStateUnknown)
		if !isTomb {
			return
		}
		if ds, ok = tomb.Obj.(*appsv1.DaemonSet); !ok {
			return
		}
	}
	c.exp.Forget(ds.Namespace + "/" + ds.Name)
	c.core.Forget(ds.UID)
}

// owner returns the key of the DaemonSet ref names in ns, if cached with
// ref's UID.
func (c *Controller) owner(ns string, ref *metav1.OwnerReference) (string, bool) {
	if ref == nil || ref.Kind != Kind.Kind || ref.APIVersion != Kind.GroupVersion().String() {
		return "", false
	}
	ds, err := c.sets.DaemonSets(ns).Get(ref.Name)
	if err != nil || ds.UID != ref.UID {
		return "", false
	}
	return ns + "/" + ref.Name, true
}

// enqueueMatching enqueues the DaemonSets whose selector matches an orphan
// pod.
func (c *Controller) enqueueMatching(pod *corev1.Pod) {
	sets, err := c.sets.DaemonSets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, ds := range sets {
		sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		c.queue.Add(pod.Namespace + "/" + ds.Name)
	}
}

func (c *Controller) addPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if pod.DeletionTimestamp != nil {
		c.deletePod(pod)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		if key, ok := c.owner(pod.Namespace, ref); ok {
			c.exp.Created(key)
			c.queue.Add(key)
		}
		return
	}
	c.enqueueMatching(pod)
}

func (c *Controller) updatePod(old, cur any) {
	o, ok1 := old.(*corev1.Pod)
	p, ok2 := cur.(*corev1.Pod)
	if !ok1 || !ok2 {
		return
	}
	labelsChanged := !labels.Equals(o.Labels, p.Labels)
	if p.DeletionTimestamp != nil {
		c.deletePod(p)
		if labelsChanged {
			c.deletePod(o)
		}
		return
	}
	oldRef, curRef := metav1.GetControllerOfNoCopy(o), metav1.GetControllerOfNoCopy(p)
	refChanged := !apiequality.Semantic.DeepEqual(oldRef, curRef)
	if refChanged && oldRef != nil {
		if key, ok := c.owner(o.Namespace, oldRef); ok {
			c.queue.Add(key)
		}
	}
	if curRef != nil {
		if key, ok := c.owner(p.Namespace, curRef); ok {
			c.queue.Add(key)
		}
		return
	}
	if labelsChanged || refChanged {
		c.enqueueMatching(p)
	}
}

func (c *Controller) deletePod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		tomb, isTomb := obj.(cache.DeletedFinalStateUnknown)
		if !isTomb {
			return
		}
		if pod, ok = tomb.Obj.(*corev1.Pod); !ok {
			return
		}
	}
	if key, ok := c.owner(pod.Namespace, metav1.GetControllerOfNoCopy(pod)); ok {
		c.exp.Deleted(key, pod.UID)
		c.queue.Add(key)
	}
}
