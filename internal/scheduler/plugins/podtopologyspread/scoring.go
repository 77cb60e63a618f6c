package podtopologyspread

import (
	"context"
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
	"github.com/nodeplane/nodeplane/internal/scheduler/plugins/nodeaffinity"
)

const preScoreKey framework.StateKey = "PreScore" + Name

type scoreState struct {
	constraints []constraint
	// ignored are feasible nodes missing a topology key (not scored).
	ignored sets.Set[string]
	// counts[i] maps each domain of constraint i present among the feasible
	// nodes to its matching pods cluster-wide (unused for hostname, which
	// counts the node's own pods).
	counts []map[string]int64
	// weights[i] = ln(number of such domains + 2), so constraints over few
	// domains are not drowned by those over many.
	weights []float64
}

// PreScore prepares the ScheduleAnyway constraints (the pod's, or the
// defaults); without any the Score is skipped.
func (p *Plugin) PreScore(_ context.Context, state *framework.CycleState, pod *corev1.Pod, feasible, all []*framework.NodeInfo) *framework.Status {
	if len(all) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	cs, err := p.constraints(pod, corev1.ScheduleAnyway)
	if err != nil {
		return framework.AsStatus(err)
	}
	if len(cs) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	// With the system defaults a node without a zone label still spreads by
	// hostname; with explicit constraints it must carry every key.
	requireAll := len(pod.Spec.TopologySpreadConstraints) > 0 || !p.systemDefaulted
	s := &scoreState{
		constraints: cs,
		ignored:     sets.New[string](),
		counts:      make([]map[string]int64, len(cs)),
		weights:     make([]float64, len(cs)),
	}
	for i := range cs {
		s.counts[i] = make(map[string]int64)
	}
	for _, ni := range feasible {
		node := ni.Node()
		if requireAll && !hasAllKeys(node, cs) {
			s.ignored.Insert(node.Name)
			continue
		}
		for i := range cs {
			if cs[i].key != corev1.LabelHostname {
				s.counts[i][node.Labels[cs[i].key]] = 0
			}
		}
	}
	for i := range cs {
		size := len(s.counts[i])
		if cs[i].key == corev1.LabelHostname {
			size = len(feasible) - s.ignored.Len()
		}
		s.weights[i] = math.Log(float64(size + 2))
	}
	m := nodeaffinity.NewRequiredMatcher(pod)
	for _, ni := range all {
		node := ni.Node()
		if node == nil || (requireAll && !hasAllKeys(node, cs)) {
			continue
		}
		for i := range cs {
			c := &cs[i]
			if c.key == corev1.LabelHostname {
				continue
			}
			value := node.Labels[c.key]
			if _, ok := s.counts[i][value]; !ok || !c.includes(pod, node, m) {
				continue
			}
			s.counts[i][value] += countMatching(ni.Pods, c.selector, pod.Namespace)
		}
	}
	state.Write(preScoreKey, s)
	return nil
}

// Score sums, over the constraints whose key the node has, count × weight +
// (maxSkew − 1); fewer matching pods in the node's domains is better, which
// NormalizeScore turns around.
func (p *Plugin) Score(_ context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	s, err := framework.ReadState[*scoreState](state, preScoreKey)
	if err != nil {
		return 0, framework.AsStatus(err)
	}
	node := ni.Node()
	if s.ignored.Has(node.Name) {
		return 0, nil
	}
	var score float64
	for i := range s.constraints {
		c := &s.constraints[i]
		value, ok := node.Labels[c.key]
		if !ok {
			continue
		}
		var n int64
		if c.key == corev1.LabelHostname {
			n = countMatching(ni.Pods, c.selector, pod.Namespace)
		} else {
			n = s.counts[i][value]
		}
		score += float64(n)*s.weights[i] + float64(c.maxSkew-1)
	}
	return int64(math.Round(score)), nil
}

// NormalizeScore maps raw scores to [0, 100]: 100 × (max + min − raw) / max,
// so the least crowded node gets 100; ignored nodes get 0.
func (p *Plugin) NormalizeScore(_ context.Context, state *framework.CycleState, _ *corev1.Pod, scores framework.NodeScoreList) *framework.Status {
	s, err := framework.ReadState[*scoreState](state, preScoreKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	lowest, highest := int64(math.MaxInt64), int64(0)
	for _, sc := range scores {
		if s.ignored.Has(sc.Name) {
			continue
		}
		lowest = min(lowest, sc.Score)
		highest = max(highest, sc.Score)
	}
	for i := range scores {
		switch {
		case s.ignored.Has(scores[i].Name):
			scores[i].Score = 0
		case highest == 0:
			scores[i].Score = framework.MaxNodeScore
		default:
			scores[i].Score = framework.MaxNodeScore * (highest + lowest - scores[i].Score) / highest
		}
	}
	return nil
}
