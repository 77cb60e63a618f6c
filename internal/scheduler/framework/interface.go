package framework

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Score bounds: every score plugin's (normalised) score must lie in
// [MinNodeScore, MaxNodeScore]; the framework multiplies it by the plugin's
// weight and sums.
const (
	MinNodeScore int64 = 0
	MaxNodeScore int64 = 100
)

// Plugin is the part every plugin has.
type Plugin interface {
	// Name is the upstream plugin name ("NodeResourcesFit", ...); it appears
	// in statuses and in the unschedulable-plugins set the queue uses.
	Name() string
}

// PreFilterResult narrows the nodes a pod may go to. A nil result, or one
// with nil NodeNames, means all nodes.
type PreFilterResult struct {
	NodeNames sets.Set[string]
}

// AllNodes reports whether the result leaves every node eligible.
func (r *PreFilterResult) AllNodes() bool { return r == nil || r.NodeNames == nil }

// Merge intersects two results.
func (r *PreFilterResult) Merge(o *PreFilterResult) *PreFilterResult {
	switch {
	case r.AllNodes() && o.AllNodes():
		return nil
	case r.AllNodes():
		return &PreFilterResult{NodeNames: sets.New(o.NodeNames.UnsortedList()...)}
	case o.AllNodes():
		return &PreFilterResult{NodeNames: sets.New(r.NodeNames.UnsortedList()...)}
	default:
		return &PreFilterResult{NodeNames: r.NodeNames.Intersection(o.NodeNames)}
	}
}

// PreFilterPlugin runs once per cycle before any Filter. It may precompute
// state for Filter, narrow the nodes, reject the pod outright, or return Skip
// so its Filter is not called. nodes are all nodes of the snapshot.
type PreFilterPlugin interface {
	Plugin
	PreFilter(ctx context.Context, state *CycleState, pod *corev1.Pod, nodes []*NodeInfo) (*PreFilterResult, *Status)
}

// FilterPlugin decides whether the pod may run on one node. It returns nil
// (Success), Unschedulable, UnschedulableAndUnresolvable, or Error. Filters
// run in configuration order and the first rejection decides the node's
// reason.
type FilterPlugin interface {
	Plugin
	Filter(ctx context.Context, state *CycleState, pod *corev1.Pod, node *NodeInfo) *Status
}

// PreScorePlugin runs once per cycle before any Score. feasible are the nodes
// that passed every filter; all are every node of the snapshot (some plugins
// count pods cluster-wide). Returning Skip disables the plugin's Score for the
// cycle.
type PreScorePlugin interface {
	Plugin
	PreScore(ctx context.Context, state *CycleState, pod *corev1.Pod, feasible, all []*NodeInfo) *Status
}

// ScorePlugin ranks a feasible node. A plugin that also implements
// ScoreNormalizer gets all of its raw scores afterwards and must bring them
// into [MinNodeScore, MaxNodeScore]; one that does not must score within that
// range directly.
type ScorePlugin interface {
	Plugin
	Score(ctx context.Context, state *CycleState, pod *corev1.Pod, node *NodeInfo) (int64, *Status)
}

// ScoreNormalizer is implemented by score plugins whose raw scores need
// rescaling once every node is scored.
type ScoreNormalizer interface {
	NormalizeScore(ctx context.Context, state *CycleState, pod *corev1.Pod, scores NodeScoreList) *Status
}

// EnqueueExtensions is implemented by plugins that can reject a pod; it lists
// the cluster events after which a pod this plugin rejected may fit, so the
// queue retries the pod only then.
type EnqueueExtensions interface {
	EventsToRegister() []ClusterEvent
}

// NodeScore is one node's score from one plugin (or the weighted total).
type NodeScore struct {
	Name  string
	Score int64
}

// NodeScoreList is the scores of one plugin, in the order of the feasible
// nodes.
type NodeScoreList []NodeScore

// DefaultNormalizeScore scales scores linearly so the highest becomes
// maxScore; with reverse the order flips (highest raw → 0). When every raw
// score is 0 they all become 0, or maxScore with reverse.
func DefaultNormalizeScore(maxScore int64, reverse bool, scores NodeScoreList) {
	var highest int64
	for _, s := range scores {
		highest = max(highest, s.Score)
	}
	if highest == 0 {
		if reverse {
			for i := range scores {
				scores[i].Score = maxScore
			}
		}
		return
	}
	for i := range scores {
		s := maxScore * scores[i].Score / highest
		if reverse {
			s = maxScore - s
		}
		scores[i].Score = s
	}
}
