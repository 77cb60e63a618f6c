package nodename_test

import (
	"context"
	"testing"

	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
	ft "github.com/nodeplane/nodeplane/internal/scheduler/framework/frameworktest"
	"github.com/nodeplane/nodeplane/internal/scheduler/plugins/nodename"
)

func TestFilter(t *testing.T) {
	tests := []struct {
		name     string
		nodeName string
		want     framework.Code
	}{
		{name: "a pod that names no node fits anywhere", want: framework.Success},
		{name: "a pod naming this node fits", nodeName: "n1", want: framework.Success},
		{name: "a pod naming another node is refused for good", nodeName: "n2", want: framework.UnschedulableAndUnresolvable},
	}
	p := nodename.New()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := p.Filter(context.Background(), framework.NewCycleState(), ft.Pod("p", ft.OnNode(tt.nodeName)), ft.NodeInfo(ft.Node("n1")))
			if st.Code() != tt.want {
				t.Fatalf("code %v, want %v", st.Code(), tt.want)
			}
			if tt.want != framework.Success && st.Message() != "node(s) didn't match the requested node name" {
				t.Errorf("reason %q", st.Message())
			}
		})
	}
}
