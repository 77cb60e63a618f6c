package pvcprotection

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
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
	cfg    Config
	queue  workqueue.TypedRateLimitingInterface[string]
	claims corelisters.PersistentVolumeClaimLister
	pods   corelisters.PodLister
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
	c.queue = manager.NewQueue("pvcprotection", c.cfg.Clock)
	core := term.Informers.Core().V1()
	c.claims = core.PersistentVolumeClaims().Lister()
	c.pods = core.Pods().Lister()
	if err := manager.OnAddOrUpdate(core.PersistentVolumeClaims().Informer(), c.enqueueClaim); err != nil {
		return err
	}
	// A pod that goes (or is bound) may free (or hold) its claims.
	_, err := core.Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueuePodClaims,
		UpdateFunc: func(_, cur any) { c.enqueuePodClaims(cur) },
		DeleteFunc: c.enqueuePodClaims,
	})
	return err
}

// Run implements manager.Controller.
func (c *Controller) Run(ctx context.Context) {
	manager.RunWorkers(ctx, c.queue, 1, c.sync, c.cfg.Logger, "claim")
}

func (c *Controller) enqueueClaim(obj any) {
	if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok {
		c.queue.Add(pvc.Namespace + "/" + pvc.Name)
	}
}

func (c *Controller) enqueuePodClaims(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			c.queue.Add(pod.Namespace + "/" + v.PersistentVolumeClaim.ClaimName)
		}
	}
}

func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	namespace, name, _ := strings.Cut(key, "/")
	claim, err := c.claims.PersistentVolumeClaims(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	pods, err := c.pods.Pods(namespace).List(labels.Everything())
	if err != nil {
		return 0, err
	}
	switch Decide(claim, pods) {
	case AddFinalizer:
		claim = claim.DeepCopy()
		claim.Finalizers = append(claim.Finalizers, Finalizer)
	case RemoveFinalizer:
		// The cache may be behind a pod just created: ask the server.
		live, err := c.cfg.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, fmt.Errorf("list pods of %s: %w", namespace, err)
		}
		if p := UsedBy(claim, podPointers(live.Items)); p != nil {
			c.cfg.Logger.Debug("claim still in use", "claim", key, "pod", p.Name)
			return 0, nil
		}
		claim = claim.DeepCopy()
		claim.Finalizers = slices.DeleteFunc(claim.Finalizers, func(f string) bool { return f == Finalizer })
	default:
		return 0, nil
	}
	if _, err := c.cfg.Client.CoreV1().PersistentVolumeClaims(namespace).Update(ctx, claim, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("update finalizers of claim %s: %w", key, err)
	}
	return 0, nil
}

func podPointers(items []corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}
