package framework

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// WeightedPlugin is a plugin with its score weight. The plugin takes part in
// every extension point it implements; Weight only matters for ScorePlugins
// (0 means 1).
type WeightedPlugin struct {
	Plugin Plugin
	Weight int64
}

// Config configures a Framework.
type Config struct {
	// Plugins in order. Filters run in this order and the first rejection
	// gives the node's reason, so the order shapes the FailedScheduling
	// message (upstream's order: NodeUnschedulable, NodeName,
	// TaintToleration, NodeAffinity, NodeResourcesFit, PodTopologySpread).
	Plugins []WeightedPlugin
	// PercentageOfNodesToScore bounds how many feasible nodes a cycle looks
	// for before it stops filtering, as a percentage of the nodes (at least
	// 100 nodes are always looked for). 0 is upstream's adaptive default:
	// 50% minus 1% per 125 nodes, never below 5% (10% = 500 nodes at 5,000).
	// 100 filters every node.
	PercentageOfNodesToScore int32
	// Seed seeds the source that breaks ties between equally scored nodes.
	Seed uint64
}

// DefaultConfig returns a config with no plugins, the adaptive percentage
// and seed 0.
func DefaultConfig() Config { return Config{} }

// Upstream's bounds for the number of feasible nodes a cycle looks for.
const (
	minFeasibleNodesToFind           = 100
	minFeasibleNodesPercentageToFind = 5
	basePercentageOfNodesToScore     = 50
)

// Result is the node chosen for a pod.
type Result struct {
	// NodeName is the chosen node.
	NodeName string
	// EvaluatedNodes counts the nodes filtered in this cycle.
	EvaluatedNodes int
	// FeasibleNodes counts the nodes that passed every filter.
	FeasibleNodes int
}

type scorePlugin struct {
	ScorePlugin
	name   string
	weight int64
}

type filterPlugin struct {
	FilterPlugin
	name string
}

// Framework runs scheduling cycles. It is not safe for concurrent use: one
// scheduling goroutine owns it (it keeps the rotating start index, the
// tie-break source and reusable buffers between cycles).
type Framework struct {
	plugins    []Plugin
	preFilter  []PreFilterPlugin
	filter     []filterPlugin
	preScore   []PreScorePlugin
	score      []scorePlugin
	percentage int32
	rng        *rand.Rand
	nextStart  int
	// filterIndex and scoreIndex find a plugin's position so a Skip from
	// its PreFilter/PreScore can be recorded without a map lookup per node.
	filterIndex map[string]int
	scoreIndex  map[string]int

	state      *CycleState
	feasible   []*NodeInfo
	totals     []int64
	scores     NodeScoreList
	skipFilter []bool
	skipScore  []bool
}

// New validates cfg and builds a Framework.
func New(cfg Config) (*Framework, error) {
	if cfg.PercentageOfNodesToScore < 0 || cfg.PercentageOfNodesToScore > 100 {
		return nil, fmt.Errorf("percentageOfNodesToScore %d: must be within [0, 100]", cfg.PercentageOfNodesToScore)
	}
	f := &Framework{
		percentage:  cfg.PercentageOfNodesToScore,
		rng:         rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		state:       NewCycleState(),
		filterIndex: make(map[string]int),
		scoreIndex:  make(map[string]int),
	}
	seen := make(map[string]bool, len(cfg.Plugins))
	for _, wp := range cfg.Plugins {
		if wp.Plugin == nil {
			return nil, errors.New("nil plugin")
		}
		name := wp.Plugin.Name()
		if seen[name] {
			return nil, fmt.Errorf("plugin %q configured twice", name)
		}
		seen[name] = true
		if wp.Weight < 0 {
			return nil, fmt.Errorf("plugin %q: negative weight %d", name, wp.Weight)
		}
		f.plugins = append(f.plugins, wp.Plugin)
		if p, ok := wp.Plugin.(PreFilterPlugin); ok {
			f.preFilter = append(f.preFilter, p)
		}
		if p, ok := wp.Plugin.(FilterPlugin); ok {
			f.filterIndex[name] = len(f.filter)
			f.filter = append(f.filter, filterPlugin{FilterPlugin: p, name: name})
		}
		if p, ok := wp.Plugin.(PreScorePlugin); ok {
			f.preScore = append(f.preScore, p)
		}
		if p, ok := wp.Plugin.(ScorePlugin); ok {
			f.scoreIndex[name] = len(f.score)
			f.score = append(f.score, scorePlugin{ScorePlugin: p, name: name, weight: max(wp.Weight, 1)})
		}
	}
	f.skipFilter = make([]bool, len(f.filter))
	f.skipScore = make([]bool, len(f.score))
	return f, nil
}

// EventsToRegister returns, per plugin name, the cluster events after which a
// pod that plugin rejected may fit (for queue.Config.PluginEvents). Plugins
// that register nothing are absent; the queue then retries their pods on any
// event.
func (f *Framework) EventsToRegister() map[string][]ClusterEvent {
	m := make(map[string][]ClusterEvent)
	for _, p := range f.plugins {
		if e, ok := p.(EnqueueExtensions); ok {
			m[p.Name()] = e.EventsToRegister()
		}
	}
	return m
}

// Schedule runs one cycle for pod over nodes (every node of the snapshot,
// each with a non-nil Node). It returns the chosen node, a *FitError when no
// node fits, ErrNoNodesAvailable when nodes is empty, or another error when a
// plugin failed.
func (f *Framework) Schedule(ctx context.Context, pod *corev1.Pod, nodes []*NodeInfo) (Result, error) {
	if len(nodes) == 0 {
		return Result{}, ErrNoNodesAvailable
	}
	state := f.state
	state.reset()
	diag := Diagnosis{NodeToStatus: make(map[string]*Status), UnschedulablePlugins: sets.New[string]()}
	fitError := func() error {
		fe := &FitError{Pod: pod, NumAllNodes: len(nodes), Diagnosis: diag}
		fe.Diagnosis.PostFilterMsg = preemptionMessage(pod, len(nodes), &fe.Diagnosis)
		return fe
	}

	// PreFilter.
	skipFilter := f.skipFilter
	clear(skipFilter)
	var narrowed *PreFilterResult
	var narrowedBy []string
	for _, pl := range f.preFilter {
		res, st := pl.PreFilter(ctx, state, pod, nodes)
		switch {
		case st.IsSkip():
			if i, ok := f.filterIndex[pl.Name()]; ok {
				skipFilter[i] = true
			}
			continue
		case st.IsRejected():
			st = st.WithPlugin(pl.Name())
			diag.AbsentNodesStatus = st
			diag.PreFilterMsg = st.Message()
			diag.UnschedulablePlugins.Insert(pl.Name())
			return Result{}, fitError()
		case !st.IsSuccess():
			return Result{}, fmt.Errorf("prefilter plugin %q: %w", pl.Name(), st.AsError())
		}
		if !res.AllNodes() {
			narrowedBy = append(narrowedBy, pl.Name())
			narrowed = narrowed.Merge(res)
			if len(narrowed.NodeNames) == 0 {
				msg := fmt.Sprintf("node(s) didn't satisfy plugin(s) %v simultaneously", narrowedBy)
				if len(narrowedBy) == 1 {
					msg = fmt.Sprintf("node(s) didn't satisfy plugin %v", narrowedBy[0])
				}
				st := NewStatus(Unschedulable, msg).WithPlugin(pl.Name())
				diag.AbsentNodesStatus = st
				diag.PreFilterMsg = msg
				diag.UnschedulablePlugins.Insert(narrowedBy...)
				return Result{}, fitError()
			}
		}
	}
	candidates := nodes
	if !narrowed.AllNodes() {
		candidates = make([]*NodeInfo, 0, len(narrowed.NodeNames))
		for _, n := range nodes {
			if narrowed.NodeNames.Has(n.Name()) {
				candidates = append(candidates, n)
			}
		}
		diag.AbsentNodesStatus = NewStatus(UnschedulableAndUnresolvable,
			fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", sets.List(sets.New(narrowedBy...))))
		diag.UnschedulablePlugins.Insert(narrowedBy...)
	}

	// Filter, until enough feasible nodes are found.
	feasible, processed, err := f.findFeasible(ctx, state, pod, candidates, skipFilter, &diag)
	if err != nil {
		return Result{}, err
	}
	res := Result{EvaluatedNodes: processed, FeasibleNodes: len(feasible)}
	switch len(feasible) {
	case 0:
		return res, fitError()
	case 1:
		res.NodeName = feasible[0].Name()
		return res, nil
	}

	// PreScore and Score.
	name, err := f.prioritize(ctx, state, pod, feasible, nodes)
	if err != nil {
		return Result{}, err
	}
	res.NodeName = name
	return res, nil
}

func (f *Framework) numFeasibleNodesToFind(numNodes int) int {
	if numNodes < minFeasibleNodesToFind || f.percentage >= 100 {
		return numNodes
	}
	pct := int(f.percentage)
	if pct <= 0 {
		pct = max(basePercentageOfNodesToScore-numNodes/125, minFeasibleNodesPercentageToFind)
	}
	return max(numNodes*pct/100, minFeasibleNodesToFind)
}

func (f *Framework) findFeasible(ctx context.Context, state *CycleState, pod *corev1.Pod, nodes []*NodeInfo,
	skip []bool, diag *Diagnosis) ([]*NodeInfo, int, error) {
	if len(nodes) == 0 {
		return nil, 0, nil
	}
	want := f.numFeasibleNodesToFind(len(nodes))
	feasible := f.feasible[:0]
	start := f.nextStart % len(nodes)
	processed := 0
	for i := 0; i < len(nodes) && len(feasible) < want; i++ {
		ni := nodes[(start+i)%len(nodes)]
		processed++
		st := f.runFilters(ctx, state, pod, ni, skip)
		switch {
		case st.IsSuccess():
			feasible = append(feasible, ni)
		case st.IsRejected():
			diag.NodeToStatus[ni.Name()] = st
			diag.UnschedulablePlugins.Insert(st.Plugin())
		default:
			return nil, processed, fmt.Errorf("filter plugin %q on node %q: %w", st.Plugin(), ni.Name(), st.AsError())
		}
	}
	f.nextStart = (start + processed) % len(nodes)
	f.feasible = feasible
	return feasible, processed, nil
}

// runFilters runs the filters on one node in order and returns the first
// non-success status, attributed to its plugin.
func (f *Framework) runFilters(ctx context.Context, state *CycleState, pod *corev1.Pod, ni *NodeInfo, skip []bool) *Status {
	for i := range f.filter {
		if skip[i] {
			continue
		}
		if st := f.filter[i].Filter(ctx, state, pod, ni); !st.IsSuccess() {
			return st.WithPlugin(f.filter[i].name)
		}
	}
	return nil
}

func (f *Framework) prioritize(ctx context.Context, state *CycleState, pod *corev1.Pod, feasible, all []*NodeInfo) (string, error) {
	skipScore := f.skipScore
	clear(skipScore)
	for _, pl := range f.preScore {
		st := pl.PreScore(ctx, state, pod, feasible, all)
		switch {
		case st.IsSkip():
			if i, ok := f.scoreIndex[pl.Name()]; ok {
				skipScore[i] = true
			}
		case !st.IsSuccess():
			return "", fmt.Errorf("prescore plugin %q: %w", pl.Name(), st.AsError())
		}
	}

	totals := f.totals[:0]
	for range feasible {
		totals = append(totals, 0)
	}
	scores := f.scores[:0]
	for range feasible {
		scores = append(scores, NodeScore{})
	}
	for j, pl := range f.score {
		if skipScore[j] {
			continue
		}
		for i, ni := range feasible {
			s, st := pl.Score(ctx, state, pod, ni)
			if !st.IsSuccess() {
				return "", fmt.Errorf("score plugin %q on node %q: %w", pl.name, ni.Name(), st.AsError())
			}
			scores[i] = NodeScore{Name: ni.Name(), Score: s}
		}
		if n, ok := pl.ScorePlugin.(ScoreNormalizer); ok {
			if st := n.NormalizeScore(ctx, state, pod, scores); !st.IsSuccess() {
				return "", fmt.Errorf("normalize score plugin %q: %w", pl.name, st.AsError())
			}
		}
		for i, s := range scores {
			if s.Score < MinNodeScore || s.Score > MaxNodeScore {
				return "", fmt.Errorf("score plugin %q gave node %q score %d, outside [%d, %d]",
					pl.name, s.Name, s.Score, MinNodeScore, MaxNodeScore)
			}
			totals[i] += s.Score * pl.weight
		}
	}
	f.totals, f.scores = totals, scores
	return feasible[f.selectHost(totals)].Name(), nil
}

// selectHost returns the index of the highest total; ties are broken
// uniformly at random with the seeded source (reservoir sampling over the
// tied nodes).
func (f *Framework) selectHost(totals []int64) int {
	best, tied := 0, 1
	for i := 1; i < len(totals); i++ {
		switch {
		case totals[i] > totals[best]:
			best, tied = i, 1
		case totals[i] == totals[best]:
			tied++
			if f.rng.IntN(tied) == 0 {
				best = i
			}
		}
	}
	return best
}
