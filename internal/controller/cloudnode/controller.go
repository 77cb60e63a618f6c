package cloudnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/controller/manager"
)

// Metadata is what the controller asks the provider (the part of
// cloudprovider.InstancesV2 it uses).
type Metadata interface {
	InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error)
}

// Config configures the controller.
type Config struct {
	Provider Metadata
	Client   kubernetes.Interface
	// ConcurrentNodeSyncs is --concurrent-node-syncs (default 1).
	ConcurrentNodeSyncs int
	// ConcurrentNodeStatusUpdates is --concurrent-node-status-updates
	// (0: as many as ConcurrentNodeSyncs).
	ConcurrentNodeStatusUpdates int
	// NodeStatusUpdateFrequency is --node-status-update-frequency (5 m).
	NodeStatusUpdateFrequency time.Duration
	Clock                     clock.WithTicker
	Logger                    *slog.Logger
}

// Controller initialises nodes and keeps their addresses in step.
type Controller struct {
	cfg   Config
	queue workqueue.TypedRateLimitingInterface[string]
	nodes corelisters.NodeLister
	rec   record.EventRecorder
}

// updateBackoff is upstream's retry of the initialising update.
var updateBackoff = wait.Backoff{Steps: 20, Duration: 50 * time.Millisecond, Jitter: 1.0}

// NewController returns the controller.
func NewController(cfg Config) (*Controller, error) {
	if cfg.Provider == nil || cfg.Client == nil {
		return nil, fmt.Errorf("%s: a provider with InstancesV2 and a client are required", ControllerName)
	}
	if cfg.ConcurrentNodeSyncs <= 0 {
		cfg.ConcurrentNodeSyncs = DefaultConcurrentNodeSyncs
	}
	if cfg.ConcurrentNodeStatusUpdates <= 0 {
		cfg.ConcurrentNodeStatusUpdates = cfg.ConcurrentNodeSyncs
	}
	if cfg.NodeStatusUpdateFrequency <= 0 {
		cfg.NodeStatusUpdateFrequency = DefaultNodeStatusUpdateFrequency
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Logger = cfg.Logger.With("controller", ControllerName)
	return &Controller{cfg: cfg}, nil
}

// Name implements manager.Controller.
func (c *Controller) Name() string { return ControllerName }

// Prepare implements manager.Controller.
func (c *Controller) Prepare(term *manager.Term) error {
	c.queue = manager.NewQueue("cloud_node", c.cfg.Clock)
	ni := term.Informers.Core().V1().Nodes()
	c.nodes = ni.Lister()
	enqueue := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok && IsUninitialized(n) {
			c.queue.Add(n.Name)
		}
	}
	return manager.OnAddOrUpdate(ni.Informer(), enqueue)
}

// Run implements manager.Controller.
func (c *Controller) Run(ctx context.Context) {
	rec, stop := manager.EventRecorder(ctx, c.cfg.Client, EventSource)
	defer stop()
	c.rec = rec
	go c.statusLoop(ctx)
	manager.RunWorkers(ctx, c.queue, c.cfg.ConcurrentNodeSyncs, c.sync, c.cfg.Logger, "node")
}

// sync initialises one node (CNC-1).
func (c *Controller) sync(ctx context.Context, name string) (time.Duration, error) {
	cached, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if !IsUninitialized(cached) {
		return 0, nil
	}
	md, err := c.cfg.Provider.InstanceMetadata(ctx, cached)
	if err != nil {
		return 0, fmt.Errorf("instance metadata of node %s: %w", name, err)
	}
	if md == nil {
		c.cfg.Logger.Info("provider returned no metadata; node stays uninitialized", "node", name)
		return 0, nil
	}
	var addrs []corev1.NodeAddress
	var updated *corev1.Node
	err = retry.OnError(updateBackoff, apierrors.IsConflict, func() error {
		cur, err := c.cfg.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !IsUninitialized(cur) {
			updated = nil
			return nil
		}
		cur = cur.DeepCopy()
		if addrs, err = Initialize(cur, md); err != nil {
			return err
		}
		updated, err = c.cfg.Client.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("initialize node %s: %w", name, err)
	case updated == nil:
		return 0, nil // someone else initialised it
	}
	if err := c.writeAddresses(ctx, updated, addrs); err != nil {
		return 0, err
	}
	c.rec.Event(updated, corev1.EventTypeNormal, EventSynced, MessageSynced)
	c.cfg.Logger.Info("initialized node", "node", name, "providerID", updated.Spec.ProviderID)
	return 0, nil
}

func (c *Controller) writeAddresses(ctx context.Context, node *corev1.Node, addrs []corev1.NodeAddress) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.cfg.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur = cur.DeepCopy()
		cur.Status.Addresses = addrs
		_, err = c.cfg.Client.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("addresses of node %s: %w", node.Name, err)
	}
	return nil
}

// statusLoop syncs the addresses and labels of initialised nodes every
// NodeStatusUpdateFrequency (CNC-2, CNC-3).
func (c *Controller) statusLoop(ctx context.Context) {
	t := c.cfg.Clock.NewTicker(c.cfg.NodeStatusUpdateFrequency)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		nodes, err := c.nodes.List(labels.Everything())
		if err != nil {
			continue
		}
		work := make(chan *corev1.Node)
		done := make(chan struct{})
		for range c.cfg.ConcurrentNodeStatusUpdates {
			go func() {
				defer func() { done <- struct{}{} }()
				for n := range work {
					c.updateStatus(ctx, n)
				}
			}()
		}
		for _, n := range nodes {
			if !IsUninitialized(n) {
				work <- n
			}
		}
		close(work)
		for range c.cfg.ConcurrentNodeStatusUpdates {
			<-done
		}
	}
}

func (c *Controller) updateStatus(ctx context.Context, node *corev1.Node) {
	if ReconcileLabels(node.DeepCopy()) {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := c.cfg.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur = cur.DeepCopy()
			if !ReconcileLabels(cur) {
				return nil
			}
			_, err = c.cfg.Client.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil && !apierrors.IsNotFound(err) {
			c.cfg.Logger.Warn("reconcile labels", "node", node.Name, "err", err)
		}
	}
	md, err := c.cfg.Provider.InstanceMetadata(ctx, node)
	if err != nil {
		if !errors.Is(err, cloudprovider.InstanceNotFound) {
			c.cfg.Logger.Warn("instance metadata", "node", node.Name, "err", err)
		}
		return
	}
	if md == nil {
		return
	}
	addrs, changed := SyncAddresses(node, md.NodeAddresses)
	if !changed {
		return
	}
	if err := c.writeAddresses(ctx, node, addrs); err != nil {
		c.cfg.Logger.Warn("sync addresses", "err", err)
	}
}
