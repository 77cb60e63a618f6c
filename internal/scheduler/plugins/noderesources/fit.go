// Package noderesources holds the resource plugins: NodeResourcesFit (SCH-4:
// a node must have room for the pod's requests, cpu, memory,
// ephemeral-storage, extended resources and hugepages, and a free pod slot;
// it scores with the LeastAllocated strategy) and
// NodeResourcesBalancedAllocation (prefers nodes whose cpu and memory usage
// stay balanced). Requests are computed by framework.ComputePodRequests; the
// node side comes from framework.NodeInfo. It reads nothing else.
package noderesources

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
)

// FitName is the upstream plugin name of the fit plugin.
const FitName = "NodeResourcesFit"

// ErrReasonTooManyPods is the reason when the node's pod slots are all taken;
// other resources give "Insufficient <resource name>".
const ErrReasonTooManyPods = "Too many pods"

const (
	fitPreFilterKey framework.StateKey = "PreFilter" + FitName
	fitPreScoreKey  framework.StateKey = "PreScore" + FitName
)

// ResourceSpec is a resource that takes part in scoring, with its weight.
type ResourceSpec struct {
	Name   corev1.ResourceName
	Weight int64
}

// DefaultScoringResources are upstream's: cpu and memory, weight 1 each.
func DefaultScoringResources() []ResourceSpec {
	return []ResourceSpec{{Name: corev1.ResourceCPU, Weight: 1}, {Name: corev1.ResourceMemory, Weight: 1}}
}

// FitConfig configures NodeResourcesFit.
type FitConfig struct {
	// IgnoredResources are extended resources the filter does not check.
	IgnoredResources []string
	// IgnoredResourceGroups are extended-resource prefixes (the part before
	// "/") the filter does not check.
	IgnoredResourceGroups []string
	// ScoringResources feed the LeastAllocated score.
	ScoringResources []ResourceSpec
}

// DefaultFitConfig returns upstream's defaults.
func DefaultFitConfig() FitConfig {
	return FitConfig{ScoringResources: DefaultScoringResources()}
}

// Fit is the NodeResourcesFit plugin.
type Fit struct {
	ignored       sets.Set[string]
	ignoredGroups sets.Set[string]
	scoring       []ResourceSpec
}

// NewFit builds the plugin.
func NewFit(cfg FitConfig) (*Fit, error) {
	for _, r := range cfg.ScoringResources {
		if r.Weight <= 0 || r.Weight > framework.MaxNodeScore {
			return nil, fmt.Errorf("scoring resource %q: weight %d outside [1, %d]", r.Name, r.Weight, framework.MaxNodeScore)
		}
	}
	return &Fit{
		ignored:       sets.New(cfg.IgnoredResources...),
		ignoredGroups: sets.New(cfg.IgnoredResourceGroups...),
		scoring:       cfg.ScoringResources,
	}, nil
}

var (
	_ framework.PreFilterPlugin   = (*Fit)(nil)
	_ framework.FilterPlugin      = (*Fit)(nil)
	_ framework.PreScorePlugin    = (*Fit)(nil)
	_ framework.ScorePlugin       = (*Fit)(nil)
	_ framework.EnqueueExtensions = (*Fit)(nil)
)

// Name implements framework.Plugin.
func (*Fit) Name() string { return FitName }

// EventsToRegister implements framework.EnqueueExtensions: a new node, a
// node whose allocatable changed, an assigned pod deleted or scaled down.
func (*Fit) EventsToRegister() []framework.ClusterEvent {
	return []framework.ClusterEvent{
		{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeAllocatable},
		{Resource: framework.Pod, ActionType: framework.Delete | framework.UpdatePodScaleDown},
	}
}

type fitState struct {
	framework.Resource
	nonZeroMilliCPU, nonZeroMemory int64
}

// PreFilter computes the pod's requests once.
func (*Fit) PreFilter(_ context.Context, state *framework.CycleState, pod *corev1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	req, cpu, mem := framework.ComputePodRequests(pod)
	state.Write(fitPreFilterKey, &fitState{Resource: req, nonZeroMilliCPU: cpu, nonZeroMemory: mem})
	return nil, nil
}

// Filter rejects a node that lacks room; every missing resource is a reason.
// The status is UnschedulableAndUnresolvable when the pod asks more than the
// node's whole allocatable of some resource (preemption cannot help there,
// as upstream since v1.34), Unschedulable otherwise.
func (f *Fit) Filter(_ context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadState[*fitState](state, fitPreFilterKey)
	if err != nil {
		req, _, _ := framework.ComputePodRequests(pod)
		s = &fitState{Resource: req}
	}
	insufficient := f.fits(&s.Resource, ni)
	if len(insufficient) == 0 {
		return nil
	}
	code := framework.Unschedulable
	reasons := make([]string, len(insufficient))
	for i, r := range insufficient {
		reasons[i] = r.Reason
		if r.Unresolvable {
			code = framework.UnschedulableAndUnresolvable
		}
	}
	return framework.NewStatus(code, reasons...)
}

// InsufficientResource describes one resource the node lacks for the pod.
type InsufficientResource struct {
	ResourceName corev1.ResourceName
	Reason       string
	Requested    int64
	Used         int64
	Capacity     int64
	// Unresolvable is set when Requested exceeds Capacity itself.
	Unresolvable bool
}

// Fits lists what node lacks to run pod; empty means it fits.
func Fits(pod *corev1.Pod, ni *framework.NodeInfo) []InsufficientResource {
	req, _, _ := framework.ComputePodRequests(pod)
	return (&Fit{}).fits(&req, ni)
}

func (f *Fit) fits(req *framework.Resource, ni *framework.NodeInfo) []InsufficientResource {
	var out []InsufficientResource
	alloc, used := &ni.Allocatable, &ni.Requested
	if int64(len(ni.Pods))+1 > alloc.AllowedPodNumber {
		out = append(out, InsufficientResource{
			ResourceName: corev1.ResourcePods, Reason: ErrReasonTooManyPods,
			Requested: 1, Used: int64(len(ni.Pods)), Capacity: alloc.AllowedPodNumber,
		})
	}
	if req.MilliCPU == 0 && req.Memory == 0 && req.EphemeralStorage == 0 && len(req.Scalar) == 0 {
		return out
	}
	check := func(name corev1.ResourceName, want, have, inUse int64) {
		if want > 0 && want > have-inUse {
			out = append(out, InsufficientResource{
				ResourceName: name, Reason: "Insufficient " + string(name),
				Requested: want, Used: inUse, Capacity: have, Unresolvable: want > have,
			})
		}
	}
	check(corev1.ResourceCPU, req.MilliCPU, alloc.MilliCPU, used.MilliCPU)
	check(corev1.ResourceMemory, req.Memory, alloc.Memory, used.Memory)
	check(corev1.ResourceEphemeralStorage, req.EphemeralStorage, alloc.EphemeralStorage, used.EphemeralStorage)
	for _, name := range sortedScalarNames(req.Scalar) {
		if f.isIgnored(name) {
			continue
		}
		check(name, req.Scalar[name], alloc.Scalar[name], used.Scalar[name])
	}
	return out
}

func (f *Fit) isIgnored(name corev1.ResourceName) bool {
	if !framework.IsExtendedResourceName(name) {
		return false
	}
	if f.ignored.Has(string(name)) {
		return true
	}
	if f.ignoredGroups.Len() > 0 {
		group, _, _ := strings.Cut(string(name), "/")
		return f.ignoredGroups.Has(group)
	}
	return false
}

// sortedScalarNames gives a stable reason order (upstream iterates a map).
func sortedScalarNames(m map[corev1.ResourceName]int64) []corev1.ResourceName {
	if len(m) == 0 {
		return nil
	}
	names := make([]corev1.ResourceName, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// PreScore computes the pod's scoring requests for the configured
// resources.
func (f *Fit) PreScore(_ context.Context, state *framework.CycleState, pod *corev1.Pod, _, _ []*framework.NodeInfo) *framework.Status {
	state.Write(fitPreScoreKey, podScoringRequests(pod, f.scoring, false))
	return nil
}

// Score is upstream's LeastAllocated strategy: for each scoring resource
// (capacity − requested) × 100 / capacity, where requested includes the pod
// and containers without a cpu/memory request count the defaults; the
// weighted mean of the resources the node has.
func (f *Fit) Score(_ context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	req, err := framework.ReadState[[]int64](state, fitPreScoreKey)
	if err != nil {
		req = podScoringRequests(pod, f.scoring, false)
	}
	var score, weights int64
	for i, r := range f.scoring {
		capacity, requested := allocatableAndRequested(ni, r.Name, req[i], false)
		if capacity == 0 {
			continue
		}
		score += leastRequestedScore(requested, capacity) * r.Weight
		weights += r.Weight
	}
	if weights == 0 {
		return 0, nil
	}
	return score / weights, nil
}

func leastRequestedScore(requested, capacity int64) int64 {
	if capacity == 0 || requested > capacity {
		return 0
	}
	return (capacity - requested) * framework.MaxNodeScore / capacity
}

// podScoringRequests returns the pod's request for each resource; unless
// useRequested, cpu and memory use the non-zero defaults.
func podScoringRequests(pod *corev1.Pod, resources []ResourceSpec, useRequested bool) []int64 {
	req, cpu, mem := framework.ComputePodRequests(pod)
	out := make([]int64, len(resources))
	for i, r := range resources {
		switch {
		case r.Name == corev1.ResourceCPU && !useRequested:
			out[i] = cpu
		case r.Name == corev1.ResourceMemory && !useRequested:
			out[i] = mem
		default:
			out[i] = req.Get(r.Name)
		}
	}
	return out
}

// allocatableAndRequested returns the node's allocatable of resource and
// what would be requested there with the pod. (0, 0) leaves the resource out
// of the score: the node lacks it, or the pod does not ask for an extended
// resource.
func allocatableAndRequested(ni *framework.NodeInfo, name corev1.ResourceName, podRequest int64, useRequested bool) (int64, int64) {
	nodeReq := &ni.NonZeroRequested
	if useRequested {
		nodeReq = &ni.Requested
	}
	switch name {
	case corev1.ResourceCPU:
		return ni.Allocatable.MilliCPU, nodeReq.MilliCPU + podRequest
	case corev1.ResourceMemory:
		return ni.Allocatable.Memory, nodeReq.Memory + podRequest
	case corev1.ResourceEphemeralStorage:
		return ni.Allocatable.EphemeralStorage, ni.Requested.EphemeralStorage + podRequest
	}
	if podRequest == 0 {
		return 0, 0
	}
	if alloc, ok := ni.Allocatable.Scalar[name]; ok {
		return alloc, ni.Requested.Scalar[name] + podRequest
	}
	return 0, 0
}
