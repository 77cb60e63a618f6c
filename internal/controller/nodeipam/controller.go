package nodeipam

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/controller/manager"
)

// EventSource is the events' source component (upstream's range allocator).
const EventSource = "cidrAllocator"

// Event reasons (upstream).
const (
	ReasonCIDRNotAvailable     = "CIDRNotAvailable"
	ReasonCIDRAssignmentFailed = "CIDRAssignmentFailed"
)

// cidrUpdateRetries is how often a patch is tried (upstream).
const cidrUpdateRetries = 3

// ShellConfig configures the controller.
type ShellConfig struct {
	// IPAM is the validated allocator configuration (Options.Parse).
	IPAM   Config
	Client kubernetes.Interface
	// Workers sync nodes in parallel (upstream: 30).
	Workers int
	// Clock drives the work queue's back-off. Default: the real clock.
	Clock    clock.WithTicker
	Logger   *slog.Logger
	Registry prometheus.Registerer
}

// Controller is the shell around the Allocator.
type Controller struct {
	cfg     ShellConfig
	metrics *Metrics

	// per term, set in Prepare
	nodes    corelisters.NodeLister
	queue    workqueue.TypedRateLimitingInterface[string]
	recorder record.EventRecorder

	mu    sync.Mutex
	alloc *Allocator // nil until the term's rebuild succeeded
	// waiting are nodes left without a range because a cluster CIDR was
	// exhausted; a release queues them again.
	waiting map[string]bool
}

// NewController checks the configuration and registers the metrics.
func NewController(cfg ShellConfig) (*Controller, error) {
	if cfg.Client == nil {
		return nil, errors.New("node IPAM controller: Client is required")
	}
	if _, err := NewAllocator(cfg.IPAM, nil); err != nil {
		return nil, err
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 30
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Logger = cfg.Logger.With("controller", ControllerName)
	return &Controller{cfg: cfg, metrics: NewMetrics(cfg.Registry)}, nil
}

// Name implements manager.Controller.
func (c *Controller) Name() string { return ControllerName }

// Prepare implements manager.Controller: a fresh queue and node handlers.
// The allocator itself is rebuilt in Run, once the informer has synced.
func (c *Controller) Prepare(term *manager.Term) error {
	c.mu.Lock()
	c.alloc, c.waiting = nil, map[string]bool{}
	c.mu.Unlock()
	c.queue = manager.NewQueue("cidrallocator_node", c.cfg.Clock)
	inf := term.Informers.Core().V1().Nodes()
	c.nodes = inf.Lister()
	queue := c.queue
	_, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { enqueue(queue, obj) },
		UpdateFunc: func(_, obj any) { enqueue(queue, obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				c.released(n)
				queue.Add(n.Name)
			}
		},
	})
	return err
}

func enqueue(q workqueue.TypedRateLimitingInterface[string], obj any) {
	if n, ok := obj.(*corev1.Node); ok {
		q.Add(n.Name)
	}
}

// released frees a deleted node's ranges at once (IPAM-6) and queues the
// nodes waiting for one. Before the rebuild there is nothing to free: the
// rebuild reads the cache, which no longer holds the node.
func (c *Controller) released(n *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.alloc == nil || len(n.Spec.PodCIDRs) == 0 {
		return
	}
	if err := c.alloc.Release(n.Spec.PodCIDRs); err != nil {
		c.cfg.Logger.Error("release node CIDRs", "node", n.Name, "podCIDRs", n.Spec.PodCIDRs, "err", err)
	}
	c.requeueWaitingLocked()
}

func (c *Controller) requeueWaitingLocked() {
	for name := range c.waiting {
		c.queue.Add(name)
	}
}

// Run implements manager.Controller.
func (c *Controller) Run(ctx context.Context) {
	recorder, stop := manager.EventRecorder(ctx, c.cfg.Client, EventSource)
	defer stop()
	c.recorder = recorder
	if err := c.rebuild(); err != nil {
		c.cfg.Logger.Error("node IPAM controller not started: existing node CIDRs do not fit the configuration", "err", err)
		<-ctx.Done()
		c.queue.ShutDown()
		return
	}
	manager.RunWorkers(ctx, c.queue, c.cfg.Workers, c.sync, c.cfg.Logger, "node CIDRs")
}

// rebuild marks every cached node's podCIDRs used (IPAM-3).
func (c *Controller) rebuild() error {
	alloc, err := NewAllocator(c.cfg.IPAM, c.metrics)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	occupied := 0
	for _, n := range nodes {
		if len(n.Spec.PodCIDRs) == 0 {
			continue
		}
		if err := alloc.Occupy(n.Name, n.Spec.PodCIDRs); err != nil {
			return err
		}
		occupied++
	}
	c.alloc = alloc
	c.cfg.Logger.Info("node CIDRs rebuilt", "nodes", len(nodes), "withCIDRs", occupied, "sets", alloc.Stats())
	return nil
}

func (c *Controller) allocator() *Allocator {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.alloc
}

// sync is upstream's syncNode for one node name.
func (c *Controller) sync(ctx context.Context, name string) (time.Duration, error) {
	n, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		c.setWaiting(name, false)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	alloc := c.allocator()
	if Decide(n) == Allocate {
		// The cache may not show this controller's own patch yet (an
		// update of the node's status can arrive first): ask the API before
		// reserving, so a node is never given blocks twice.
		n, err = c.cfg.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			c.setWaiting(name, false)
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("get node %s: %w", name, err)
		}
	}
	switch Decide(n) {
	case Release:
		c.setWaiting(name, false)
		if err := alloc.Release(n.Spec.PodCIDRs); err != nil {
			return 0, fmt.Errorf("release CIDRs of node %s: %w", name, err)
		}
		c.mu.Lock()
		c.requeueWaitingLocked()
		c.mu.Unlock()
		return 0, nil
	case Occupy:
		c.setWaiting(name, false)
		return 0, alloc.Occupy(name, n.Spec.PodCIDRs)
	case Allocate:
		return 0, c.allocate(ctx, alloc, n)
	}
	return 0, nil
}

func (c *Controller) setWaiting(name string, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if on {
		c.waiting[name] = true
	} else {
		delete(c.waiting, name)
	}
}

// allocate reserves a block per family and patches the node (IPAM-4/5).
func (c *Controller) allocate(ctx context.Context, alloc *Allocator, n *corev1.Node) error {
	cidrs, err := alloc.Reserve()
	if err != nil {
		c.setWaiting(n.Name, true)
		c.statusEvent(n, corev1.EventTypeNormal, ReasonCIDRNotAvailable)
		return err
	}
	c.setWaiting(n.Name, false)
	current, err := c.nodes.Get(n.Name)
	if err != nil {
		_ = alloc.Release(cidrs) // blocks this call reserved: always in range
		return fmt.Errorf("get node %s for updating spec.podCIDRs: %w", n.Name, err)
	}
	switch AfterReserve(cidrs, current.Spec.PodCIDRs) {
	case Done:
		return nil
	case GiveBack:
		c.cfg.Logger.Warn("node already has a CIDR allocated; releasing the new one", "node", n.Name, "podCIDRs", current.Spec.PodCIDRs)
		return alloc.Release(cidrs)
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"podCIDR": cidrs[0], "podCIDRs": cidrs}})
	if err != nil {
		return err
	}
	for range cidrUpdateRetries {
		if _, err = c.cfg.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err == nil {
			c.cfg.Logger.Info("set node PodCIDR", "node", n.Name, "podCIDRs", cidrs)
			return nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	c.statusEvent(n, corev1.EventTypeWarning, ReasonCIDRAssignmentFailed)
	// A timed-out patch may have gone through: keep the blocks (a restart
	// frees them if not) rather than hand them out twice.
	if !apierrors.IsServerTimeout(err) {
		_ = alloc.Release(cidrs)
	}
	return fmt.Errorf("patch spec.podCIDRs of node %s: %w", n.Name, err)
}

// statusEvent records upstream's "Node <name> status is now: <reason>".
func (c *Controller) statusEvent(n *corev1.Node, eventType, reason string) {
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}
	c.recorder.Eventf(ref, eventType, reason, "Node %s status is now: %s", n.Name, reason)
}

// Stats returns the current term's use of each cluster CIDR (nil when not
// leading or not rebuilt).
func (c *Controller) Stats() []SetStats {
	if a := c.allocator(); a != nil {
		return a.Stats()
	}
	return nil
}
