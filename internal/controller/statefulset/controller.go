package statefulset

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeplane/nodeplane/internal/controller/manager"
	"github.com/nodeplane/nodeplane/internal/controller/ownership"
)

// Config configures the controller shell: upstream
// --concurrent-statefulset-syncs (5) workers. BurstReplicas and
// ExpectationsTimeout are not used (a set writes pods by name).
type Config = ownership.Config

// DefaultConfig returns upstream's settings (Client still to be set).
func DefaultConfig() Config { return Config{Workers: 5} }

// Controller is the shell around Decide.
type Controller struct {
	ownership.Shell

	// per term
	sets      appslisters.StatefulSetLister
	claims    corelisters.PersistentVolumeClaimLister
	pods      cache.Indexer
	revisions cache.Indexer
}

// NewController returns the controller; zero Config fields take
// DefaultConfig's values.
func NewController(cfg Config) *Controller {
	c := &Controller{}
	c.Shell, _ = cfg.NewShell(ControllerName, DefaultConfig())
	return c
}

// Name implements manager.Controller.
func (c *Controller) Name() string { return ControllerName }

// Prepare implements manager.Controller.
func (c *Controller) Prepare(term *manager.Term) error {
	c.StartTerm("statefulset", 0)
	si := term.Informers.Apps().V1().StatefulSets()
	pi := term.Informers.Core().V1().Pods()
	ri := term.Informers.Apps().V1().ControllerRevisions()
	c.sets = si.Lister()
	c.claims = term.Informers.Core().V1().PersistentVolumeClaims().Lister()
	h := ownership.NewHandlers(Kind, c.sets.StatefulSets, func(s *appsv1.StatefulSet) *metav1.LabelSelector { return s.Spec.Selector }, c.Queue.Add, nil)
	idx, err := h.Register(si.Informer(), nil, pi.Informer(), ri.Informer())
	if err != nil {
		return err
	}
	c.pods, c.revisions = idx[0], idx[1]
	return nil
}

// Run implements manager.Controller.
func (c *Controller) Run(ctx context.Context) { c.Shell.Run(ctx, c.sync, "stateful set") }

func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	set, pods, found, err := ownership.Load[*corev1.Pod](key, c.sets.StatefulSets, nil, c.pods)
	if !found {
		return 0, err
	}
	ns := set.Namespace
	revObjs, err := c.revisions.ByIndex(ownership.OwnerIndex, ownership.ControlledKey(set.UID))
	if err != nil {
		return 0, err
	}
	var revs []*appsv1.ControllerRevision
	for _, o := range revObjs {
		if r, ok := o.(*appsv1.ControllerRevision); ok {
			revs = append(revs, r)
		}
	}
	claimList, err := c.claims.PersistentVolumeClaims(ns).List(labels.Everything())
	if err != nil {
		return 0, err
	}
	claims := make(map[string]*corev1.PersistentVolumeClaim, len(claimList))
	for _, cl := range claimList {
		claims[cl.Name] = cl
	}
	plan, err := Decide(Input{Set: set, Pods: pods, Claims: claims, Revisions: revs, Now: c.Clock.Now()})
	if err != nil {
		c.Logger.Error("stateful set not synced", "statefulSet", key, "err", err)
		return 0, nil
	}
	client := c.Client.AppsV1().StatefulSets(ns)
	podClient := c.Client.CoreV1().Pods(ns)
	if err := ownership.ApplyClaim(ctx, set, Kind, client.Get, podClient.Patch,
		ownership.Claimed[*corev1.Pod]{Adopt: plan.Adopt, Release: plan.Release}); err != nil {
		return 0, err
	}
	manageErr := c.carryOut(ctx, set, plan)
	if !apiequality.Semantic.DeepEqual(set.Status, plan.Status) {
		setStatus := func(s *appsv1.StatefulSet) { s.Status = plan.Status }
		if err := ownership.WriteStatus(ctx, set.DeepCopy(), setStatus, client.Get, client.UpdateStatus); err != nil {
			return 0, errors.Join(manageErr, err)
		}
	}
	return plan.RequeueAfter, manageErr
}

// carryOut writes the plan's revision, claims and pods, in that order,
// stopping at the first failure (a pod never starts without its claims).
func (c *Controller) carryOut(ctx context.Context, set *appsv1.StatefulSet, plan Plan) error {
	ns := set.Namespace
	if r := plan.Revision; r != nil {
		if _, err := c.Client.AppsV1().ControllerRevisions(ns).Create(ctx, r, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create revision %s/%s: %w", ns, r.Name, err)
		}
	}
	claims := c.Client.CoreV1().PersistentVolumeClaims(ns)
	if err := createEach(ctx, c, set, "claim", plan.CreateClaims, claims.Create,
		"create Claim %s for StatefulSet %s failed error: %v", "create Claim %s in StatefulSet %s success"); err != nil {
		return err
	}
	for _, cl := range plan.OwnClaims {
		if _, err := claims.Update(ctx, cl, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("update owners of claim %s/%s: %w", ns, cl.Name, err)
		}
	}
	pods := c.Client.CoreV1().Pods(ns)
	if err := createEach(ctx, c, set, "pod", plan.CreatePods, pods.Create,
		"create Pod %s in StatefulSet %s failed error: %v", "create Pod %s in StatefulSet %s successful"); err != nil {
		return err
	}
	for _, p := range plan.DeletePods {
		uid := p.UID
		err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			c.Recorder.Eventf(set, corev1.EventTypeWarning, ownership.ReasonFailedDelete, "delete Pod %s in StatefulSet %s failed error: %v", p.Name, set.Name, err)
			return fmt.Errorf("delete pod %s/%s: %w", ns, p.Name, err)
		}
		c.Recorder.Eventf(set, corev1.EventTypeNormal, ownership.ReasonSuccessfulDelete, "delete Pod %s in StatefulSet %s successful", p.Name, set.Name)
	}
	for _, r := range plan.DeleteRevisions {
		uid := r.UID
		err := c.Client.AppsV1().ControllerRevisions(ns).Delete(ctx, r.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete revision %s/%s: %w", ns, r.Name, err)
		}
	}
	return nil
}

// createEach creates objs in order, an existing one counting as created,
// and stops at the first failure; each create is an event on set, failed
// (a warning) or ok, formatted with the object's and the set's names.
func createEach[T metav1.Object](ctx context.Context, c *Controller, set *appsv1.StatefulSet, what string, objs []T,
	create func(context.Context, T, metav1.CreateOptions) (T, error), failed, ok string) error {
	for _, o := range objs {
		if _, err := create(ctx, o, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			c.Recorder.Eventf(set, corev1.EventTypeWarning, ownership.ReasonFailedCreate, failed, o.GetName(), set.Name, err)
			return fmt.Errorf("create %s %s/%s: %w", what, set.Namespace, o.GetName(), err)
		}
		c.Recorder.Eventf(set, corev1.EventTypeNormal, ownership.ReasonSuccessfulCreate, ok, o.GetName(), set.Name)
	}
	return nil
}
