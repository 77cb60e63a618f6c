// Package nodeunschedulable is the NodeUnschedulable plugin (SCH-2): a node
// with spec.unschedulable (cordoned) is infeasible unless the pod tolerates
// the node.kubernetes.io/unschedulable:NoSchedule taint. It checks the spec
// field, so it applies before the lifecycle controller adds that taint. It
// reads only the pod and the Node object.
package nodeunschedulable

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
)

// Name is the upstream plugin name.
const Name = "NodeUnschedulable"

// Filter reasons, as upstream prints them.
const (
	ErrReasonUnschedulable    = "node(s) were unschedulable"
	ErrReasonUnknownCondition = "node(s) had unknown conditions"
)

var unschedulableTaint = corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}

var (
	statusUnschedulable = framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonUnschedulable).WithPlugin(Name)
	statusUnknown       = framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonUnknownCondition).WithPlugin(Name)
)

// Plugin is the NodeUnschedulable plugin.
type Plugin struct{}

// New returns the plugin.
func New() *Plugin { return &Plugin{} }

var (
	_ framework.FilterPlugin      = (*Plugin)(nil)
	_ framework.EnqueueExtensions = (*Plugin)(nil)
)

// Name implements framework.Plugin.
func (*Plugin) Name() string { return Name }

// EventsToRegister implements framework.EnqueueExtensions: a new node, or a
// node uncordoned (spec.unschedulable counts as a taint change).
func (*Plugin) EventsToRegister() []framework.ClusterEvent {
	return []framework.ClusterEvent{{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeTaint}}
}

// Filter rejects a cordoned node unless the pod tolerates the unschedulable
// taint.
func (*Plugin) Filter(_ context.Context, _ *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	node := ni.Node()
	if node == nil {
		return statusUnknown
	}
	if node.Spec.Unschedulable && !corev1helpers.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations, &unschedulableTaint, false) {
		return statusUnschedulable
	}
	return nil
}
