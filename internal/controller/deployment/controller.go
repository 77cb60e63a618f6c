package deployment

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/nodeplane/nodeplane/internal/controller/replicaset"
)

// Config configures the controller shell.
type Config struct {
	Client kubernetes.Interface
	Clock  clock.WithTicker
	Logger *slog.Logger
	// Workers is how many Deployments sync at once (upstream
	// --concurrent-deployment-syncs, 5).
	Workers int
}

// DefaultConfig returns upstream's settings (Client still to be set).
func DefaultConfig() Config { return Config{Workers: 5} }

// Controller is the shell around Decide.
type Controller struct {
	cfg Config

	// per term
	deployments appslisters.DeploymentLister
	sets        appslisters.ReplicaSetLister
	setIndex    cache.Indexer
	pods        cache.Indexer
	queue       workqueue.TypedRateLimitingInterface[string]
	recorder    record.EventRecorder
}

// NewController returns the controller; zero Config fields take
// DefaultConfig's values.
func NewController(cfg Config) *Controller {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultConfig().Workers
	}
	cfg.Logger = cfg.Logger.With("controller", ControllerName)
	return &Controller{cfg: cfg}
}

// Name implements manager.Controller.
func (c *Controller) Name() string { return ControllerName }

// Prepare implements manager.Controller.
func (c *Controller) Prepare(term *manager.Term) error {
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "deployment", Clock: c.cfg.Clock})
	di := term.Informers.Apps().V1().Deployments()
	si := term.Informers.Apps().V1().ReplicaSets()
	pi := term.Informers.Core().V1().Pods()
	c.deployments = di.Lister()
	c.sets = si.Lister()
	var err error
	if c.setIndex, err = replicaset.OwnerIndexer(si.Informer()); err != nil {
		return err
	}
	if c.pods, err = replicaset.OwnerIndexer(pi.Informer()); err != nil {
		return err
	}
	if _, err := di.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, cur any) { c.enqueue(cur) },
		DeleteFunc: c.enqueue,
	}); err != nil {
		return err
	}
	if _, err := si.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addSet,
		UpdateFunc: c.updateSet,
		DeleteFunc: c.deleteSet,
	}); err != nil {
		return err
	}
	_, err = pi.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*corev1.Pod)
			p, ok2 := cur.(*corev1.Pod)
			if ok1 && ok2 && o.Status.Phase != p.Status.Phase {
				c.podGone(p)
			}
		},
		DeleteFunc: c.podGone,
	})
	return err
}

// Run implements manager.Controller.
func (c *Controller) Run(ctx context.Context) {
	recorder, stop := manager.EventRecorder(ctx, c.cfg.Client, ControllerName)
	defer stop()
	c.recorder = recorder
	manager.RunWorkers(ctx, c.queue, c.cfg.Workers, c.sync, c.cfg.Logger, "deployment")
}

func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	d, err := c.deployments.Deployments(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	sets, err := replicaset.Candidates[*appsv1.ReplicaSet](c.setIndex, d)
	if err != nil {
		return 0, err
	}
	var pods map[types.UID][]*corev1.Pod
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		if pods, err = c.podsOf(d, sets); err != nil {
			return 0, err
		}
	}
	now := c.cfg.Clock.Now()
	plan, err := Decide(Input{Deployment: d, ReplicaSets: sets, Pods: pods, Now: now})
	if err != nil {
		c.cfg.Logger.Error("deployment not synced", "deployment", key, "err", err)
		return 0, nil
	}
	for _, e := range plan.Events {
		c.recorder.Event(d, e.Type, e.Reason, e.Message)
	}
	if err := c.claim(ctx, d, plan); err != nil {
		return 0, err
	}
	client := c.cfg.Client.AppsV1().ReplicaSets(ns)
	if w := plan.Create; w != nil {
		if done, err := c.create(ctx, d, w, now); done || err != nil {
			return 0, err
		}
	}
	for _, w := range plan.Updates {
		if _, err := client.Update(ctx, w.RS, metav1.UpdateOptions{}); err != nil {
			return 0, fmt.Errorf("update replica set %s/%s: %w", ns, w.RS.Name, err)
		}
		c.event(d, w.Event)
	}
	for _, rs := range plan.Delete {
		uid := rs.UID
		err := client.Delete(ctx, rs.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return 0, fmt.Errorf("delete old replica set %s/%s: %w", ns, rs.Name, err)
		}
	}
	if plan.Deployment != nil {
		if _, err := c.cfg.Client.AppsV1().Deployments(ns).UpdateStatus(ctx, plan.Deployment, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("update status of deployment %s: %w", key, err)
		}
	}
	return plan.RequeueAfter, nil
}

// create creates the new ReplicaSet. done means the sync stops here
// without error: the ReplicaSet exists already (the cache is behind) and
// its arrival will sync the Deployment again.
func (c *Controller) create(ctx context.Context, d *appsv1.Deployment, w *Write, now time.Time) (done bool, err error) {
	client := c.cfg.Client.AppsV1().ReplicaSets(d.Namespace)
	_, err = client.Create(ctx, w.RS, metav1.CreateOptions{})
	switch {
	case err == nil:
		c.event(d, w.Event)
		return false, nil
	case apierrors.IsAlreadyExists(err):
		existing, gerr := client.Get(ctx, w.RS.Name, metav1.GetOptions{})
		if gerr != nil {
			return true, fmt.Errorf("get replica set %s/%s: %w", d.Namespace, w.RS.Name, gerr)
		}
		if ref := metav1.GetControllerOfNoCopy(existing); ref != nil && ref.UID == d.UID && SameTemplate(&d.Spec.Template, &existing.Spec.Template) {
			return true, nil
		}
		// Another template holds the name: hash again with a new count.
		if _, uerr := c.cfg.Client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, Collided(d), metav1.UpdateOptions{}); uerr != nil {
			return true, fmt.Errorf("record a hash collision of deployment %s/%s: %w", d.Namespace, d.Name, uerr)
		}
		return true, fmt.Errorf("replica set %s/%s exists with another template (hash collision)", d.Namespace, w.RS.Name)
	default:
		failed, ev := CreateFailed(d, w.RS.Name, err, now)
		c.event(d, &ev)
		if !apiequality.Semantic.DeepEqual(failed.Status, d.Status) {
			// The create error is the one to report; this write is best effort.
			_, _ = c.cfg.Client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, failed, metav1.UpdateOptions{})
		}
		return true, fmt.Errorf("create replica set %s/%s: %w", d.Namespace, w.RS.Name, err)
	}
}

// podsOf returns the pods of the ReplicaSets d controls, by ReplicaSet.
func (c *Controller) podsOf(d *appsv1.Deployment, sets []*appsv1.ReplicaSet) (map[types.UID][]*corev1.Pod, error) {
	out := map[types.UID][]*corev1.Pod{}
	for _, rs := range sets {
		if ref := metav1.GetControllerOfNoCopy(rs); ref == nil || ref.UID != d.UID {
			continue
		}
		objs, err := c.pods.ByIndex(replicaset.OwnerIndex, replicaset.ControlledKey(rs.UID))
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if p, ok := o.(*corev1.Pod); ok {
				out[rs.UID] = append(out[rs.UID], p)
			}
		}
	}
	return out, nil
}

// claim adopts and releases ReplicaSets, rechecking with the API server
// that d still exists and is not being deleted before adopting.
func (c *Controller) claim(ctx context.Context, d *appsv1.Deployment, plan Plan) error {
	if len(plan.Adopt) > 0 {
		fresh, err := c.cfg.Client.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("recheck deployment %s/%s before adopting: %w", d.Namespace, d.Name, err)
		}
		if fresh.UID != d.UID || fresh.DeletionTimestamp != nil {
			return fmt.Errorf("deployment %s/%s is gone or being deleted: not adopting", d.Namespace, d.Name)
		}
	}
	client := c.cfg.Client.AppsV1().ReplicaSets(d.Namespace)
	ref := *metav1.NewControllerRef(d, Kind)
	var errs []error
	for _, rs := range plan.Adopt {
		if _, err := client.Patch(ctx, rs.Name, types.StrategicMergePatchType, replicaset.AdoptPatch(ref, rs.UID), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("adopt replica set %s: %w", rs.Name, err))
		}
	}
	for _, rs := range plan.Release {
		if _, err := client.Patch(ctx, rs.Name, types.StrategicMergePatchType, replicaset.ReleasePatch(d.UID, rs.UID), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("release replica set %s: %w", rs.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (c *Controller) event(d *appsv1.Deployment, e *Event) {
	if e != nil {
		c.recorder.Event(d, e.Type, e.Reason, e.Message)
	}
}

func (c *Controller) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

// owner returns the key of the Deployment ref names in ns, if cached with
// ref's UID.
func (c *Controller) owner(ns string, ref *metav1.OwnerReference) (string, bool) {
	if ref == nil || ref.Kind != Kind.Kind || ref.APIVersion != Kind.GroupVersion().String() {
		return "", false
	}
	d, err := c.deployments.Deployments(ns).Get(ref.Name)
	if err != nil || d.UID != ref.UID {
		return "", false
	}
	return ns + "/" + ref.Name, true
}

// enqueueMatching enqueues the Deployments whose selector matches an
// orphan ReplicaSet.
func (c *Controller) enqueueMatching(rs *appsv1.ReplicaSet) {
	ds, err := c.deployments.Deployments(rs.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, d := range ds {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(rs.Labels)) {
			continue
		}
		c.queue.Add(rs.Namespace + "/" + d.Name)
	}
}

func (c *Controller) addSet(obj any) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOfNoCopy(rs); ref != nil {
		if key, ok := c.owner(rs.Namespace, ref); ok {
			c.queue.Add(key)
		}
		return
	}
	if rs.DeletionTimestamp == nil {
		c.enqueueMatching(rs)
	}
}

func (c *Controller) updateSet(old, cur any) {
	o, ok1 := old.(*appsv1.ReplicaSet)
	rs, ok2 := cur.(*appsv1.ReplicaSet)
	if !ok1 || !ok2 {
		return
	}
	oldRef, curRef := metav1.GetControllerOfNoCopy(o), metav1.GetControllerOfNoCopy(rs)
	refChanged := !apiequality.Semantic.DeepEqual(oldRef, curRef)
	if refChanged && oldRef != nil {
		if key, ok := c.owner(o.Namespace, oldRef); ok {
			c.queue.Add(key)
		}
	}
	if curRef != nil {
		if key, ok := c.owner(rs.Namespace, curRef); ok {
			c.queue.Add(key)
		}
		return
	}
	if refChanged || !labels.Equals(o.Labels, rs.Labels) {
		c.enqueueMatching(rs)
	}
}

func (c *Controller) deleteSet(obj any) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		tomb, isTomb := obj.(cache.DeletedFinalStateUnknown)
		if !isTomb {
			return
		}
		if rs, ok = tomb.Obj.(*appsv1.ReplicaSet); !ok {
			return
		}
	}
	if key, ok := c.owner(rs.Namespace, metav1.GetControllerOfNoCopy(rs)); ok {
		c.queue.Add(key)
	}
}

// podGone wakes a Recreate Deployment when one of its old pods is deleted
// or ends: it may be waiting for the last of them.
func (c *Controller) podGone(obj any) {
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
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != replicaset.Kind.Kind {
		return
	}
	rs, err := c.sets.ReplicaSets(pod.Namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return
	}
	dref := metav1.GetControllerOfNoCopy(rs)
	key, ok := c.owner(rs.Namespace, dref)
	if !ok {
		return
	}
	if d, err := c.deployments.Deployments(rs.Namespace).Get(dref.Name); err == nil && d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		c.queue.Add(key)
	}
}
