package podgc

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/nodeplane/nodeplane/internal/controller/manager"
)

// ControllerConfig configures the controller shell.
type ControllerConfig struct {
	Core     Config
	Client   kubernetes.Interface
	Clock    clock.WithTicker
	Logger   *slog.Logger
	Registry prometheus.Registerer
}

// Controller runs the pod GC pass every Period through the API.
type Controller struct {
	cfg     ControllerConfig
	deletes *prometheus.CounterVec
	errors  *prometheus.CounterVec

	core  *Core
	pods  corelisters.PodLister
	nodes corelisters.NodeLister
}

// NewController returns the controller and registers its metrics.
func NewController(cfg ControllerConfig) *Controller {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Core.Period <= 0 {
		cfg.Core.Period = DefaultConfig().Period
	}
	if cfg.Core.Quarantine <= 0 {
		cfg.Core.Quarantine = DefaultConfig().Quarantine
	}
	cfg.Logger = cfg.Logger.With("controller", ControllerName)
	c := &Controller{
		cfg: cfg,
		deletes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricForceDeletes, Help: "Pods force-deleted by the pod garbage collector.",
		}, []string{"namespace", "reason"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricForceDeleteErrors, Help: "Errors force-deleting pods in the pod garbage collector.",
		}, []string{"namespace", "reason"}),
	}
	if cfg.Registry != nil {
		cfg.Registry.MustRegister(c.deletes, c.errors)
	}
	return c
}

// Name implements manager.Controller.
func (c *Controller) Name() string { return ControllerName }

// Prepare implements manager.Controller.
func (c *Controller) Prepare(term *manager.Term) error {
	c.core = New(c.cfg.Core)
	c.pods = term.Informers.Core().V1().Pods().Lister()
	c.nodes = term.Informers.Core().V1().Nodes().Lister()
	return nil
}

// Run implements manager.Controller.
func (c *Controller) Run(ctx context.Context) {
	t := c.cfg.Clock.NewTicker(c.cfg.Core.Period)
	defer t.Stop()
	for {
		c.pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

func (c *Controller) pass(ctx context.Context) {
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	plan := c.core.Plan(c.cfg.Clock.Now(), pods, nodes)
	c.delete(ctx, plan.Terminated)
	c.delete(ctx, plan.OutOfService)
	var gone []string
	for _, name := range plan.Confirm {
		_, err := c.cfg.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			gone = append(gone, name)
		}
	}
	c.delete(ctx, plan.Orphans(gone))
	c.delete(ctx, plan.Unscheduled)
}

func (c *Controller) delete(ctx context.Context, ds []Deletion) {
	for _, d := range ds {
		if ctx.Err() != nil {
			return
		}
		pods := c.cfg.Client.CoreV1().Pods(d.Pod.Namespace)
		if d.Fail {
			p := d.Pod.DeepCopy()
			p.Status = d.FailedStatus(c.cfg.Clock.Now())
			if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
				c.errors.WithLabelValues(d.Pod.Namespace, d.Reason).Inc()
				continue
			}
		}
		uid := d.Pod.UID
		err := pods.Delete(ctx, d.Pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &uid}})
		switch {
		case err == nil || apierrors.IsNotFound(err):
			c.deletes.WithLabelValues(d.Pod.Namespace, d.Reason).Inc()
			c.cfg.Logger.Info("force-deleted pod", "pod", d.Pod.Namespace+"/"+d.Pod.Name, "reason", d.Reason)
		case apierrors.IsConflict(err):
		default:
			c.errors.WithLabelValues(d.Pod.Namespace, d.Reason).Inc()
			c.cfg.Logger.Warn("force-delete pod", "pod", d.Pod.Namespace+"/"+d.Pod.Name, "err", err)
		}
	}
}
