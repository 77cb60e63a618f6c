// Package nodename is the NodeName plugin: a pod that names a node in
// spec.nodeName fits only that node. It reads only the pod and the Node.
package nodename

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
)

// Name is the upstream plugin name.
const Name = "NodeName"

// ErrReason is the Filter reason, as upstream prints it.
const ErrReason = "node(s) didn't match the requested node name"

var statusMismatch = framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReason).WithPlugin(Name)

// Plugin is the NodeName plugin.
type Plugin struct{}

// New returns the plugin.
func New() *Plugin { return &Plugin{} }

var (
	_ framework.FilterPlugin      = (*Plugin)(nil)
	_ framework.EnqueueExtensions = (*Plugin)(nil)
)

// Name implements framework.Plugin.
func (*Plugin) Name() string { return Name }

// EventsToRegister implements framework.EnqueueExtensions: only a new node
// can be the one the pod names.
func (*Plugin) EventsToRegister() []framework.ClusterEvent {
	return []framework.ClusterEvent{framework.EventNodeAdd}
}

// Filter accepts every node for a pod without spec.nodeName, else only the
// named one.
func (*Plugin) Filter(_ context.Context, _ *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	if pod.Spec.NodeName == "" || pod.Spec.NodeName == ni.Name() {
		return nil
	}
	return statusMismatch
}
