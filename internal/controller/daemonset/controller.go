package daemonset

import (
	"context"
	"errors"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeplane/nodeplane/internal/controller/manager"
	"github.com/nodeplane/nodeplane/internal/controller/ownership"
)

// Config configures the controller shell: upstream
// --concurrent-daemonset-syncs (2) workers, bursts of 250 pods.
type Config = ownership.Config

// DefaultConfig returns upstream's settings (Client still to be set).
func DefaultConfig() Config {
	return Config{Workers: 2, BurstReplicas: DefaultBurstReplicas, ExpectationsTimeout: ownership.DefaultExpectationsTimeout}
}

// Controller is the shell around Core.
type Controller struct {
	ownership.Shell
	cfg Config

	// per term
	core  *Core
	sets  appslisters.DaemonSetLister
	nodes corelisters.NodeLister
	pods  cache.Indexer
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
	c.core = New()
	c.StartTerm("daemonset", c.cfg.ExpectationsTimeout)
	si := term.Informers.Apps().V1().DaemonSets()
	ni := term.Informers.Core().V1().Nodes()
	pi := term.Informers.Core().V1().Pods()
	c.sets = si.Lister()
	c.nodes = ni.Lister()
	h := ownership.NewHandlers(Kind, c.sets.DaemonSets, func(ds *appsv1.DaemonSet) *metav1.LabelSelector { return ds.Spec.Selector }, c.Queue.Add, c.Expectations)
	idx, err := h.Register(si.Informer(), func(key string, ds metav1.Object) {
		c.Expectations.Forget(key)
		c.core.Forget(ds.GetUID())
	}, pi.Informer())
	if err != nil {
		return err
	}
	c.pods = idx[0]
	_, err = ni.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
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
	})
	return err
}

// Run implements manager.Controller.
func (c *Controller) Run(ctx context.Context) { c.Shell.Run(ctx, c.sync, "daemon set") }

func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ds, pods, found, err := ownership.Load[*corev1.Pod](key, c.sets.DaemonSets, c.Expectations, c.pods)
	if !found {
		return 0, err
	}
	ns := ds.Namespace
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return 0, err
	}
	now := c.Clock.Now()
	plan, err := c.core.Decide(Input{
		DS: ds, Nodes: nodes, Pods: pods, Settled: c.Expectations.Satisfied(key, now),
		BurstReplicas: c.cfg.BurstReplicas, Now: now,
	})
	if err != nil {
		c.Logger.Error("daemon set not synced", "daemonSet", key, "err", err)
		return 0, nil
	}
	for _, e := range plan.Events {
		c.Recorder.Event(ds, e.Type, e.Reason, e.Message)
	}
	if err := ownership.ApplyClaim(ctx, ds, Kind, c.Client.AppsV1().DaemonSets(ns).Get, c.Client.CoreV1().Pods(ns).Patch,
		ownership.Claimed[*corev1.Pod]{Adopt: plan.Adopt, Release: plan.Release}); err != nil {
		return 0, err
	}
	var manageErr error
	if len(plan.Create) > 0 || len(plan.Delete) > 0 {
		uids := make([]types.UID, len(plan.Delete))
		for i, p := range plan.Delete {
			uids[i] = p.UID
		}
		c.Expectations.Expect(key, len(plan.Create), uids, now)
		w := ownership.PodWriter{Pods: c.Client.CoreV1().Pods(ns), Recorder: c.Recorder, Owner: ds, Key: key, Expectations: c.Expectations}
		manageErr = errors.Join(
			w.Create(ctx, len(plan.Create), func(i int) *corev1.Pod { return PodForNode(ds, plan.Create[i], plan.Hash) }),
			w.Delete(ctx, plan.Delete))
	}
	if !apiequality.Semantic.DeepEqual(ds.Status, plan.Status) {
		client := c.Client.AppsV1().DaemonSets(ns)
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
		c.Queue.Add(ds.Namespace + "/" + ds.Name)
	}
}
