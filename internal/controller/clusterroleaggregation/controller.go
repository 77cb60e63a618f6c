package clusterroleaggregation

import (
	"context"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/nodeplane/nodeplane/internal/controller/manager"
)

// Config configures the controller.
type Config struct {
	Client kubernetes.Interface
	Logger *slog.Logger
}

// Controller keeps aggregated ClusterRoles current.
type Controller struct {
	cfg    Config
	roles  rbaclisters.ClusterRoleLister
	synced cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
}

// NewController returns the controller.
func NewController(cfg Config) *Controller {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Logger = cfg.Logger.With("controller", ControllerName)
	return &Controller{cfg: cfg}
}

// Name implements manager.Controller.
func (c *Controller) Name() string { return ControllerName }

// Prepare implements manager.Controller: any change to any ClusterRole
// queues every aggregated one (a label change can add or remove a role
// from any selector).
func (c *Controller) Prepare(term *manager.Term) error {
	inf := term.Informers.Rbac().V1().ClusterRoles()
	c.roles = inf.Lister()
	c.synced = inf.Informer().HasSynced
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 10*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: ControllerName})
	_, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.enqueueAggregated() },
		UpdateFunc: func(any, any) { c.enqueueAggregated() },
		DeleteFunc: func(any) { c.enqueueAggregated() },
	})
	return err
}

func (c *Controller) enqueueAggregated() {
	all, err := c.roles.List(labels.Everything())
	if err != nil {
		return
	}
	for _, r := range all {
		if r.AggregationRule != nil {
			c.queue.Add(r.Name)
		}
	}
}

// Run implements manager.Controller.
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return
	}
	c.enqueueAggregated()
	for {
		name, quit := c.queue.Get()
		if quit {
			return
		}
		if err := c.sync(ctx, name); err != nil {
			c.cfg.Logger.Warn("aggregate cluster role", "clusterrole", name, "err", err)
			c.queue.AddRateLimited(name)
		} else {
			c.queue.Forget(name)
		}
		c.queue.Done(name)
	}
}

func (c *Controller) sync(ctx context.Context, name string) error {
	role, err := c.roles.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	all, err := c.roles.List(labels.Everything())
	if err != nil {
		return err
	}
	rules, ok, err := Aggregate(role, all)
	if err != nil {
		c.cfg.Logger.Warn("cluster role has an invalid aggregationRule", "clusterrole", name, "err", err)
		return nil // not retried: it needs an edit, which queues it again
	}
	if !ok || !NeedsUpdate(role, rules) {
		return nil
	}
	upd := role.DeepCopy()
	upd.Rules = rules
	if _, err := c.cfg.Client.RbacV1().ClusterRoles().Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		return err
	}
	c.cfg.Logger.Info("aggregated cluster role", "clusterrole", name, "rules", len(rules))
	return nil
}
