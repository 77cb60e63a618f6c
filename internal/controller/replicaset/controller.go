package replicaset

import (
	"context"
	"errors"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeplane/nodeplane/internal/controller/manager"
	"github.com/nodeplane/nodeplane/internal/controller/ownership"
)

// Config configures the controller shell: upstream
// --concurrent-replicaset-syncs (5) workers, bursts of 500 pods.
type Config = ownership.Config

// DefaultConfig returns upstream's settings (Client still to be set).
func DefaultConfig() Config {
	return Config{Workers: 5, BurstReplicas: DefaultBurstReplicas, ExpectationsTimeout: ownership.DefaultExpectationsTimeout}
}

// Controller is the shell around Decide: informer events enqueue
// ReplicaSet keys, workers sync them and carry out the plans.
type Controller struct {
	ownership.Shell
	cfg Config

	// per term
	sets     appslisters.ReplicaSetLister
	setIndex cache.Indexer
	pods     cache.Indexer
}

// NewController returns the controller; zero Config fields take
// DefaultConfig's values.
func NewController(cfg Config) *Controller {
	c := &Controller{}
	c.Shell, c.cfg = cfg.NewShell(ControllerName, DefaultConfig())
	return c
}

// Name implements manager.Controller.
func (c *Controller) Name() string { return ControllerName }

// Prepare implements manager.Controller.
func (c *Controller) Prepare(term *manager.Term) error {
	c.StartTerm("replicaset", c.cfg.ExpectationsTimeout)
	si := term.Informers.Apps().V1().ReplicaSets()
	pi := term.Informers.Core().V1().Pods()
	c.sets = si.Lister()
	var err error
	if c.setIndex, err = ownership.OwnerIndexer(si.Informer()); err != nil {
		return err
	}
	h := ownership.NewHandlers(Kind, c.sets.ReplicaSets, func(rs *appsv1.ReplicaSet) *metav1.LabelSelector { return rs.Spec.Selector }, c.Queue.Add, c.Expectations)
	idx, err := h.Register(si.Informer(), func(key string, _ metav1.Object) { c.Expectations.Forget(key) }, pi.Informer())
	if err != nil {
		return err
	}
	c.pods = idx[0]
	return nil
}

// Run implements manager.Controller.
func (c *Controller) Run(ctx context.Context) { c.Shell.Run(ctx, c.sync, "replica set") }

// sync runs one ReplicaSet's plan. It returns when to sync again, and an
// error to retry with back-off.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	rs, pods, found, err := ownership.Load[*corev1.Pod](key, c.sets.ReplicaSets, c.Expectations, c.pods)
	if !found {
		return 0, err
	}
	ns := rs.Namespace
	now := c.Clock.Now()
	related, err := c.related(rs)
	if err != nil {
		return 0, err
	}
	plan, err := Decide(Input{
		RS: rs, Pods: pods, Related: related, Settled: c.Expectations.Satisfied(key, now),
		BurstReplicas: c.cfg.BurstReplicas, Now: now,
	})
	if err != nil {
		c.Logger.Error("replica set not synced", "replicaSet", key, "err", err)
		return 0, nil
	}
	client := c.Client.AppsV1().ReplicaSets(ns)
	if err := ownership.ApplyClaim(ctx, rs, Kind, client.Get, c.Client.CoreV1().Pods(ns).Patch,
		ownership.Claimed[*corev1.Pod]{Adopt: plan.Adopt, Release: plan.Release}); err != nil {
		return 0, err
	}
	w := ownership.PodWriter{Pods: c.Client.CoreV1().Pods(ns), Recorder: c.Recorder, Owner: rs, Key: key, Expectations: c.Expectations}
	var reason, msg string
	var manageErr error
	switch {
	case plan.Create > 0:
		c.Expectations.Expect(key, plan.Create, nil, now)
		tmpl := PodFromTemplate(&rs.Spec.Template, ns, rs.Name+"-", *metav1.NewControllerRef(rs, Kind))
		if manageErr = w.Create(ctx, plan.Create, func(int) *corev1.Pod { return tmpl.DeepCopy() }); manageErr != nil {
			reason, msg = ReasonFailedCreate, manageErr.Error()
		}
	case len(plan.Delete) > 0:
		c.Expectations.Expect(key, 0, uids(plan.Delete), now)
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
