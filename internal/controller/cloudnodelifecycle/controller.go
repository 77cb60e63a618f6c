package cloudnodelifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/controller/manager"
)

// ControllerConfig configures the shell.
type ControllerConfig struct {
	Core Config
	// Period is --node-monitor-period (default 5 s).
	Period   time.Duration
	Provider Instances
	Client   kubernetes.Interface
	Clock    clock.WithTicker
	Logger   *slog.Logger
}

// NodeState is one node's line in `nodeplane zones`.
type NodeState struct {
	Node string `json:"node"`
	// Provider is the provider's last answer: running, shutdown, missing,
	// error, or empty when the node is Ready (not asked).
	Provider string `json:"provider,omitempty"`
	Error    string `json:"error,omitempty"`
	// Fencing is the last fencing decision in words.
	Fencing string `json:"fencing,omitempty"`
}

// Controller runs the passes.
type Controller struct {
	cfg   ControllerConfig
	core  *Core
	nodes corelisters.NodeLister
	rec   record.EventRecorder

	mu    sync.Mutex
	state map[string]NodeState
}

// NewController returns the controller.
func NewController(cfg ControllerConfig) (*Controller, error) {
	if cfg.Provider == nil || cfg.Client == nil {
		return nil, fmt.Errorf("%s: a provider with InstancesV2 and a client are required", ControllerName)
	}
	if cfg.Period <= 0 {
		cfg.Period = DefaultNodeMonitorPeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Logger = cfg.Logger.With("controller", ControllerName)
	return &Controller{cfg: cfg, core: New(cfg.Core, cfg.Provider), state: map[string]NodeState{}}, nil
}

// Name implements manager.Controller.
func (c *Controller) Name() string { return ControllerName }

// Prepare implements manager.Controller.
func (c *Controller) Prepare(term *manager.Term) error {
	c.nodes = term.Informers.Core().V1().Nodes().Lister()
	return nil
}

// Run implements manager.Controller.
func (c *Controller) Run(ctx context.Context) {
	rec, stop := manager.EventRecorder(ctx, c.cfg.Client, EventSource)
	defer stop()
	c.rec = rec
	t := c.cfg.Clock.NewTicker(c.cfg.Period)
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

// States returns the last decision per node, sorted by name.
func (c *Controller) States() []NodeState {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]NodeState, 0, len(c.state))
	for _, s := range c.state {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

func (c *Controller) pass(ctx context.Context) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	seen := make(map[string]NodeState, len(nodes))
	for _, node := range nodes {
		if ctx.Err() != nil {
			return
		}
		d := c.core.Decide(ctx, c.cfg.Clock.Now(), node)
		st := NodeState{Node: node.Name, Provider: d.State, Fencing: d.Fencing}
		if d.Err != nil {
			st.Error = d.Err.Error()
			if d.State == StateError {
				c.cfg.Logger.Warn("cloud provider could not answer; node skipped", "node", node.Name, "err", d.Err)
			}
		}
		c.act(ctx, node, d)
		if !d.Delete {
			seen[node.Name] = st
		}
	}
	c.mu.Lock()
	c.state = seen
	c.mu.Unlock()
}

func (c *Controller) act(ctx context.Context, node *corev1.Node, d Decision) {
	if d.Delete {
		c.rec.Eventf(node, corev1.EventTypeNormal, EventDeletingNode, "Deleting node %s because it does not exist in the cloud provider", node.Name)
		uid := node.UID
		err := c.cfg.Client.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			c.rec.Eventf(node, corev1.EventTypeWarning, EventDeletingNodeFailed, "Failed deleting node %s: %v", node.Name, err)
			c.cfg.Logger.Warn("delete node", "node", node.Name, "err", err)
			return
		}
		c.cfg.Logger.Info("deleted node: its machine does not exist in the cloud provider", "node", node.Name)
		return
	}
	if !d.AddShutdownTaint && !d.RemoveShutdownTaint && !d.Fence && !d.Unfence {
		return
	}
	var applied bool
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.cfg.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != node.UID {
			return apierrors.NewNotFound(corev1.Resource("nodes"), node.Name)
		}
		cur = cur.DeepCopy()
		if applied = d.Apply(cur, c.cfg.Clock.Now()); !applied {
			return nil
		}
		_, err = c.cfg.Client.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		if !apierrors.IsNotFound(err) {
			c.cfg.Logger.Warn("update node taints", "node", node.Name, "err", err)
		}
		return
	}
	if !applied {
		return
	}
	switch {
	case d.Fence:
		c.rec.Eventf(node, corev1.EventTypeWarning, EventNodeFenced, "Node %s fenced with taint %s=%s:NoExecute: %s",
			node.Name, TaintOutOfService, OutOfServiceValue, d.Fencing)
		c.cfg.Logger.Info("fenced node", "node", node.Name, "why", d.Fencing)
	case d.Unfence:
		c.rec.Eventf(node, corev1.EventTypeNormal, EventNodeUnfenced, "Node %s is Ready again: removed taint %s that automatic fencing added",
			node.Name, TaintOutOfService)
		c.cfg.Logger.Info("unfenced node", "node", node.Name)
	}
}
