package disruption

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
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
	// Workers is how many budgets sync at once (upstream runs one).
	Workers int
}

// Controller is the shell around Sync: pod and budget events enqueue
// budget keys, workers sync them and write the status; a second queue
// resets stale DisruptionTarget conditions.
type Controller struct {
	cfg Config

	// per term
	budgets     policylisters.PodDisruptionBudgetLister
	pods        corelisters.PodLister
	sets        appslisters.ReplicaSetLister
	deployments appslisters.DeploymentLister
	queue       workqueue.TypedRateLimitingInterface[string]
	stale       workqueue.TypedRateLimitingInterface[string]
	recorder    record.EventRecorder
}

// NewController returns the controller.
func NewController(cfg Config) *Controller {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	cfg.Logger = cfg.Logger.With("controller", ControllerName)
	return &Controller{cfg: cfg}
}

// Name implements manager.Controller.
func (c *Controller) Name() string { return ControllerName }

// Prepare implements manager.Controller.
func (c *Controller) Prepare(term *manager.Term) error {
	c.queue, c.stale = manager.NewQueue("disruption", c.cfg.Clock), manager.NewQueue("stale_pod_disruption", c.cfg.Clock)
	bi := term.Informers.Policy().V1().PodDisruptionBudgets()
	pi := term.Informers.Core().V1().Pods()
	c.budgets, c.pods = bi.Lister(), pi.Lister()
	c.sets = term.Informers.Apps().V1().ReplicaSets().Lister()
	c.deployments = term.Informers.Apps().V1().Deployments().Lister()
	if _, err := bi.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, cur any) { c.enqueue(cur) },
		DeleteFunc: c.enqueue,
	}); err != nil {
		return err
	}
	_, err := pi.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.podChanged(nil, obj) },
		UpdateFunc: func(old, cur any) {
			c.podChanged(old, cur)
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			c.podChanged(nil, obj)
		},
	})
	return err
}

// Run implements manager.Controller.
func (c *Controller) Run(ctx context.Context) {
	recorder, stop := manager.EventRecorder(ctx, c.cfg.Client, ControllerName)
	defer stop()
	c.recorder = recorder
	done := make(chan struct{})
	go func() {
		defer close(done)
		manager.RunWorkers(ctx, c.stale, 1, c.syncStale, c.cfg.Logger, "stale disruption condition")
	}()
	manager.RunWorkers(ctx, c.queue, c.cfg.Workers, c.sync, c.cfg.Logger, "pod disruption budget")
	<-done
}

func (c *Controller) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

// podChanged wakes the budgets matching the pod (before and after a label
// change) and schedules the reset of a stale DisruptionTarget condition.
func (c *Controller) podChanged(old, cur any) {
	pod, ok := cur.(*corev1.Pod)
	if !ok {
		return
	}
	c.enqueueBudgetsOf(pod)
	if o, ok := old.(*corev1.Pod); ok && !labels.Equals(o.Labels, pod.Labels) {
		c.enqueueBudgetsOf(o)
	}
	if stale, after := StaleDisruption(pod, c.cfg.Clock.Now()); stale {
		if key, err := cache.MetaNamespaceKeyFunc(pod); err == nil {
			c.stale.AddAfter(key, after)
		}
	}
}

func (c *Controller) enqueueBudgetsOf(pod *corev1.Pod) {
	budgets, err := c.budgets.PodDisruptionBudgets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, b := range budgets {
		if selects(b, pod) {
			c.queue.Add(pod.Namespace + "/" + b.Name)
		}
	}
}

// selects is the controller's matching rule (upstream's): a missing selector
// selects nothing, an empty one every pod of the namespace.
func selects(b *policyv1.PodDisruptionBudget, pod *corev1.Pod) bool {
	sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
	return err == nil && sel.Matches(labels.Set(pod.Labels))
}

// sync brings one budget's status up to date.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	b, found, err := ownership.Lookup(key, c.budgets.PodDisruptionBudgets, nil)
	if !found {
		return 0, err
	}
	now := c.cfg.Clock.Now()
	pods, err := c.podsOf(b)
	if err != nil {
		c.recorder.Eventf(b, corev1.EventTypeWarning, "NoPods", "Failed to get pods: %v", err)
		return 0, c.write(ctx, b, FailSafe(b, err, now))
	}
	if len(pods) == 0 {
		c.recorder.Event(b, corev1.EventTypeNormal, "NoPods", "No matching pods found")
	}
	res := Sync(Input{Budget: b, Pods: pods, Owners: c.owners(pods), Now: now})
	if len(res.Unmanaged) > 0 {
		c.recorder.Eventf(b, corev1.EventTypeWarning, "UnmanagedPods", "Pods selected by this PodDisruptionBudget (selector: %v) were found "+
			"to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. "+
			"To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value.", b.Spec.Selector)
	}
	if res.Err != nil {
		c.recorder.Eventf(b, corev1.EventTypeWarning, "CalculateExpectedPodCountFailed", "Failed to calculate the number of expected pods: %v", res.Err)
	}
	for _, p := range res.NotDeleted {
		ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: b.Namespace, Name: p}
		c.recorder.Eventf(ref, corev1.EventTypeWarning, "NotDeleted", "Pod was expected by PDB %s/%s to be deleted but it wasn't", b.Namespace, b.Name)
	}
	if res.Status == nil {
		return res.RecheckAfter, nil
	}
	err = c.write(ctx, b, res.Status)
	if err != nil && res.Err == nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		// Fail safe: at least close the budget.
		c.cfg.Logger.Warn("write budget status", "budget", key, "err", err)
		return 0, errors.Join(err, c.write(ctx, b, FailSafe(b, err, now)))
	}
	if err != nil {
		return 0, err
	}
	return res.RecheckAfter, nil
}

// write stores st as b's status unless it is already b's status (a repeated
// fail-safe write would otherwise wake this budget forever).
func (c *Controller) write(ctx context.Context, b *policyv1.PodDisruptionBudget, st *policyv1.PodDisruptionBudgetStatus) error {
	if apiequality.Semantic.DeepEqual(&b.Status, st) {
		return nil
	}
	nb := b.DeepCopy()
	nb.Status = *st
	_, err := c.cfg.Client.PolicyV1().PodDisruptionBudgets(b.Namespace).UpdateStatus(ctx, nb, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("update status of budget %s/%s: %w", b.Namespace, b.Name, err)
	}
	return nil
}

func (c *Controller) podsOf(b *policyv1.PodDisruptionBudget) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
	if err != nil {
		return nil, err
	}
	return c.pods.Pods(b.Namespace).List(sel)
}

// owners resolves the controllers of pods to the workloads whose scale
// counts: a ReplicaSet owned by a Deployment counts as that Deployment.
func (c *Controller) owners(pods []*corev1.Pod) map[types.UID]Owner {
	out := map[types.UID]Owner{}
	for _, p := range pods {
		ref := metav1.GetControllerOfNoCopy(p)
		if ref == nil {
			continue
		}
		if _, done := out[ref.UID]; done {
			continue
		}
		if o, ok := c.ownerOf(p.Namespace, ref); ok {
			out[ref.UID] = o
		}
	}
	return out
}

func (c *Controller) ownerOf(ns string, ref *metav1.OwnerReference) (Owner, bool) {
	if ref.Kind != "ReplicaSet" || !appsGroup(ref.APIVersion) {
		return Owner{}, false
	}
	rs, err := c.sets.ReplicaSets(ns).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return Owner{}, false
	}
	dref := metav1.GetControllerOfNoCopy(rs)
	if dref == nil {
		return Owner{UID: rs.UID, Replicas: replicas(rs.Spec.Replicas)}, true
	}
	if dref.Kind != "Deployment" || !appsGroup(dref.APIVersion) {
		return Owner{}, false
	}
	d, err := c.deployments.Deployments(ns).Get(dref.Name)
	if err != nil || d.UID != dref.UID {
		return Owner{}, false
	}
	return Owner{UID: d.UID, Replicas: replicas(d.Spec.Replicas)}, true
}

func appsGroup(apiVersion string) bool {
	return apiVersion == appsv1.SchemeGroupVersion.String() || apiVersion == "extensions/v1beta1" || apiVersion == "apps/v1beta2"
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// syncStale resets a pod's stale DisruptionTarget condition to False.
func (c *Controller) syncStale(ctx context.Context, key string) (time.Duration, error) {
	pod, found, err := ownership.Lookup(key, c.pods.Pods, nil)
	if !found {
		return 0, err
	}
	stale, after := StaleDisruption(pod, c.cfg.Clock.Now())
	if !stale {
		return 0, nil
	}
	if after > 0 {
		return after, nil
	}
	np := pod.DeepCopy()
	for i := range np.Status.Conditions {
		if np.Status.Conditions[i].Type == corev1.DisruptionTarget {
			np.Status.Conditions[i].Status = corev1.ConditionFalse
			np.Status.Conditions[i].Reason, np.Status.Conditions[i].Message = "", ""
			np.Status.Conditions[i].LastTransitionTime = metav1.NewTime(c.cfg.Clock.Now())
		}
	}
	if _, err := c.cfg.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, np, metav1.UpdateOptions{}); err != nil {
		return 0, fmt.Errorf("reset DisruptionTarget of pod %s: %w", key, err)
	}
	return 0, nil
}
