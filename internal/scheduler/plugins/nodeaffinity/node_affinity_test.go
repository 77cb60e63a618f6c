package nodeaffinity_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
	ft "github.com/nodeplane/nodeplane/internal/scheduler/framework/frameworktest"
	"github.com/nodeplane/nodeplane/internal/scheduler/plugins/nodeaffinity"
)

func expr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

// required gives the pod one required term per argument.
func required(terms ...corev1.NodeSelectorTerm) ft.PodOption {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
		}}
	}
}

func labelsTerm(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: reqs}
}

func fieldsTerm(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchFields: reqs}
}

func TestFilter(t *testing.T) {
	// The node: n1 in zone a, disk ssd, 8 cores (label), no "gpu" label.
	node := ft.Node("n1", ft.Zone("a"), ft.NodeLabels("disk", "ssd", "cores", "8"))
	zone := corev1.LabelTopologyZone
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{name: "a matching nodeSelector fits", pod: ft.Pod("p", ft.NodeSelector("disk", "ssd")), want: true},
		{name: "a nodeSelector with another value does not", pod: ft.Pod("p", ft.NodeSelector("disk", "hdd")), want: false},
		{name: "a nodeSelector on a missing label does not", pod: ft.Pod("p", ft.NodeSelector("gpu", "")), want: false},
		{name: "In with the node's value fits", pod: ft.Pod("p", required(labelsTerm(expr(zone, corev1.NodeSelectorOpIn, "b", "a")))), want: true},
		{name: "In without it does not", pod: ft.Pod("p", required(labelsTerm(expr(zone, corev1.NodeSelectorOpIn, "b", "c")))), want: false},
		{name: "NotIn with other values fits", pod: ft.Pod("p", required(labelsTerm(expr(zone, corev1.NodeSelectorOpNotIn, "b")))), want: true},
		{name: "NotIn on a missing label fits", pod: ft.Pod("p", required(labelsTerm(expr("gpu", corev1.NodeSelectorOpNotIn, "x")))), want: true},
		{name: "NotIn with the node's value does not", pod: ft.Pod("p", required(labelsTerm(expr(zone, corev1.NodeSelectorOpNotIn, "a")))), want: false},
		{name: "Exists on a present label fits", pod: ft.Pod("p", required(labelsTerm(expr("disk", corev1.NodeSelectorOpExists)))), want: true},
		{name: "Exists on a missing label does not", pod: ft.Pod("p", required(labelsTerm(expr("gpu", corev1.NodeSelectorOpExists)))), want: false},
		{name: "DoesNotExist on a missing label fits", pod: ft.Pod("p", required(labelsTerm(expr("gpu", corev1.NodeSelectorOpDoesNotExist)))), want: true},
		{name: "DoesNotExist on a present label does not", pod: ft.Pod("p", required(labelsTerm(expr("disk", corev1.NodeSelectorOpDoesNotExist)))), want: false},
		{name: "Gt below the node's number fits", pod: ft.Pod("p", required(labelsTerm(expr("cores", corev1.NodeSelectorOpGt, "4")))), want: true},
		{name: "Gt equal to it does not", pod: ft.Pod("p", required(labelsTerm(expr("cores", corev1.NodeSelectorOpGt, "8")))), want: false},
		{name: "Lt above the node's number fits", pod: ft.Pod("p", required(labelsTerm(expr("cores", corev1.NodeSelectorOpLt, "16")))), want: true},
		{name: "Lt on a non-numeric label does not", pod: ft.Pod("p", required(labelsTerm(expr("disk", corev1.NodeSelectorOpLt, "16")))), want: false},
		{name: "Gt with a non-numeric value matches nothing", pod: ft.Pod("p", required(labelsTerm(expr("cores", corev1.NodeSelectorOpGt, "many")))), want: false},
		{
			name: "expressions of one term are ANDed",
			pod:  ft.Pod("p", required(labelsTerm(expr(zone, corev1.NodeSelectorOpIn, "a"), expr("disk", corev1.NodeSelectorOpIn, "hdd")))),
			want: false,
		},
		{
			name: "terms are ORed",
			pod: ft.Pod("p", required(labelsTerm(expr("disk", corev1.NodeSelectorOpIn, "hdd")),
				labelsTerm(expr(zone, corev1.NodeSelectorOpIn, "a")))),
			want: true,
		},
		{name: "an empty term matches nothing", pod: ft.Pod("p", required(corev1.NodeSelectorTerm{})), want: false},
		{
			name: "an invalid term is ignored, the valid one still matches",
			pod: ft.Pod("p", required(labelsTerm(expr("disk", "Near", "ssd")),
				labelsTerm(expr("disk", corev1.NodeSelectorOpExists)))),
			want: true,
		},
		{name: "matchFields metadata.name In the node fits", pod: ft.Pod("p", required(fieldsTerm(expr("metadata.name", corev1.NodeSelectorOpIn, "n1")))), want: true},
		{name: "matchFields metadata.name In another node does not", pod: ft.Pod("p", required(fieldsTerm(expr("metadata.name", corev1.NodeSelectorOpIn, "n2")))), want: false},
		{name: "matchFields metadata.name NotIn the node does not", pod: ft.Pod("p", required(fieldsTerm(expr("metadata.name", corev1.NodeSelectorOpNotIn, "n1")))), want: false},
		{name: "matchFields on another field matches nothing", pod: ft.Pod("p", required(fieldsTerm(expr("spec.podCIDR", corev1.NodeSelectorOpIn, "n1")))), want: false},
		{
			name: "nodeSelector and affinity must both hold",
			pod:  ft.Pod("p", ft.NodeSelector("disk", "hdd"), required(labelsTerm(expr(zone, corev1.NodeSelectorOpIn, "a")))),
			want: false,
		},
	}
	p := nodeaffinity.New()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, state := context.Background(), framework.NewCycleState()
			ni := ft.NodeInfo(node)
			if _, st := p.PreFilter(ctx, state, tt.pod, []*framework.NodeInfo{ni}); !st.IsSuccess() && !st.IsRejected() {
				t.Fatalf("PreFilter: %v", st)
			}
			st := p.Filter(ctx, state, tt.pod, ni)
			if st.IsSuccess() != tt.want {
				t.Fatalf("fits = %v (%v), want %v", st.IsSuccess(), st, tt.want)
			}
			if !tt.want && (st.Code() != framework.UnschedulableAndUnresolvable || st.Message() != "node(s) didn't match Pod's node affinity/selector") {
				t.Errorf("rejection %v, want UnschedulableAndUnresolvable with the upstream reason", st)
			}
		})
	}
}

func TestPreFilter(t *testing.T) {
	nodes := []*framework.NodeInfo{ft.NodeInfo(ft.Node("n1")), ft.NodeInfo(ft.Node("n2"))}
	tests := []struct {
		name      string
		pod       *corev1.Pod
		wantCode  framework.Code
		wantNames sets.Set[string]
	}{
		{name: "a pod without rules skips the filter", pod: ft.Pod("p"), wantCode: framework.Skip},
		{name: "a nodeSelector alone keeps every node", pod: ft.Pod("p", ft.NodeSelector("a", "b")), wantCode: framework.Success},
		{
			name:     "terms that all pin names narrow to their union",
			pod:      ft.Pod("p", required(fieldsTerm(expr("metadata.name", corev1.NodeSelectorOpIn, "n1")), fieldsTerm(expr("metadata.name", corev1.NodeSelectorOpIn, "n2", "n3")))),
			wantCode: framework.Success, wantNames: sets.New("n1", "n2", "n3"),
		},
		{
			name: "one term without names keeps every node",
			pod: ft.Pod("p", required(fieldsTerm(expr("metadata.name", corev1.NodeSelectorOpIn, "n1")),
				labelsTerm(expr("x", corev1.NodeSelectorOpExists)))),
			wantCode: framework.Success,
		},
		{
			name: "names that contradict within a term conflict",
			pod: ft.Pod("p", required(fieldsTerm(expr("metadata.name", corev1.NodeSelectorOpIn, "n1"),
				expr("metadata.name", corev1.NodeSelectorOpIn, "n2")))),
			wantCode: framework.UnschedulableAndUnresolvable,
		},
	}
	p := nodeaffinity.New()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, st := p.PreFilter(context.Background(), framework.NewCycleState(), tt.pod, nodes)
			if st.Code() != tt.wantCode {
				t.Fatalf("code %v (%v), want %v", st.Code(), st, tt.wantCode)
			}
			if tt.wantCode == framework.UnschedulableAndUnresolvable && st.Message() != "pod affinity terms conflict" {
				t.Errorf("reason %q", st.Message())
			}
			if tt.wantNames == nil && !res.AllNodes() {
				t.Errorf("narrowed to %v, want all nodes", sets.List(res.NodeNames))
			}
			if tt.wantNames != nil && (res.AllNodes() || !res.NodeNames.Equal(tt.wantNames)) {
				t.Errorf("narrowed to %v, want %v", res, sets.List(tt.wantNames))
			}
		})
	}
}

func TestScorePreferredTerms(t *testing.T) {
	pod := ft.Pod("p", func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
				{Weight: 80, Preference: labelsTerm(expr("disk", corev1.NodeSelectorOpIn, "ssd"))},
				{Weight: 20, Preference: labelsTerm(expr(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "a"))},
			},
		}}
	})
	nodes := []*framework.NodeInfo{
		ft.NodeInfo(ft.Node("both", ft.Zone("a"), ft.NodeLabels("disk", "ssd"))),
		ft.NodeInfo(ft.Node("ssd", ft.Zone("b"), ft.NodeLabels("disk", "ssd"))),
		ft.NodeInfo(ft.Node("zone", ft.Zone("a"))),
		ft.NodeInfo(ft.Node("none", ft.Zone("b"))),
	}
	want := map[string]int64{"both": 100, "ssd": 80, "zone": 20, "none": 0}
	p := nodeaffinity.New()
	ctx, state := context.Background(), framework.NewCycleState()
	if st := p.PreScore(ctx, state, pod, nodes, nodes); !st.IsSuccess() {
		t.Fatal(st)
	}
	scores := make(framework.NodeScoreList, len(nodes))
	for i, ni := range nodes {
		s, _ := p.Score(ctx, state, pod, ni)
		scores[i] = framework.NodeScore{Name: ni.Name(), Score: s}
	}
	p.NormalizeScore(ctx, state, pod, scores)
	for _, s := range scores {
		if s.Score != want[s.Name] {
			t.Errorf("%s scored %d, want %d", s.Name, s.Score, want[s.Name])
		}
	}
	if st := p.PreScore(ctx, framework.NewCycleState(), ft.Pod("plain"), nodes, nodes); !st.IsSkip() {
		t.Errorf("a pod without preferences: PreScore %v, want Skip", st)
	}
}
