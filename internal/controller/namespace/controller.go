package namespace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/controller/manager"
)

// Config configures the controller.
type Config struct {
	Client kubernetes.Interface
	// Metadata lists and deletes the content of any resource by its
	// metadata alone.
	Metadata metadata.Interface
	// Workers is how many namespaces are processed at once (upstream
	// --concurrent-namespace-syncs). Default 10.
	Workers int
	// Recheck is how long a namespace whose content remains waits before
	// the next look. Default 1 s.
	Recheck time.Duration
	// Clock drives the work queue. Default: the real clock.
	Clock  clock.WithTicker
	Logger *slog.Logger
}

// Controller is the shell around Decide.
type Controller struct {
	cfg Config

	// per term, set in Prepare
	namespaces corelisters.NamespaceLister
	queue      workqueue.TypedRateLimitingInterface[string]
}

// NewController returns the controller.
func NewController(cfg Config) *Controller {
	if cfg.Workers <= 0 {
		cfg.Workers = 10
	}
	if cfg.Recheck <= 0 {
		cfg.Recheck = time.Second
	}
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
	c.queue = manager.NewQueue("namespace", c.cfg.Clock)
	inf := term.Informers.Core().V1().Namespaces()
	c.namespaces = inf.Lister()
	enqueue := func(obj any) {
		if ns, ok := obj.(*corev1.Namespace); ok && Pending(ns) {
			c.queue.Add(ns.Name)
		}
	}
	return manager.OnAddOrUpdate(inf.Informer(), enqueue)
}

// Run implements manager.Controller.
func (c *Controller) Run(ctx context.Context) {
	manager.RunWorkers(ctx, c.queue, c.cfg.Workers, c.sync, c.cfg.Logger, "namespace")
}

// sync carries out one pass of Decide for the namespace name.
func (c *Controller) sync(ctx context.Context, name string) (time.Duration, error) {
	ns, err := c.namespaces.Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if !Pending(ns) {
		return 0, nil // not terminating, or finalized already
	}
	plan := Decide(ns, c.content(ctx, name))
	background := metav1.DeletePropagationBackground
	for _, it := range plan.Delete {
		err := c.cfg.Metadata.Resource(it.Resource).Namespace(name).Delete(ctx, it.Name, metav1.DeleteOptions{PropagationPolicy: &background})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
			c.cfg.Logger.Warn("delete namespace content", "namespace", name, "resource", it.Resource.String(), "name", it.Name, "err", err)
		}
	}
	if plan.Wait {
		return c.cfg.Recheck, nil
	}
	if !plan.Finalize {
		return 0, nil
	}
	out := ns.DeepCopy()
	out.Spec.Finalizers = plan.Finalizers
	if _, err := c.cfg.Client.CoreV1().Namespaces().Finalize(ctx, out, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("finalize namespace %s: %w", name, err)
	}
	c.cfg.Logger.Info("namespace emptied and finalized", "namespace", name)
	return 0, nil
}

// content lists, as metadata, the objects of every namespaced resource the
// server serves that can be listed and deleted.
func (c *Controller) content(ctx context.Context, namespace string) Content {
	var out Content
	resources, err := deletableResources(c.cfg.Client.Discovery())
	if err != nil {
		c.cfg.Logger.Warn("discover namespaced resources", "err", err)
		out.Failed++
		if len(resources) == 0 {
			return out
		}
	}
	for _, gvr := range resources {
		list, err := c.cfg.Metadata.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			if !apierrors.IsNotFound(err) && !apierrors.IsMethodNotSupported(err) {
				c.cfg.Logger.Warn("list namespace content", "namespace", namespace, "resource", gvr.String(), "err", err)
				out.Failed++
			}
			continue
		}
		for _, obj := range list.Items {
			it := Item{Resource: gvr, Name: obj.Name, Deleting: obj.DeletionTimestamp != nil, Finalizers: len(obj.Finalizers)}
			if g := obj.DeletionGracePeriodSeconds; g != nil {
				it.GracePeriod = *g
			}
			out.Items = append(out.Items, it)
		}
	}
	return out
}

// deletableResources are the namespaced resources, in their preferred
// version, that support list and delete. A partial discovery failure
// returns what was found with the error.
func deletableResources(d discovery.DiscoveryInterface) ([]schema.GroupVersionResource, error) {
	lists, err := discovery.ServerPreferredNamespacedResources(d)
	var failed *discovery.ErrGroupDiscoveryFailed
	if err != nil && !errors.As(err, &failed) {
		return nil, err
	}
	lists = discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"list", "delete"}}, lists)
	set, gerr := discovery.GroupVersionResources(lists)
	if gerr != nil {
		return nil, gerr
	}
	out := make([]schema.GroupVersionResource, 0, len(set))
	for gvr := range set {
		out = append(out, gvr)
	}
	return out, err
}
