package deployment

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/controller/manager"
	"github.com/nodeplane/nodeplane/internal/controller/ownership"
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
	ownership.Shell

	// per term
	deployments appslisters.DeploymentLister
	sets        appslisters.ReplicaSetLister
	setIndex    cache.Indexer
	pods        cache.Indexer
}

// NewController returns the controller; zero Config fields take
// DefaultConfig's values.
func NewController(cfg Config) *Controller {
	return &Controller{Shell: ownership.NewShell(ControllerName, cfg.Client, cfg.Clock, cfg.Logger, cfg.Workers, DefaultConfig().Workers)}
}

// Name implements manager.Controller.
func (c *Controller) Name() string { return ControllerName }

// Prepare implements manager.Controller.
func (c *Controller) Prepare(term *manager.Term) error {
	c.StartTerm("deployment", 0)
	di := term.Informers.Apps().V1().Deployments()
	si := term.Informers.Apps().V1().ReplicaSets()
	pi := term.Informers.Core().V1().Pods()
	c.deployments = di.Lister()
	c.sets = si.Lister()
	h := ownership.NewHandlers(Kind, c.deployments.Deployments, func(d *appsv1.Deployment) *metav1.LabelSelector { return d.Spec.Selector }, c.Queue.Add, nil)
	idx, err := h.Register(di.Informer(), nil, si.Informer())
	if err != nil {
		return err
	}
	c.setIndex = idx[0]
	if c.pods, err = ownership.OwnerIndexer(pi.Informer()); err != nil {
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
func (c *Controller) Run(ctx context.Context) { c.Shell.Run(ctx, c.sync, "deployment") }

func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	d, sets, found, err := ownership.Load[*appsv1.ReplicaSet](key, c.deployments.Deployments, nil, c.setIndex)
	if !found {
		return 0, err
	}
	ns := d.Namespace
	var pods map[types.UID][]*corev1.Pod
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		if pods, err = c.podsOf(d, sets); err != nil {
			return 0, err
		}
	}
	now := c.Clock.Now()
	plan, err := Decide(Input{Deployment: d, ReplicaSets: sets, Pods: pods, Now: now})
	if err != nil {
		c.Logger.Error("deployment not synced", "deployment", key, "err", err)
		return 0, nil
	}
	for _, e := range plan.Events {
		c.Recorder.Event(d, e.Type, e.Reason, e.Message)
	}
	client := c.Client.AppsV1().ReplicaSets(ns)
	if err := ownership.ApplyClaim(ctx, d, Kind, c.Client.AppsV1().Deployments(ns).Get, client.Patch,
		ownership.Claimed[*appsv1.ReplicaSet]{Adopt: plan.Adopt, Release: plan.Release}); err != nil {
		return 0, err
	}
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
		if _, err := c.Client.AppsV1().Deployments(ns).UpdateStatus(ctx, plan.Deployment, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("update status of deployment %s: %w", key, err)
		}
	}
	return plan.RequeueAfter, nil
}

// create creates the new ReplicaSet. done means the sync stops here
// without error: the ReplicaSet exists already (the cache is behind) and
// its arrival will sync the Deployment again.
func (c *Controller) create(ctx context.Context, d *appsv1.Deployment, w *Write, now time.Time) (done bool, err error) {
	client := c.Client.AppsV1().ReplicaSets(d.Namespace)
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
		if _, uerr := c.Client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, Collided(d), metav1.UpdateOptions{}); uerr != nil {
			return true, fmt.Errorf("record a hash collision of deployment %s/%s: %w", d.Namespace, d.Name, uerr)
		}
		return true, fmt.Errorf("replica set %s/%s exists with another template (hash collision)", d.Namespace, w.RS.Name)
	default:
		failed, ev := CreateFailed(d, w.RS.Name, err, now)
		c.event(d, &ev)
		if !apiequality.Semantic.DeepEqual(failed.Status, d.Status) {
			// The create error is the one to report; this write is best effort.
			_, _ = c.Client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, failed, metav1.UpdateOptions{})
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
		objs, err := c.pods.ByIndex(ownership.OwnerIndex, ownership.ControlledKey(rs.UID))
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

func (c *Controller) event(d *appsv1.Deployment, e *Event) {
	if e != nil {
		c.Recorder.Event(d, e.Type, e.Reason, e.Message)
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
	if dref == nil || dref.Kind != Kind.Kind || dref.APIVersion != Kind.GroupVersion().String() {
		return
	}
	if d, err := c.deployments.Deployments(rs.Namespace).Get(dref.Name); err == nil && d.UID == dref.UID && d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		c.Queue.Add(rs.Namespace + "/" + dref.Name)
	}
}
