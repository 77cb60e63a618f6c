package replicaset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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
	return Config{Workers: 5, BurstReplicas: DefaultBurstReplicas, ExpectationsTimeout: DefaultExpectationsTimeout}
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
	exp      *Expectations
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
	c.exp = NewExpectations(c.cfg.ExpectationsTimeout)
	si := term.Informers.Apps().V1().ReplicaSets()
	pi := term.Informers.Core().V1().Pods()
	c.sets = si.Lister()
	var err error
	if c.setIndex, err = OwnerIndexer(si.Informer()); err != nil {
		return err
	}
	if c.pods, err = OwnerIndexer(pi.Informer()); err != nil {
		return err
	}
	if _, err := si.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, cur any) { c.enqueue(cur) },
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				c.exp.Forget(key)
			}
		},
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
	pods, err := Candidates[*corev1.Pod](c.pods, rs)
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
	if err := c.claim(ctx, rs, plan); err != nil {
		return 0, err
	}
	var reason, msg string
	var manageErr error
	switch {
	case plan.Create > 0:
		if manageErr = c.create(ctx, key, rs, plan.Create); manageErr != nil {
			reason, msg = ReasonFailedCreate, manageErr.Error()
		}
	case len(plan.Delete) > 0:
		if manageErr = c.delete(ctx, key, rs, plan.Delete); manageErr != nil {
			reason, msg = ReasonFailedDelete, manageErr.Error()
		}
	}
	st := WithFailure(plan.Status, reason, msg, now)
	if err := c.writeStatus(ctx, rs, st); err != nil {
		return 0, errors.Join(manageErr, err)
	}
	return plan.RequeueAfter, manageErr
}

// related returns the active pods of rs's siblings (the other ReplicaSets
// of its controller).
func (c *Controller) related(rs *appsv1.ReplicaSet) ([]*corev1.Pod, error) {
	ref := metav1.GetControllerOfNoCopy(rs)
	if ref == nil {
		return nil, nil
	}
	sibs, err := c.setIndex.ByIndex(OwnerIndex, ControlledKey(ref.UID))
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, o := range sibs {
		sib, ok := o.(*appsv1.ReplicaSet)
		if !ok || sib.UID == rs.UID {
			continue
		}
		objs, err := c.pods.ByIndex(OwnerIndex, ControlledKey(sib.UID))
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

// claim adopts and releases pods. Before adopting it checks with the API
// server that rs still exists and is not being deleted (the cache may be
// behind).
func (c *Controller) claim(ctx context.Context, rs *appsv1.ReplicaSet, plan Plan) error {
	if len(plan.Adopt) > 0 {
		fresh, err := c.cfg.Client.AppsV1().ReplicaSets(rs.Namespace).Get(ctx, rs.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("recheck replica set %s/%s before adopting: %w", rs.Namespace, rs.Name, err)
		}
		if fresh.UID != rs.UID || fresh.DeletionTimestamp != nil {
			return fmt.Errorf("replica set %s/%s is gone or being deleted: not adopting", rs.Namespace, rs.Name)
		}
	}
	pods := c.cfg.Client.CoreV1().Pods(rs.Namespace)
	ref := *metav1.NewControllerRef(rs, Kind)
	var errs []error
	for _, p := range plan.Adopt {
		if _, err := pods.Patch(ctx, p.Name, types.StrategicMergePatchType, AdoptPatch(ref, p.UID), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("adopt pod %s: %w", p.Name, err))
		}
	}
	for _, p := range plan.Release {
		if _, err := pods.Patch(ctx, p.Name, types.StrategicMergePatchType, ReleasePatch(rs.UID, p.UID), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("release pod %s: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (c *Controller) create(ctx context.Context, key string, rs *appsv1.ReplicaSet, n int) error {
	c.exp.Expect(key, n, nil, c.cfg.Clock.Now())
	tmpl := PodFromTemplate(&rs.Spec.Template, rs.Namespace, rs.Name+"-", *metav1.NewControllerRef(rs, Kind))
	pods := c.cfg.Client.CoreV1().Pods(rs.Namespace)
	ok, err := SlowStart(ctx, n, func(ctx context.Context) error {
		pod, err := pods.Create(ctx, tmpl.DeepCopy(), metav1.CreateOptions{})
		if err != nil {
			c.recorder.Eventf(rs, corev1.EventTypeWarning, ReasonFailedCreate, "Error creating: %v", err)
			return err
		}
		c.recorder.Eventf(rs, corev1.EventTypeNormal, ReasonSuccessfulCreate, "Created pod: %s", pod.Name)
		return nil
	})
	for range n - ok {
		c.exp.Created(key)
	}
	if err != nil {
		return fmt.Errorf("create pods for replica set %s: %w", key, err)
	}
	return nil
}

func (c *Controller) delete(ctx context.Context, key string, rs *appsv1.ReplicaSet, victims []*corev1.Pod) error {
	uids := make([]types.UID, len(victims))
	for i, p := range victims {
		uids[i] = p.UID
	}
	c.exp.Expect(key, 0, uids, c.cfg.Clock.Now())
	pods := c.cfg.Client.CoreV1().Pods(rs.Namespace)
	errs := make([]error, len(victims))
	var wg sync.WaitGroup
	for i, p := range victims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
			switch {
			case err == nil:
				c.recorder.Eventf(rs, corev1.EventTypeNormal, ReasonSuccessfulDelete, "Deleted pod: %s", p.Name)
			case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
				// Gone already, or the name is another pod's now.
				c.exp.Deleted(key, p.UID)
			default:
				c.exp.Deleted(key, p.UID)
				c.recorder.Eventf(rs, corev1.EventTypeWarning, ReasonFailedDelete, "Error deleting: %v", err)
				errs[i] = fmt.Errorf("delete pod %s: %w", p.Name, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// writeStatus writes st unless rs already has it; on a conflict it retries
// once on a fresh copy, as upstream.
func (c *Controller) writeStatus(ctx context.Context, rs *appsv1.ReplicaSet, st appsv1.ReplicaSetStatus) error {
	if apiequality.Semantic.DeepEqual(rs.Status, st) {
		return nil
	}
	client := c.cfg.Client.AppsV1().ReplicaSets(rs.Namespace)
	cur := rs.DeepCopy()
	for attempt := 0; ; attempt++ {
		cur.Status = st
		_, err := client.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt > 0 {
			return fmt.Errorf("update status of replica set %s/%s: %w", rs.Namespace, rs.Name, err)
		}
		if cur, err = client.Get(ctx, rs.Name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("get replica set %s/%s: %w", rs.Namespace, rs.Name, err)
		}
		if cur.UID != rs.UID {
			return nil
		}
	}
}

func (c *Controller) enqueue(obj any) {
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

// owner returns the key of the ReplicaSet that ref names in ns, if it is
// in the cache with ref's UID.
func (c *Controller) owner(ns string, ref *metav1.OwnerReference) (string, bool) {
	if ref == nil || ref.Kind != Kind.Kind || ref.APIVersion != Kind.GroupVersion().String() {
		return "", false
	}
	rs, err := c.sets.ReplicaSets(ns).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return "", false
	}
	return ns + "/" + ref.Name, true
}

// enqueueMatching enqueues every ReplicaSet of pod's namespace whose
// selector matches the orphan pod: one of them may adopt it.
func (c *Controller) enqueueMatching(pod *corev1.Pod) {
	sets, err := c.sets.ReplicaSets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, rs := range sets {
		sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		c.queue.Add(pod.Namespace + "/" + rs.Name)
	}
}

func (c *Controller) addPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if pod.DeletionTimestamp != nil {
		// Seen first already going (e.g. after a restart): a deletion,
		// never a creation.
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
