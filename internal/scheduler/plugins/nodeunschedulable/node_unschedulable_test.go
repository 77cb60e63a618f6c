package nodeunschedulable_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
	ft "github.com/nodeplane/nodeplane/internal/scheduler/framework/frameworktest"
	"github.com/nodeplane/nodeplane/internal/scheduler/plugins/nodeunschedulable"
)

func TestFilter(t *testing.T) {
	tests := []struct {
		name       string
		node       *corev1.Node
		tols       []corev1.Toleration
		wantCode   framework.Code
		wantReason string
	}{
		{name: "a schedulable node fits", node: ft.Node("n1"), wantCode: framework.Success},
		{
			name: "a cordoned node is refused for good", node: ft.Node("n1", ft.Cordoned()),
			wantCode: framework.UnschedulableAndUnresolvable, wantReason: "node(s) were unschedulable",
		},
		{
			name: "a pod tolerating the unschedulable taint may go to a cordoned node", node: ft.Node("n1", ft.Cordoned()),
			tols:     []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			wantCode: framework.Success,
		},
		{
			name: "an empty-key Exists toleration tolerates cordoning too", node: ft.Node("n1", ft.Cordoned()),
			tols:     []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			wantCode: framework.Success,
		},
		{
			name: "a NoExecute toleration of the key does not", node: ft.Node("n1", ft.Cordoned()),
			tols:     []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
			wantCode: framework.UnschedulableAndUnresolvable, wantReason: "node(s) were unschedulable",
		},
		{name: "an unknown node has unknown conditions", wantCode: framework.UnschedulableAndUnresolvable, wantReason: "node(s) had unknown conditions"},
	}
	p := nodeunschedulable.New()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := p.Filter(context.Background(), framework.NewCycleState(), ft.Pod("p", ft.Tolerations(tt.tols...)), framework.NewNodeInfo(tt.node))
			if st.Code() != tt.wantCode || st.Message() != tt.wantReason {
				t.Errorf("got %v %q, want %v %q", st.Code(), st.Message(), tt.wantCode, tt.wantReason)
			}
		})
	}
}
