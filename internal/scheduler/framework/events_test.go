package framework_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
	ft "github.com/nodeplane/nodeplane/internal/scheduler/framework/frameworktest"
)

func TestNodeUpdateActions(t *testing.T) {
	base := func() *corev1.Node {
		n := ft.Node("n1", ft.Zone("a"))
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		return n
	}
	tests := []struct {
		name   string
		change func(*corev1.Node)
		want   framework.ActionType
	}{
		{name: "a heartbeat alone changes nothing the scheduler cares about", change: func(n *corev1.Node) {
			n.Status.Conditions[0].LastHeartbeatTime = metav1.Now()
			n.ResourceVersion = "2"
		}, want: 0},
		{name: "cordoning is a taint change", change: func(n *corev1.Node) { n.Spec.Unschedulable = true }, want: framework.UpdateNodeTaint},
		{name: "a new taint is a taint change", change: func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
		}, want: framework.UpdateNodeTaint},
		{name: "a relabel is a label change", change: func(n *corev1.Node) { n.Labels["x"] = "y" }, want: framework.UpdateNodeLabel},
		{name: "more allocatable is an allocatable change", change: func(n *corev1.Node) { n.Status.Allocatable = ft.List("cpu", "8", "pods", "110") }, want: framework.UpdateNodeAllocatable},
		{name: "Ready turning False is a condition change", change: func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }, want: framework.UpdateNodeCondition},
		{name: "several changes are reported together", change: func(n *corev1.Node) {
			n.Labels["x"] = "y"
			n.Spec.Unschedulable = true
		}, want: framework.UpdateNodeLabel | framework.UpdateNodeTaint},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, cur := base(), base()
			tt.change(cur)
			if got := framework.NodeUpdateActions(old, cur); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAssignedPodUpdateActions(t *testing.T) {
	old := ft.Pod("p", ft.Container("cpu", "1"), ft.Labels("app", "web"))
	if got := framework.AssignedPodUpdateActions(old, ft.Pod("p", ft.Container("cpu", "500m"), ft.Labels("app", "web"))); got != framework.UpdatePodScaleDown {
		t.Errorf("lower cpu request gave %v, want UpdatePodScaleDown", got)
	}
	if got := framework.AssignedPodUpdateActions(old, ft.Pod("p", ft.Container("cpu", "1"), ft.Labels("app", "db"))); got != framework.UpdatePodLabel {
		t.Errorf("relabel gave %v, want UpdatePodLabel", got)
	}
	if got := framework.AssignedPodUpdateActions(old, ft.Pod("p", ft.Container("cpu", "2"), ft.Labels("app", "web"))); got != 0 {
		t.Errorf("higher request gave %v, want nothing", got)
	}
}

func TestClusterEventMatch(t *testing.T) {
	nodeAddOrTaint := framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeTaint}
	tests := []struct {
		name  string
		event framework.ClusterEvent
		want  bool
	}{
		{name: "a node add matches", event: framework.EventNodeAdd, want: true},
		{name: "a taint update matches", event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.UpdateNodeTaint}, want: true},
		{name: "a label update does not", event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.UpdateNodeLabel}, want: false},
		{name: "a pod add does not", event: framework.EventAssignedPodAdd, want: false},
		{name: "the unschedulable timeout matches everything", event: framework.EventUnschedulableTimeout, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nodeAddOrTaint.Match(tt.event); got != tt.want {
				t.Errorf("Match(%v) = %v, want %v", tt.event, got, tt.want)
			}
		})
	}
}
