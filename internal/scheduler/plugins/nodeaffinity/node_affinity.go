// Package nodeaffinity is the NodeAffinity plugin: spec.nodeSelector and the
// required node affinity terms (operators In, NotIn, Exists, DoesNotExist,
// Gt, Lt on labels; In/NotIn on metadata.name) filter nodes, and the
// preferred terms score them. It also exports the matcher the topology
// spreading plugin uses to decide which nodes count. It reads only the pod
// and the Node object.
package nodeaffinity

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
)

// Name is the upstream plugin name.
const Name = "NodeAffinity"

// Reasons, as upstream prints them.
const (
	// ErrReasonPod is the Filter reason.
	ErrReasonPod = "node(s) didn't match Pod's node affinity/selector"
	// ErrReasonConflict is the PreFilter reason when every required term
	// pins metadata.name and no name satisfies them all.
	ErrReasonConflict = "pod affinity terms conflict"
)

const (
	preFilterKey framework.StateKey = "PreFilter" + Name
	preScoreKey  framework.StateKey = "PreScore" + Name
)

var statusMismatch = framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonPod).WithPlugin(Name)

// Plugin is the NodeAffinity plugin.
type Plugin struct{}

// New returns the plugin.
func New() *Plugin { return &Plugin{} }

var (
	_ framework.PreFilterPlugin   = (*Plugin)(nil)
	_ framework.FilterPlugin      = (*Plugin)(nil)
	_ framework.PreScorePlugin    = (*Plugin)(nil)
	_ framework.ScorePlugin       = (*Plugin)(nil)
	_ framework.ScoreNormalizer   = (*Plugin)(nil)
	_ framework.EnqueueExtensions = (*Plugin)(nil)
)

// Name implements framework.Plugin.
func (*Plugin) Name() string { return Name }

// EventsToRegister implements framework.EnqueueExtensions: a new node or a
// change of a node's labels.
func (*Plugin) EventsToRegister() []framework.ClusterEvent {
	return []framework.ClusterEvent{{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeLabel}}
}

// PreFilter parses the pod's rules once. It skips the Filter for a pod
// without rules, and when every required term pins metadata.name it narrows
// the cycle to those nodes (how DaemonSet pods reach their node quickly).
func (*Plugin) PreFilter(_ context.Context, state *framework.CycleState, pod *corev1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	m := NewRequiredMatcher(pod)
	if m.Empty() {
		return nil, framework.NewStatus(framework.Skip)
	}
	state.Write(preFilterKey, m)
	if !m.hasAffinity {
		return nil, nil
	}
	var names sets.Set[string]
	for _, t := range pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		var termNames sets.Set[string]
		for _, f := range t.MatchFields {
			if f.Key != metav1.ObjectNameField || f.Operator != corev1.NodeSelectorOpIn {
				continue
			}
			s := sets.New(f.Values...)
			if termNames == nil {
				termNames = s
			} else {
				termNames = termNames.Intersection(s)
			}
		}
		if termNames == nil {
			// This term does not pin names; the terms are ORed, so any node
			// may match.
			return nil, nil
		}
		names = names.Union(termNames)
	}
	switch {
	case names == nil:
		return nil, nil
	case len(names) == 0:
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonConflict)
	default:
		return &framework.PreFilterResult{NodeNames: names}, nil
	}
}

// Filter rejects a node that misses a nodeSelector label or matches no
// required term.
func (*Plugin) Filter(_ context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	m, err := framework.ReadState[*RequiredMatcher](state, preFilterKey)
	if err != nil {
		m = NewRequiredMatcher(pod)
	}
	if !m.Match(ni.Node()) {
		return statusMismatch
	}
	return nil
}

// PreScore parses the preferred terms; without any the Score is skipped.
func (*Plugin) PreScore(_ context.Context, state *framework.CycleState, pod *corev1.Pod, _, _ []*framework.NodeInfo) *framework.Status {
	terms := parsePreferred(pod)
	if len(terms) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(preScoreKey, terms)
	return nil
}

// Score sums the weights of the preferred terms the node matches.
func (*Plugin) Score(_ context.Context, state *framework.CycleState, _ *corev1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	terms, err := framework.ReadState[[]preferredTerm](state, preScoreKey)
	if err != nil {
		return 0, framework.AsStatus(err)
	}
	var s int64
	for i := range terms {
		s += terms[i].score(ni.Node())
	}
	return s, nil
}

// NormalizeScore scales the sums so the best node gets 100.
func (*Plugin) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *corev1.Pod, scores framework.NodeScoreList) *framework.Status {
	framework.DefaultNormalizeScore(framework.MaxNodeScore, false, scores)
	return nil
}
