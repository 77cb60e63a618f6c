package podtopologyspread_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
	ft "github.com/nodeplane/nodeplane/internal/scheduler/framework/frameworktest"
	"github.com/nodeplane/nodeplane/internal/scheduler/plugins/podtopologyspread"
)

const zone = corev1.LabelTopologyZone

func newPlugin(t *testing.T, cfg podtopologyspread.Config) *podtopologyspread.Plugin {
	t.Helper()
	p, err := podtopologyspread.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func web(name string, opts ...ft.PodOption) *corev1.Pod {
	return ft.Pod(name, append([]ft.PodOption{ft.Labels("app", "web")}, opts...)...)
}

// cluster builds nodes a1, b1, c1 (zones a, b, c) and places the given
// number of web pods on each.
func cluster(perNode map[string]int, extra ...*corev1.Node) []*framework.NodeInfo {
	var out []*framework.NodeInfo
	for _, name := range []string{"a1", "b1", "c1"} {
		node := ft.Node(name, ft.Zone(name[:1]))
		var pods []*corev1.Pod
		for i := range perNode[name] {
			pods = append(pods, web(name+"-"+string(rune('0'+i)), ft.OnNode(name)))
		}
		out = append(out, ft.NodeInfo(node, pods...))
	}
	for _, n := range extra {
		out = append(out, ft.NodeInfo(n))
	}
	return out
}

func filterAll(t *testing.T, p *podtopologyspread.Plugin, pod *corev1.Pod, nodes []*framework.NodeInfo) (map[string]*framework.Status, *framework.Status) {
	t.Helper()
	ctx, state := context.Background(), framework.NewCycleState()
	if _, st := p.PreFilter(ctx, state, pod, nodes); !st.IsSuccess() {
		return nil, st
	}
	out := map[string]*framework.Status{}
	for _, ni := range nodes {
		out[ni.Name()] = p.Filter(ctx, state, pod, ni)
	}
	return out, nil
}

func TestFilterDoNotSchedule(t *testing.T) {
	hard := func(maxSkew int32, opts ...func(*corev1.TopologySpreadConstraint)) ft.PodOption {
		return func(p *corev1.Pod) {
			c := corev1.TopologySpreadConstraint{MaxSkew: maxSkew, TopologyKey: zone, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
			for _, o := range opts {
				o(&c)
			}
			p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, c)
		}
	}
	honorTaints := corev1.NodeInclusionPolicyHonor
	tests := []struct {
		name    string
		pod     *corev1.Pod
		perNode map[string]int
		extra   []*corev1.Node
		want    map[string]framework.Code
	}{
		{
			name: "only the emptiest zone keeps the skew within 1", pod: web("p", hard(1)), perNode: map[string]int{"a1": 2, "b1": 1},
			want: map[string]framework.Code{"a1": framework.Unschedulable, "b1": framework.Unschedulable, "c1": framework.Success},
		},
		{
			name: "a maxSkew of 2 admits the zone one above the minimum", pod: web("p", hard(2)), perNode: map[string]int{"a1": 2, "b1": 1},
			want: map[string]framework.Code{"a1": framework.Unschedulable, "b1": framework.Success, "c1": framework.Success},
		},
		{
			name: "a pod its own selector does not match adds no skew", pod: ft.Pod("p", ft.Labels("app", "db"), hard(1)), perNode: map[string]int{"a1": 1},
			want: map[string]framework.Code{"a1": framework.Success, "b1": framework.Success, "c1": framework.Success},
		},
		{
			name: "a node without the zone label is refused for good", pod: web("p", hard(1)),
			extra: []*corev1.Node{ft.Node("nolabel")},
			want:  map[string]framework.Code{"a1": framework.Success, "nolabel": framework.UnschedulableAndUnresolvable},
		},
		{
			name:    "with fewer zones than minDomains the minimum counts as 0",
			pod:     web("p", hard(1, func(c *corev1.TopologySpreadConstraint) { v := int32(4); c.MinDomains = &v })),
			perNode: map[string]int{"a1": 1, "b1": 1, "c1": 1},
			want:    map[string]framework.Code{"a1": framework.Unschedulable, "b1": framework.Unschedulable, "c1": framework.Unschedulable},
		},
		{
			name: "zones the pod's node selector excludes do not set the minimum",
			pod:  web("p", hard(1), ft.NodeSelector(corev1.LabelHostname, "a1")), perNode: map[string]int{"a1": 1, "b1": 1},
			want: map[string]framework.Code{"a1": framework.Success},
		},
		{
			name:    "with nodeTaintsPolicy Honor a tainted zone does not set the minimum",
			pod:     web("p", hard(1, func(c *corev1.TopologySpreadConstraint) { c.NodeTaintsPolicy = &honorTaints })),
			perNode: map[string]int{"a1": 1, "b1": 1, "c1": 1},
			extra:   []*corev1.Node{ft.Node("d1", ft.Zone("d"), ft.Taints(corev1.Taint{Key: "k", Effect: corev1.TaintEffectNoSchedule}))},
			want:    map[string]framework.Code{"a1": framework.Success, "c1": framework.Success, "d1": framework.Success},
		},
		{
			name: "by default a tainted empty zone does set the minimum",
			pod:  web("p", hard(1)), perNode: map[string]int{"a1": 1, "b1": 1, "c1": 1},
			extra: []*corev1.Node{ft.Node("d1", ft.Zone("d"), ft.Taints(corev1.Taint{Key: "k", Effect: corev1.TaintEffectNoSchedule}))},
			want:  map[string]framework.Code{"a1": framework.Unschedulable, "d1": framework.Success},
		},
		{
			name: "matchLabelKeys narrows the selector to the pod's own value",
			pod: ft.Pod("p", ft.Labels("app", "web", "rev", "2"), hard(1, func(c *corev1.TopologySpreadConstraint) {
				c.MatchLabelKeys = []string{"rev"}
			})),
			perNode: map[string]int{"a1": 3}, // rev-less web pods: not counted
			want:    map[string]framework.Code{"a1": framework.Success, "b1": framework.Success},
		},
	}
	p := newPlugin(t, podtopologyspread.DefaultConfig())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, st := filterAll(t, p, tt.pod, cluster(tt.perNode, tt.extra...))
			if st != nil {
				t.Fatalf("PreFilter: %v", st)
			}
			for node, want := range tt.want {
				if got[node].Code() != want {
					t.Errorf("%s: %v, want %v", node, got[node], want)
				}
			}
		})
	}
}

func TestFilterReasons(t *testing.T) {
	p := newPlugin(t, podtopologyspread.DefaultConfig())
	pod := web("p", ft.Spread(zone, 1, corev1.DoNotSchedule, map[string]string{"app": "web"}))
	got, _ := filterAll(t, p, pod, cluster(map[string]int{"a1": 2}, ft.Node("nolabel")))
	if m := got["a1"].Message(); m != "node(s) didn't match pod topology spread constraints" {
		t.Errorf("skew reason %q", m)
	}
	if m := got["nolabel"].Message(); m != "node(s) didn't match pod topology spread constraints (missing required label)" {
		t.Errorf("missing label reason %q", m)
	}
}

func scores(t *testing.T, p *podtopologyspread.Plugin, pod *corev1.Pod, nodes []*framework.NodeInfo) (map[string]int64, *framework.Status) {
	t.Helper()
	ctx, state := context.Background(), framework.NewCycleState()
	if st := p.PreScore(ctx, state, pod, nodes, nodes); !st.IsSuccess() {
		return nil, st
	}
	list := make(framework.NodeScoreList, len(nodes))
	for i, ni := range nodes {
		s, st := p.Score(ctx, state, pod, ni)
		if !st.IsSuccess() {
			t.Fatal(st)
		}
		list[i] = framework.NodeScore{Name: ni.Name(), Score: s}
	}
	if st := p.NormalizeScore(ctx, state, pod, list); !st.IsSuccess() {
		t.Fatal(st)
	}
	out := map[string]int64{}
	for _, s := range list {
		out[s.Name] = s.Score
	}
	return out, nil
}

func TestScoreDefaultConstraints(t *testing.T) {
	p := newPlugin(t, podtopologyspread.DefaultConfig())
	replica := func(name string) *corev1.Pod { return web(name, ft.OwnedBy("ReplicaSet", "web-abc")) }
	place := func(perNode map[string]int) []*framework.NodeInfo {
		nodes := cluster(nil)
		for _, ni := range nodes {
			for i := range perNode[ni.Name()] {
				ni.AddPod(framework.NewPodInfo(replica(ni.Name() + string(rune('0'+i)))))
			}
		}
		return nodes
	}

	t.Run("a replica prefers the zones with fewer siblings", func(t *testing.T) {
		// Counts a1=1, b1=0, c1=0: raw scores (1·ln5+2)+(1·ln5+4) ≈ 9 and
		// 2+4 = 6; normalised 100·(9+6−9)/9 = 66 and 100·(9+6−6)/9 = 100.
		got, st := scores(t, p, replica("p"), place(map[string]int{"a1": 1}))
		if st != nil {
			t.Fatal(st)
		}
		want := map[string]int64{"a1": 66, "b1": 100, "c1": 100}
		for n, w := range want {
			if got[n] != w {
				t.Errorf("%s scored %d, want %d", n, got[n], w)
			}
		}
	})
	t.Run("a pod without a controller has no default constraints", func(t *testing.T) {
		if _, st := scores(t, p, web("p"), place(nil)); !st.IsSkip() {
			t.Errorf("PreScore %v, want Skip", st)
		}
	})
	t.Run("a pod owned by a Job is not spread by default", func(t *testing.T) {
		if _, st := scores(t, p, web("p", ft.OwnedBy("Job", "j")), place(nil)); !st.IsSkip() {
			t.Errorf("PreScore %v, want Skip", st)
		}
	})
	t.Run("an empty default list disables default spreading", func(t *testing.T) {
		off := newPlugin(t, podtopologyspread.Config{DefaultConstraints: []corev1.TopologySpreadConstraint{}})
		if _, st := scores(t, off, replica("p"), place(nil)); !st.IsSkip() {
			t.Errorf("PreScore %v, want Skip", st)
		}
	})
	t.Run("the default constraints never filter", func(t *testing.T) {
		if _, st := p.PreFilter(context.Background(), framework.NewCycleState(), replica("p"), place(map[string]int{"a1": 9})); !st.IsSkip() {
			t.Errorf("PreFilter %v, want Skip", st)
		}
	})
}

func TestScoreScheduleAnyway(t *testing.T) {
	p := newPlugin(t, podtopologyspread.DefaultConfig())
	pod := web("p", ft.Spread(zone, 1, corev1.ScheduleAnyway, map[string]string{"app": "web"}))
	nodes := cluster(map[string]int{"a1": 2, "b1": 1}, ft.Node("nolabel"))
	got, st := scores(t, p, pod, nodes)
	if st != nil {
		t.Fatal(st)
	}
	if !(got["c1"] > got["b1"] && got["b1"] > got["a1"]) {
		t.Errorf("scores %v: want c1 (0 pods) > b1 (1) > a1 (2)", got)
	}
	if got["nolabel"] != 0 {
		t.Errorf("a node missing the key scored %d, want 0 (ignored)", got["nolabel"])
	}
}

func TestOwnerSelector(t *testing.T) {
	sts := ft.Pod("db-0", ft.OwnedBy("StatefulSet", "db"),
		ft.Labels("app", "db", "statefulset.kubernetes.io/pod-name", "db-0", "apps.kubernetes.io/pod-index", "0"))
	sel := podtopologyspread.OwnerSelector(sts)
	if sel == nil {
		t.Fatal("a StatefulSet pod got no selector")
	}
	sibling := ft.Pod("db-1", ft.Labels("app", "db", "statefulset.kubernetes.io/pod-name", "db-1", "apps.kubernetes.io/pod-index", "1"))
	if !sel.Matches(labels.Set(sibling.Labels)) {
		t.Errorf("selector %v does not match a sibling with another pod name", sel)
	}
	if podtopologyspread.OwnerSelector(ft.Pod("bare", ft.Labels("app", "x"))) != nil {
		t.Error("a pod without a controller got a selector")
	}
}
