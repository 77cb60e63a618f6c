package cloudnodelifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// Names the controller uses (SPEC §7, §10.1, §10.4).
const (
	ControllerName = "cloud-node-lifecycle-controller"
	EventSource    = ControllerName

	TaintShutdown     = "node.cloudprovider.kubernetes.io/shutdown"
	TaintOutOfService = "node.kubernetes.io/out-of-service"
	// OutOfServiceValue is the conventional value (SPEC NGS-1).
	OutOfServiceValue = "nodeshutdown"
	// AnnotationFencedAt marks an out-of-service taint added by automatic
	// fencing (RFC 3339 time it was added); only such a taint is removed.
	AnnotationFencedAt = "nodeplane.io/fenced-at"

	EventDeletingNode       = "DeletingNode"
	EventDeletingNodeFailed = "DeletingNodeFailed"
	EventNodeFenced         = "NodeFenced"
	EventNodeUnfenced       = "NodeUnfenced"
)

// Defaults.
const (
	DefaultNodeMonitorPeriod     = 5 * time.Second
	DefaultAutomaticFencingDelay = 60 * time.Second
)

// Instances is what the controller asks the provider (the part of
// cloudprovider.InstancesV2 it uses).
type Instances interface {
	InstanceExists(ctx context.Context, node *corev1.Node) (bool, error)
	InstanceShutdown(ctx context.Context, node *corev1.Node) (bool, error)
}

// Config tunes the decisions.
type Config struct {
	// EnableFencing is --enable-automatic-fencing.
	EnableFencing bool
	// FencingDelay is --automatic-fencing-delay: how long the node must
	// have been not Ready (since its Ready condition's last transition).
	FencingDelay time.Duration
}

// Provider states as shown by `nodeplane zones`.
const (
	StateNotAsked = ""         // the node is Ready: the provider is not asked
	StateRunning  = "running"  // exists, not shut down
	StateShutdown = "shutdown" // exists, shut down
	StateMissing  = "missing"  // does not exist
	StateError    = "error"    // the provider could not answer
)

// Decision is what to do with one node.
type Decision struct {
	Node string
	// State is the provider's answer (StateNotAsked for Ready nodes).
	State string
	// Err is the provider error behind StateError (or behind a shutdown
	// answer treated as "not shut down").
	Err error

	// Delete the Node (its machine does not exist).
	Delete bool
	// AddShutdownTaint / RemoveShutdownTaint change the shutdown taint.
	AddShutdownTaint    bool
	RemoveShutdownTaint bool
	// Fence adds the out-of-service taint and the fenced-at annotation;
	// Unfence removes the taint automatic fencing added and the annotation.
	Fence   bool
	Unfence bool
	// Fencing explains the fencing decision in words (empty when fencing
	// is off and there is nothing to say).
	Fencing string
}

// Core makes the decisions.
type Core struct {
	cfg      Config
	provider Instances
}

// New returns a core asking provider.
func New(cfg Config, provider Instances) *Core {
	if cfg.FencingDelay < 0 {
		cfg.FencingDelay = 0
	}
	return &Core{cfg: cfg, provider: provider}
}

// Decide returns the decision for node at now.
func (c *Core) Decide(ctx context.Context, now time.Time, node *corev1.Node) Decision {
	d := Decision{Node: node.Name}
	fenced := node.Annotations[AnnotationFencedAt] != ""
	ready := readyCondition(node)
	if ready != nil && ready.Status == corev1.ConditionTrue {
		d.RemoveShutdownTaint = hasTaint(node, TaintShutdown)
		if fenced {
			d.Unfence = true
			d.Fencing = "Ready again: removing the out-of-service taint automatic fencing added"
		}
		return d
	}
	exists, err := c.provider.InstanceExists(ctx, node)
	if err != nil {
		d.State, d.Err = StateError, err
		d.Fencing = c.fencingNote("not fenced: the cloud provider could not say whether the machine exists")
		return d
	}
	if !exists {
		d.State, d.Delete = StateMissing, true
		return d
	}
	shutdown, err := c.provider.InstanceShutdown(ctx, node)
	if err != nil {
		// Upstream treats NotImplemented and InstanceNotFound as "not shut
		// down"; so does every other error here: unknown never fences.
		d.State, d.Err = StateError, err
		if errors.Is(err, cloudprovider.NotImplemented) || errors.Is(err, cloudprovider.InstanceNotFound) {
			d.State = StateRunning
		}
		d.Fencing = c.fencingNote("not fenced: the cloud provider could not confirm the machine is shut down")
		return d
	}
	if !shutdown {
		d.State = StateRunning
		if fenced {
			d.Fencing = "fenced; the machine runs again, the taint goes when the node is Ready"
		} else {
			d.Fencing = c.fencingNote("not fenced: the machine is running")
		}
		return d
	}
	d.State = StateShutdown
	d.AddShutdownTaint = !hasTaint(node, TaintShutdown)
	switch {
	case fenced:
		d.Fencing = "fenced since " + node.Annotations[AnnotationFencedAt]
	case !c.cfg.EnableFencing:
	case hasTaint(node, TaintOutOfService):
		d.Fencing = "not fenced: an out-of-service taint is already set (not by automatic fencing)"
	default:
		since := node.CreationTimestamp.Time
		if ready != nil {
			since = ready.LastTransitionTime.Time
		}
		notReadyFor := now.Sub(since)
		if notReadyFor < c.cfg.FencingDelay {
			d.Fencing = fmt.Sprintf("will fence in %s: not Ready for %s of %s, machine shut down",
				(c.cfg.FencingDelay - notReadyFor).Round(time.Second), notReadyFor.Round(time.Second), c.cfg.FencingDelay)
			return d
		}
		d.Fence = true
		d.Fencing = fmt.Sprintf("fencing: not Ready for %s (longer than --automatic-fencing-delay %s) and the cloud provider reports its machine shut down",
			notReadyFor.Round(time.Second), c.cfg.FencingDelay)
	}
	return d
}

func (c *Core) fencingNote(s string) string {
	if !c.cfg.EnableFencing {
		return ""
	}
	return s
}

// FenceTaint is the taint automatic fencing adds.
func FenceTaint(now time.Time) corev1.Taint {
	t := metav1.NewTime(now)
	return corev1.Taint{Key: TaintOutOfService, Value: OutOfServiceValue, Effect: corev1.TaintEffectNoExecute, TimeAdded: &t}
}

// Apply changes node (a copy the caller owns) as d says, at now, and
// reports whether anything changed. Delete is not applied here.
func (d Decision) Apply(node *corev1.Node, now time.Time) bool {
	changed := false
	if d.RemoveShutdownTaint && removeTaints(node, func(t corev1.Taint) bool { return t.Key == TaintShutdown }) {
		changed = true
	}
	if d.AddShutdownTaint && !hasTaint(node, TaintShutdown) {
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: TaintShutdown, Effect: corev1.TaintEffectNoSchedule})
		changed = true
	}
	if d.Fence && !hasTaint(node, TaintOutOfService) && node.Annotations[AnnotationFencedAt] == "" {
		node.Spec.Taints = append(node.Spec.Taints, FenceTaint(now))
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		node.Annotations[AnnotationFencedAt] = now.UTC().Format(time.RFC3339)
		changed = true
	}
	if d.Unfence && node.Annotations[AnnotationFencedAt] != "" {
		removeTaints(node, func(t corev1.Taint) bool {
			return t.Key == TaintOutOfService && t.Value == OutOfServiceValue && t.Effect == corev1.TaintEffectNoExecute
		})
		delete(node.Annotations, AnnotationFencedAt)
		changed = true
	}
	return changed
}

func readyCondition(node *corev1.Node) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

func hasTaint(node *corev1.Node, key string) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

func removeTaints(node *corev1.Node, match func(corev1.Taint) bool) bool {
	out := node.Spec.Taints[:0:0]
	for _, t := range node.Spec.Taints {
		if !match(t) {
			out = append(out, t)
		}
	}
	if len(out) == len(node.Spec.Taints) {
		return false
	}
	node.Spec.Taints = out
	return true
}
