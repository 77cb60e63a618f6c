package noderesources

import (
	"context"
	"fmt"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
)

// BalancedAllocationName is the upstream plugin name.
const BalancedAllocationName = "NodeResourcesBalancedAllocation"

const balancedPreScoreKey framework.StateKey = "PreScore" + BalancedAllocationName

// BalancedAllocation scores nodes by how evenly the pod would leave their
// resources used: (1 − standard deviation of the used fractions) × 100.
type BalancedAllocation struct {
	resources []ResourceSpec
}

// NewBalancedAllocation builds the plugin over resources (default: cpu and
// memory).
func NewBalancedAllocation(resources []ResourceSpec) (*BalancedAllocation, error) {
	if len(resources) == 0 {
		resources = DefaultScoringResources()
	}
	for _, r := range resources {
		if r.Weight <= 0 {
			return nil, fmt.Errorf("resource %q: weight %d must be positive", r.Name, r.Weight)
		}
	}
	return &BalancedAllocation{resources: resources}, nil
}

var (
	_ framework.PreScorePlugin = (*BalancedAllocation)(nil)
	_ framework.ScorePlugin    = (*BalancedAllocation)(nil)
)

// Name implements framework.Plugin.
func (*BalancedAllocation) Name() string { return BalancedAllocationName }

// PreScore computes the pod's actual requests; a pod requesting none of the
// resources (best effort) skips the score, as upstream does so such pods do
// not all pile onto one node.
func (b *BalancedAllocation) PreScore(_ context.Context, state *framework.CycleState, pod *corev1.Pod, _, _ []*framework.NodeInfo) *framework.Status {
	req := podScoringRequests(pod, b.resources, true)
	if !slices.ContainsFunc(req, func(v int64) bool { return v != 0 }) {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(balancedPreScoreKey, req)
	return nil
}

// Score computes (1 − σ) × 100 over the fractions requested/allocatable
// (each capped at 1) of the resources the node has; with two resources σ is
// |f1 − f2| / 2.
func (b *BalancedAllocation) Score(_ context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	req, err := framework.ReadState[[]int64](state, balancedPreScoreKey)
	if err != nil {
		req = podScoringRequests(pod, b.resources, true)
	}
	var fractions [8]float64
	fs := fractions[:0]
	var sum float64
	for i, r := range b.resources {
		capacity, requested := allocatableAndRequested(ni, r.Name, req[i], true)
		if capacity == 0 {
			continue
		}
		f := min(float64(requested)/float64(capacity), 1)
		fs = append(fs, f)
		sum += f
	}
	var std float64
	switch {
	case len(fs) == 2:
		std = math.Abs((fs[0] - fs[1]) / 2)
	case len(fs) > 2:
		mean := sum / float64(len(fs))
		var v float64
		for _, f := range fs {
			v += (f - mean) * (f - mean)
		}
		std = math.Sqrt(v / float64(len(fs)))
	}
	return int64((1 - std) * float64(framework.MaxNodeScore)), nil
}
