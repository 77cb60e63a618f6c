package pvprotection

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/controller/manager"
)

// Config configures the controller.
type Config struct {
	Client kubernetes.Interface
	Clock  clock.WithTicker
	Logger *slog.Logger
}

// Controller is the shell around Decide.
type Controller struct {
	cfg     Config
	queue   workqueue.TypedRateLimitingInterface[string]
	volumes corelisters.PersistentVolumeLister
}

// NewController returns the controller.
func NewController(cfg Config) *Controller {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Logger = cfg.Logger.With("controller", ControllerName)
	return &Controller{cfg: cfg}
}

// Name implements manager.Controller.
func (c *Controller) Name() string { return ControllerName }

// Prepare implements manager.Controller.
func (c *Controller) Prepare(term *manager.Term) error {
	c.queue = manager.NewQueue("pvprotection", c.cfg.Clock)
	inf := term.Informers.Core().V1().PersistentVolumes()
	c.volumes = inf.Lister()
	enqueue := func(obj any) {
		if pv, ok := obj.(*corev1.PersistentVolume); ok {
			c.queue.Add(pv.Name)
		}
	}
	return manager.OnAddOrUpdate(inf.Informer(), enqueue)
}

// Run implements manager.Controller.
func (c *Controller) Run(ctx context.Context) {
	manager.RunWorkers(ctx, c.queue, 1, c.sync, c.cfg.Logger, "volume")
}

func (c *Controller) sync(ctx context.Context, name string) (time.Duration, error) {
	pv, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	switch Decide(pv) {
	case AddFinalizer:
		pv = pv.DeepCopy()
		pv.Finalizers = append(pv.Finalizers, Finalizer)
	case RemoveFinalizer:
		pv = pv.DeepCopy()
		pv.Finalizers = slices.DeleteFunc(pv.Finalizers, func(f string) bool { return f == Finalizer })
	default:
		return 0, nil
	}
	if _, err := c.cfg.Client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("update finalizers of volume %s: %w", name, err)
	}
	return 0, nil
}
