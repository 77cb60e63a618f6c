package printers

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeStatus(t *testing.T) {
	ready := func(s corev1.ConditionStatus) corev1.NodeCondition {
		return corev1.NodeCondition{Type: corev1.NodeReady, Status: s}
	}
	tests := []struct {
		name          string
		conditions    []corev1.NodeCondition
		unschedulable bool
		want          string
	}{
		{"a ready node shows Ready", []corev1.NodeCondition{ready(corev1.ConditionTrue)}, false, "Ready"},
		{"a cordoned ready node shows Ready,SchedulingDisabled", []corev1.NodeCondition{ready(corev1.ConditionTrue)}, true, "Ready,SchedulingDisabled"},
		{"a node whose Ready condition is False is NotReady", []corev1.NodeCondition{ready(corev1.ConditionFalse)}, false, "NotReady"},
		{"a node whose kubelet stopped reporting (Ready Unknown) is NotReady, as kubectl shows it", []corev1.NodeCondition{ready(corev1.ConditionUnknown)}, false, "NotReady"},
		{"a node without a Ready condition is Unknown", []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}}, false, "Unknown"},
		{"a cordoned node without conditions is Unknown,SchedulingDisabled", nil, true, "Unknown,SchedulingDisabled"},
		{"other conditions do not change the status", []corev1.NodeCondition{{Type: corev1.NodeDiskPressure, Status: corev1.ConditionTrue}, ready(corev1.ConditionTrue)}, false, "Ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: tt.unschedulable}, Status: corev1.NodeStatus{Conditions: tt.conditions}}
			if got := cell(t, Nodes(), node, "Status"); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNodeRoles(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{"a node without role labels has <none>", map[string]string{"zone": "a"}, "<none>"},
		{"a node-role label names the role by its key", map[string]string{"node-role.kubernetes.io/control-plane": ""}, "control-plane"},
		{"the kubernetes.io/role label names the role by its value", map[string]string{"kubernetes.io/role": "master"}, "master"},
		{"roles are sorted, joined with commas and not repeated", map[string]string{
			"node-role.kubernetes.io/worker":        "",
			"node-role.kubernetes.io/control-plane": "true",
			"kubernetes.io/role":                    "worker",
		}, "control-plane,worker"},
		{"empty role names are ignored", map[string]string{"node-role.kubernetes.io/": "", "kubernetes.io/role": ""}, "<none>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: tt.labels}}
			if got := cell(t, Nodes(), node, "Roles"); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNodeCells(t *testing.T) {
	tests := []struct {
		name string
		node *corev1.Node
		want []interface{}
	}{
		{
			name: "a fully reported node fills every column",
			node: &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: ago(3 * 24 * time.Hour), Labels: map[string]string{"node-role.kubernetes.io/worker": ""}},
				Status: corev1.NodeStatus{
					Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
					Addresses: []corev1.NodeAddress{
						{Type: corev1.NodeHostName, Address: "n1"},
						{Type: corev1.NodeInternalIP, Address: "10.0.0.1"},
						{Type: corev1.NodeInternalIP, Address: "10.0.0.2"},
						{Type: corev1.NodeExternalIP, Address: "203.0.113.1"},
					},
					NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.33.0", OSImage: "Ubuntu 24.04", KernelVersion: "6.8.0", ContainerRuntimeVersion: "containerd://2.0.0"},
				},
			},
			want: []interface{}{"n1", "Ready", "worker", "3d", "v1.33.0", "10.0.0.1", "203.0.113.1", "Ubuntu 24.04", "6.8.0", "containerd://2.0.0"},
		},
		{
			name: "a bare node shows <none> and <unknown> placeholders",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bare"}},
			want: []interface{}{"bare", "Unknown", "<none>", "<unknown>", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Nodes().Cells(tt.node, now)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}
