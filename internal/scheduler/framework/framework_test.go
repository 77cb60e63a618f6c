package framework_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
	ft "github.com/nodeplane/nodeplane/internal/scheduler/framework/frameworktest"
)

// fakePlugin rejects and scores nodes from tables keyed by node name.
type fakePlugin struct {
	name      string
	preFilter func() (*framework.PreFilterResult, *framework.Status)
	reject    map[string]*framework.Status
	preScore  *framework.Status
	scores    map[string]int64
	normalize bool
	filtered  []string
}

func (p *fakePlugin) Name() string { return p.name }

func (p *fakePlugin) PreFilter(context.Context, *framework.CycleState, *corev1.Pod, []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	if p.preFilter == nil {
		return nil, nil
	}
	return p.preFilter()
}

func (p *fakePlugin) Filter(_ context.Context, _ *framework.CycleState, _ *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	p.filtered = append(p.filtered, ni.Name())
	return p.reject[ni.Name()]
}

func (p *fakePlugin) PreScore(context.Context, *framework.CycleState, *corev1.Pod, []*framework.NodeInfo, []*framework.NodeInfo) *framework.Status {
	return p.preScore
}

func (p *fakePlugin) Score(_ context.Context, _ *framework.CycleState, _ *corev1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	return p.scores[ni.Name()], nil
}

// normalizingPlugin scales its raw scores with DefaultNormalizeScore.
type normalizingPlugin struct{ *fakePlugin }

func (p normalizingPlugin) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *corev1.Pod, s framework.NodeScoreList) *framework.Status {
	framework.DefaultNormalizeScore(framework.MaxNodeScore, false, s)
	return nil
}

func nodes(names ...string) []*framework.NodeInfo {
	out := make([]*framework.NodeInfo, len(names))
	for i, n := range names {
		out[i] = ft.NodeInfo(ft.Node(n))
	}
	return out
}

func numberedNodes(n int) []*framework.NodeInfo {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("n%04d", i)
	}
	return nodes(names...)
}

func newFramework(t *testing.T, seed uint64, plugins ...framework.WeightedPlugin) *framework.Framework {
	t.Helper()
	f, err := framework.New(framework.Config{Plugins: plugins, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func unschedulable(reasons ...string) *framework.Status {
	return framework.NewStatus(framework.Unschedulable, reasons...)
}

func unresolvable(reasons ...string) *framework.Status {
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, reasons...)
}

func TestScheduleAggregatesReasonsIntoTheUpstreamMessage(t *testing.T) {
	first := &fakePlugin{name: "First", reject: map[string]*framework.Status{
		"n1": unresolvable("node(s) were unschedulable"),
		"n2": unresolvable("node(s) were unschedulable"),
		"n3": unresolvable("node(s) had untolerated taint(s)"),
	}}
	second := &fakePlugin{name: "Second", reject: map[string]*framework.Status{
		"n1": unschedulable("Insufficient cpu"), // hidden: First rejects n1 already
		"n4": unschedulable("Insufficient cpu", "Insufficient memory"),
		"n5": unschedulable("Insufficient cpu"),
	}}
	f := newFramework(t, 0, framework.WeightedPlugin{Plugin: first}, framework.WeightedPlugin{Plugin: second})
	pod := ft.Pod("p")
	_, err := f.Schedule(context.Background(), pod, nodes("n1", "n2", "n3", "n4", "n5"))
	var fe *framework.FitError
	if !errors.As(err, &fe) {
		t.Fatalf("Schedule error %v, want a FitError", err)
	}
	want := "0/5 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint(s), 2 Insufficient cpu, " +
		"2 node(s) were unschedulable. preemption: 0/5 nodes are available: 2 No preemption victims found for incoming pod, " +
		"3 Preemption is not helpful for scheduling."
	if got := fe.Error(); got != want {
		t.Errorf("message\n got: %s\nwant: %s", got, want)
	}
	if got, want := fe.Diagnosis.UnschedulablePlugins, sets.New("First", "Second"); !got.Equal(want) {
		t.Errorf("unschedulable plugins %v, want %v", sets.List(got), sets.List(want))
	}
	if got := fe.Diagnosis.NodeToStatus["n4"].Plugin(); got != "Second" {
		t.Errorf("n4's status attributed to %q, want Second", got)
	}
}

func TestFitErrorMessage(t *testing.T) {
	never := corev1.PreemptNever
	tests := []struct {
		name string
		pod  *corev1.Pod
		fe   framework.FitError
		want string
	}{
		{
			name: "counts sort as strings, so 10 comes before 9",
			fe: framework.FitError{NumAllNodes: 19, Diagnosis: framework.Diagnosis{NodeToStatus: statuses(
				10, unresolvable("node(s) didn't match Pod's node affinity/selector"), 9, unschedulable("Too many pods"))}},
			want: "0/19 nodes are available: 10 node(s) didn't match Pod's node affinity/selector, 9 Too many pods.",
		},
		{
			name: "a prefilter rejection prints its message instead of a histogram",
			fe: framework.FitError{NumAllNodes: 3, Diagnosis: framework.Diagnosis{
				NodeToStatus: map[string]*framework.Status{}, AbsentNodesStatus: unresolvable("pod affinity terms conflict"),
				PreFilterMsg: "pod affinity terms conflict",
			}},
			want: "0/3 nodes are available: pod affinity terms conflict.",
		},
		{
			name: "nodes a prefilter excluded count with the absent status",
			fe: framework.FitError{NumAllNodes: 4, Diagnosis: framework.Diagnosis{
				NodeToStatus:      statuses(1, unresolvable("node(s) had untolerated taint(s)")),
				AbsentNodesStatus: unresolvable("node(s) didn't satisfy plugin(s) [NodeAffinity]"),
			}},
			want: "0/4 nodes are available: 1 node(s) had untolerated taint(s), 3 node(s) didn't satisfy plugin(s) [NodeAffinity].",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.fe.Error(); got != tt.want {
				t.Errorf("\n got: %s\nwant: %s", got, tt.want)
			}
		})
	}

	t.Run("a pod that may not preempt says so instead of counting nodes", func(t *testing.T) {
		f := newFramework(t, 0, framework.WeightedPlugin{Plugin: &fakePlugin{name: "Fit", reject: map[string]*framework.Status{"n1": unschedulable("Insufficient cpu")}}})
		pod := ft.Pod("p")
		pod.Spec.PreemptionPolicy = &never
		_, err := f.Schedule(context.Background(), pod, nodes("n1"))
		want := "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never."
		if err == nil || err.Error() != want {
			t.Errorf("\n got: %v\nwant: %s", err, want)
		}
	})
}

// statuses builds a NodeToStatus of count nodes per status.
func statuses(spec ...any) map[string]*framework.Status {
	m := map[string]*framework.Status{}
	for i := 0; i+1 < len(spec); i += 2 {
		for j := 0; j < spec[i].(int); j++ {
			m[fmt.Sprintf("n%d-%d", i, j)] = spec[i+1].(*framework.Status)
		}
	}
	return m
}

func TestSchedulePicksTheBestWeightedScore(t *testing.T) {
	// a: 10·1 + 100·2 = 210; b: 90·1 + 50·2 = 190; c: 100·1 + 0·2 = 100.
	light := &fakePlugin{name: "Light", scores: map[string]int64{"a": 10, "b": 90, "c": 100}}
	heavy := &fakePlugin{name: "Heavy", scores: map[string]int64{"a": 100, "b": 50, "c": 0}}
	f := newFramework(t, 0, framework.WeightedPlugin{Plugin: light, Weight: 1}, framework.WeightedPlugin{Plugin: heavy, Weight: 2})
	res, err := f.Schedule(context.Background(), ft.Pod("p"), nodes("a", "b", "c"))
	if err != nil {
		t.Fatal(err)
	}
	if res.NodeName != "a" || res.FeasibleNodes != 3 || res.EvaluatedNodes != 3 {
		t.Errorf("result %+v, want node a with 3 feasible of 3 evaluated", res)
	}

	// The same plugins with the weights swapped prefer b: 10·2+100 = 120,
	// 90·2+50 = 230, 100·2 = 200.
	f = newFramework(t, 0, framework.WeightedPlugin{Plugin: light, Weight: 2}, framework.WeightedPlugin{Plugin: heavy, Weight: 1})
	if res, _ := f.Schedule(context.Background(), ft.Pod("p"), nodes("a", "b", "c")); res.NodeName != "b" {
		t.Errorf("with weights swapped chose %q, want b", res.NodeName)
	}
}

func TestScheduleNormalizesScores(t *testing.T) {
	// Raw 1000 and 500 would fail the range check without normalisation.
	p := normalizingPlugin{&fakePlugin{name: "Norm", scores: map[string]int64{"a": 500, "b": 1000}}}
	f := newFramework(t, 0, framework.WeightedPlugin{Plugin: p})
	res, err := f.Schedule(context.Background(), ft.Pod("p"), nodes("a", "b"))
	if err != nil || res.NodeName != "b" {
		t.Errorf("got %+v, %v; want node b", res, err)
	}

	raw := &fakePlugin{name: "Raw", scores: map[string]int64{"a": 500, "b": 1000}}
	f = newFramework(t, 0, framework.WeightedPlugin{Plugin: raw})
	if _, err := f.Schedule(context.Background(), ft.Pod("p"), nodes("a", "b")); err == nil || !strings.Contains(err.Error(), "outside [0, 100]") {
		t.Errorf("a score of 1000 without normalisation gave %v, want an out-of-range error", err)
	}
}

func TestScheduleBreaksTiesWithTheSeededSource(t *testing.T) {
	pick := func(seed uint64, cycles int) []string {
		f := newFramework(t, seed, framework.WeightedPlugin{Plugin: &fakePlugin{name: "Flat"}})
		var out []string
		for range cycles {
			res, err := f.Schedule(context.Background(), ft.Pod("p"), nodes("a", "b", "c", "d"))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, res.NodeName)
		}
		return out
	}
	first, again := pick(7, 200), pick(7, 200)
	if strings.Join(first, ",") != strings.Join(again, ",") {
		t.Error("the same seed chose differently")
	}
	seen := sets.New(first...)
	if seen.Len() != 4 {
		t.Errorf("200 tied cycles chose only %v, want all four nodes", sets.List(seen))
	}
	if other := pick(8, 200); strings.Join(first, ",") == strings.Join(other, ",") {
		t.Error("seeds 7 and 8 chose the same 200 nodes")
	}
}

func TestScheduleSkips(t *testing.T) {
	skipper := &fakePlugin{
		name: "Skipper",
		preFilter: func() (*framework.PreFilterResult, *framework.Status) {
			return nil, framework.NewStatus(framework.Skip)
		},
		reject:   map[string]*framework.Status{"a": unresolvable("never asked")},
		preScore: framework.NewStatus(framework.Skip),
		scores:   map[string]int64{"a": 100},
	}
	other := &fakePlugin{name: "Other", scores: map[string]int64{"b": 1}}
	f := newFramework(t, 0, framework.WeightedPlugin{Plugin: skipper}, framework.WeightedPlugin{Plugin: other})
	res, err := f.Schedule(context.Background(), ft.Pod("p"), nodes("a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	if len(skipper.filtered) != 0 {
		t.Errorf("a plugin whose PreFilter skipped was asked to filter %v", skipper.filtered)
	}
	if res.NodeName != "b" {
		t.Errorf("chose %q, want b: the skipped score (a=100) must not count", res.NodeName)
	}
}

func TestSchedulePreFilterResultNarrowsTheNodes(t *testing.T) {
	narrow := &fakePlugin{name: "Narrow", preFilter: func() (*framework.PreFilterResult, *framework.Status) {
		return &framework.PreFilterResult{NodeNames: sets.New("b")}, nil
	}, reject: map[string]*framework.Status{"b": unschedulable("Insufficient cpu")}}
	f := newFramework(t, 0, framework.WeightedPlugin{Plugin: narrow})
	_, err := f.Schedule(context.Background(), ft.Pod("p"), nodes("a", "b", "c"))
	want := "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [Narrow]. " +
		"preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."
	if err == nil || err.Error() != want {
		t.Errorf("\n got: %v\nwant: %s", err, want)
	}
	if strings.Join(narrow.filtered, ",") != "b" {
		t.Errorf("filtered %v, want only b", narrow.filtered)
	}

	elsewhere := &fakePlugin{name: "Elsewhere", preFilter: func() (*framework.PreFilterResult, *framework.Status) {
		return &framework.PreFilterResult{NodeNames: sets.New("gone")}, nil
	}}
	f = newFramework(t, 0, framework.WeightedPlugin{Plugin: elsewhere})
	_, err = f.Schedule(context.Background(), ft.Pod("p"), nodes("a", "b"))
	want = "0/2 nodes are available: 2 node(s) didn't satisfy plugin(s) [Elsewhere]. " +
		"preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
	if err == nil || err.Error() != want {
		t.Errorf("narrowed to a node not in the snapshot:\n got: %v\nwant: %s", err, want)
	}

	empty := &fakePlugin{name: "Empty", preFilter: func() (*framework.PreFilterResult, *framework.Status) {
		return &framework.PreFilterResult{NodeNames: sets.New[string]()}, nil
	}}
	f = newFramework(t, 0, framework.WeightedPlugin{Plugin: empty})
	_, err = f.Schedule(context.Background(), ft.Pod("p"), nodes("a"))
	want = "0/1 nodes are available: node(s) didn't satisfy plugin Empty. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
	if err == nil || err.Error() != want {
		t.Errorf("\n got: %v\nwant: %s", err, want)
	}
}

func TestScheduleErrors(t *testing.T) {
	f := newFramework(t, 0)
	if _, err := f.Schedule(context.Background(), ft.Pod("p"), nil); !errors.Is(err, framework.ErrNoNodesAvailable) {
		t.Errorf("no nodes gave %v, want ErrNoNodesAvailable", err)
	}
	broken := &fakePlugin{name: "Broken", reject: map[string]*framework.Status{"b": framework.AsStatus(errors.New("boom"))}}
	f = newFramework(t, 0, framework.WeightedPlugin{Plugin: broken})
	_, err := f.Schedule(context.Background(), ft.Pod("p"), nodes("a", "b"))
	var fe *framework.FitError
	if err == nil || errors.As(err, &fe) || !strings.Contains(err.Error(), "boom") {
		t.Errorf("a filter error gave %v, want a plain error mentioning boom", err)
	}
	if _, err := framework.New(framework.Config{Plugins: []framework.WeightedPlugin{{Plugin: broken}, {Plugin: broken}}}); err == nil {
		t.Error("configuring a plugin twice was accepted")
	}
}

func TestScheduleFiltersOnlyEnoughNodesAndRotates(t *testing.T) {
	tests := []struct {
		name       string
		nodes      int
		percentage int32
		want       int
	}{
		{name: "fewer than 100 nodes are all filtered", nodes: 60, want: 60},
		{name: "at 1,000 nodes the adaptive share is 42%", nodes: 1000, want: 420},
		{name: "at 5,000 nodes the adaptive share is 10%", nodes: 5000, want: 500},
		{name: "at 10,000 nodes the adaptive share bottoms out at 5%", nodes: 10000, want: 500},
		{name: "a configured share still finds at least 100", nodes: 1000, percentage: 1, want: 100},
		{name: "100% filters every node", nodes: 1000, percentage: 100, want: 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := &fakePlugin{name: "Count"}
			f, err := framework.New(framework.Config{Plugins: []framework.WeightedPlugin{{Plugin: pl}}, PercentageOfNodesToScore: tt.percentage})
			if err != nil {
				t.Fatal(err)
			}
			all := numberedNodes(tt.nodes)
			res, err := f.Schedule(context.Background(), ft.Pod("p"), all)
			if err != nil {
				t.Fatal(err)
			}
			if res.EvaluatedNodes != tt.want || res.FeasibleNodes != tt.want {
				t.Errorf("evaluated %d, feasible %d; want %d", res.EvaluatedNodes, res.FeasibleNodes, tt.want)
			}
			pl.filtered = nil
			if _, err := f.Schedule(context.Background(), ft.Pod("p"), all); err != nil {
				t.Fatal(err)
			}
			if wantStart := all[tt.want%tt.nodes].Name(); pl.filtered[0] != wantStart {
				t.Errorf("second cycle started at %s, want %s", pl.filtered[0], wantStart)
			}
		})
	}
}

func TestScheduleWithOneFeasibleNodeSkipsScoring(t *testing.T) {
	pl := &fakePlugin{name: "One", reject: map[string]*framework.Status{"a": unschedulable("Insufficient cpu")},
		preScore: framework.AsStatus(errors.New("scoring must not run"))}
	f := newFramework(t, 0, framework.WeightedPlugin{Plugin: pl})
	res, err := f.Schedule(context.Background(), ft.Pod("p"), nodes("a", "b"))
	if err != nil || res.NodeName != "b" {
		t.Errorf("got %+v, %v; want node b without scoring", res, err)
	}
}

func TestEventsToRegister(t *testing.T) {
	f := newFramework(t, 0, framework.WeightedPlugin{Plugin: &fakePlugin{name: "NoEvents"}})
	if got := f.EventsToRegister(); len(got) != 0 {
		t.Errorf("a plugin without EnqueueExtensions registered %v", got)
	}
}
