// Package podtopologyspread is the PodTopologySpread plugin: it spreads pods
// that match a label selector across topology domains (zones, hosts, any node
// label). A pod's own topologySpreadConstraints with whenUnsatisfiable
// DoNotSchedule filter nodes (skew = matching pods in the node's domain + 1
// − the smallest domain's count must not exceed maxSkew), those with
// ScheduleAnyway score them. A pod without constraints that belongs to a
// ReplicaSet, ReplicationController or StatefulSet gets the default
// constraints (upstream's system defaults: maxSkew 3 per hostname and 5 per
// topology.kubernetes.io/zone, both ScheduleAnyway), so replicas spread over
// zones and hosts without asking. It reads pods and nodes from the NodeInfos
// it is given and nothing else.
package podtopologyspread

import (
	"context"
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
	"github.com/nodeplane/nodeplane/internal/scheduler/plugins/nodeaffinity"
	"github.com/nodeplane/nodeplane/internal/scheduler/plugins/tainttoleration"
)

// Name is the upstream plugin name.
const Name = "PodTopologySpread"

// Filter reasons, as upstream prints them.
const (
	ErrReasonConstraintsNotMatch = "node(s) didn't match pod topology spread constraints"
	ErrReasonNodeLabelNotMatch   = ErrReasonConstraintsNotMatch + " (missing required label)"
)

// SelectorFunc returns the selector of the pods a pod without constraints
// should spread against (its siblings), or nil for none.
type SelectorFunc func(pod *corev1.Pod) labels.Selector

// Config configures the plugin.
type Config struct {
	// DefaultConstraints apply to pods that set no constraints of their own;
	// their LabelSelector must be empty, DefaultSelector provides it. nil
	// means upstream's system defaults (SystemDefaultConstraints), under which
	// nodes missing a topology label still take part in the other
	// constraints; an empty non-nil slice disables default spreading.
	DefaultConstraints []corev1.TopologySpreadConstraint
	// DefaultSelector finds a pod's siblings; nil means OwnerSelector.
	// Upstream uses the selectors of the Services, ReplicaSets,
	// ReplicationControllers and StatefulSets that select the pod; a shell
	// with those listers can supply that here.
	DefaultSelector SelectorFunc
}

// DefaultConfig returns upstream's system defaults with OwnerSelector.
func DefaultConfig() Config { return Config{} }

// SystemDefaultConstraints are upstream's: maxSkew 3 over hostname and 5 over
// topology.kubernetes.io/zone, both ScheduleAnyway (scoring only).
func SystemDefaultConstraints() []corev1.TopologySpreadConstraint {
	return []corev1.TopologySpreadConstraint{
		{TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway, MaxSkew: 3},
		{TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.ScheduleAnyway, MaxSkew: 5},
	}
}

// Labels that differ between replicas of one controller, so they must not be
// part of the sibling selector.
var perPodLabels = []string{
	"statefulset.kubernetes.io/pod-name",
	"apps.kubernetes.io/pod-index",
	"controller-revision-hash",
}

// OwnerSelector selects a pod's siblings without listers: when its
// controller is a ReplicaSet, ReplicationController or StatefulSet, the pods
// carrying all of its labels except the per-replica ones (a ReplicaSet
// stamps the same labels, pod-template-hash included, on every replica, so
// this matches the ReplicaSet's own selector's pods). nil otherwise.
func OwnerSelector(pod *corev1.Pod) labels.Selector {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return nil
	}
	switch ref.Kind {
	case "ReplicaSet", "ReplicationController", "StatefulSet":
	default:
		return nil
	}
	set := make(labels.Set, len(pod.Labels))
	for k, v := range pod.Labels {
		set[k] = v
	}
	for _, k := range perPodLabels {
		delete(set, k)
	}
	if len(set) == 0 {
		return nil
	}
	return labels.SelectorFromSet(set)
}

// constraint is a parsed TopologySpreadConstraint.
type constraint struct {
	maxSkew        int32
	key            string
	selector       labels.Selector
	minDomains     int32
	affinityPolicy corev1.NodeInclusionPolicy
	taintsPolicy   corev1.NodeInclusionPolicy
}

// includes reports whether node counts for c: by default nodes the pod's
// nodeSelector/required affinity excludes do not (nodeAffinityPolicy Honor),
// tainted ones do (nodeTaintsPolicy Ignore).
func (c *constraint) includes(pod *corev1.Pod, node *corev1.Node, m *nodeaffinity.RequiredMatcher) bool {
	if c.affinityPolicy == corev1.NodeInclusionPolicyHonor && !m.Match(node) {
		return false
	}
	if c.taintsPolicy == corev1.NodeInclusionPolicyHonor {
		if _, found := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, tainttoleration.DoNotSchedule, false); found {
			return false
		}
	}
	return true
}

// Plugin is the PodTopologySpread plugin.
type Plugin struct {
	defaults        []corev1.TopologySpreadConstraint
	systemDefaulted bool
	selector        SelectorFunc
}

// New validates cfg and builds the plugin.
func New(cfg Config) (*Plugin, error) {
	p := &Plugin{defaults: cfg.DefaultConstraints, selector: cfg.DefaultSelector}
	if p.defaults == nil {
		p.defaults, p.systemDefaulted = SystemDefaultConstraints(), true
	}
	if p.selector == nil {
		p.selector = OwnerSelector
	}
	for i, c := range p.defaults {
		switch {
		case c.MaxSkew <= 0:
			return nil, fmt.Errorf("default constraint %d: maxSkew %d must be positive", i, c.MaxSkew)
		case c.TopologyKey == "":
			return nil, fmt.Errorf("default constraint %d: empty topologyKey", i)
		case c.LabelSelector != nil:
			return nil, fmt.Errorf("default constraint %d: labelSelector must be empty, the pod's owner provides it", i)
		case c.WhenUnsatisfiable != corev1.DoNotSchedule && c.WhenUnsatisfiable != corev1.ScheduleAnyway:
			return nil, fmt.Errorf("default constraint %d: whenUnsatisfiable %q", i, c.WhenUnsatisfiable)
		}
	}
	return p, nil
}

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

// EventsToRegister implements framework.EnqueueExtensions: assigned pods
// coming, going or relabelled change the counts; nodes coming, going,
// relabelled or (re)tainted change the domains.
func (*Plugin) EventsToRegister() []framework.ClusterEvent {
	return []framework.ClusterEvent{
		{Resource: framework.Pod, ActionType: framework.Add | framework.Delete | framework.UpdatePodLabel},
		{Resource: framework.Node, ActionType: framework.Add | framework.Delete | framework.UpdateNodeLabel | framework.UpdateNodeTaint},
	}
}

// constraints returns the pod's constraints with action, or the default
// ones (with the sibling selector) when the pod sets none.
func (p *Plugin) constraints(pod *corev1.Pod, action corev1.UnsatisfiableConstraintAction) ([]constraint, error) {
	if len(pod.Spec.TopologySpreadConstraints) > 0 {
		var out []constraint
		for _, c := range pod.Spec.TopologySpreadConstraints {
			if c.WhenUnsatisfiable != action {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
			if err != nil {
				return nil, fmt.Errorf("topology spread constraint %q: %w", c.TopologyKey, err)
			}
			for _, k := range c.MatchLabelKeys {
				v, ok := pod.Labels[k]
				if !ok {
					continue
				}
				r, err := labels.NewRequirement(k, selection.In, []string{v})
				if err != nil {
					return nil, fmt.Errorf("topology spread constraint %q: matchLabelKeys %q: %w", c.TopologyKey, k, err)
				}
				sel = sel.Add(*r)
			}
			out = append(out, parse(&c, sel))
		}
		return out, nil
	}
	var out []constraint
	var sel labels.Selector
	for i := range p.defaults {
		c := &p.defaults[i]
		if c.WhenUnsatisfiable != action {
			continue
		}
		if sel == nil {
			if sel = p.selector(pod); sel == nil || sel.Empty() {
				return nil, nil
			}
		}
		out = append(out, parse(c, sel))
	}
	return out, nil
}

func parse(c *corev1.TopologySpreadConstraint, sel labels.Selector) constraint {
	pc := constraint{
		maxSkew:        c.MaxSkew,
		key:            c.TopologyKey,
		selector:       sel,
		minDomains:     1,
		affinityPolicy: corev1.NodeInclusionPolicyHonor,
		taintsPolicy:   corev1.NodeInclusionPolicyIgnore,
	}
	if c.MinDomains != nil {
		pc.minDomains = *c.MinDomains
	}
	if c.NodeAffinityPolicy != nil {
		pc.affinityPolicy = *c.NodeAffinityPolicy
	}
	if c.NodeTaintsPolicy != nil {
		pc.taintsPolicy = *c.NodeTaintsPolicy
	}
	return pc
}

func hasAllKeys(node *corev1.Node, cs []constraint) bool {
	for i := range cs {
		if _, ok := node.Labels[cs[i].key]; !ok {
			return false
		}
	}
	return true
}

// countMatching counts the pods in namespace ns that sel selects, leaving out
// terminating ones.
func countMatching(pods []*framework.PodInfo, sel labels.Selector, ns string) int64 {
	if sel.Empty() {
		return 0
	}
	var n int64
	for _, pi := range pods {
		p := pi.Pod
		if p.DeletionTimestamp != nil || p.Namespace != ns {
			continue
		}
		if sel.Matches(labels.Set(p.Labels)) {
			n++
		}
	}
	return n
}

const preFilterKey framework.StateKey = "PreFilter" + Name

type filterState struct {
	constraints []constraint
	// counts[i] maps each eligible domain of constraint i to its matching
	// pods; domains with none are present with 0.
	counts   []map[string]int64
	minMatch []int64
}

// PreFilter counts, for each DoNotSchedule constraint, the matching pods in
// every eligible domain (nodes that carry all the constraints' keys and pass
// the inclusion policies). Without such constraints it skips the Filter.
func (p *Plugin) PreFilter(_ context.Context, state *framework.CycleState, pod *corev1.Pod, nodes []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	cs, err := p.constraints(pod, corev1.DoNotSchedule)
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	if len(cs) == 0 {
		return nil, framework.NewStatus(framework.Skip)
	}
	s := &filterState{constraints: cs, counts: make([]map[string]int64, len(cs)), minMatch: make([]int64, len(cs))}
	for i := range cs {
		s.counts[i] = make(map[string]int64)
	}
	m := nodeaffinity.NewRequiredMatcher(pod)
	for _, ni := range nodes {
		node := ni.Node()
		if node == nil || !hasAllKeys(node, cs) {
			continue
		}
		for i := range cs {
			c := &cs[i]
			if !c.includes(pod, node, m) {
				continue
			}
			s.counts[i][node.Labels[c.key]] += countMatching(ni.Pods, c.selector, pod.Namespace)
		}
	}
	for i := range cs {
		lowest := int64(math.MaxInt64)
		for _, n := range s.counts[i] {
			lowest = min(lowest, n)
		}
		if len(s.counts[i]) < int(cs[i].minDomains) {
			// Fewer eligible domains than the pod asks for: the missing ones
			// count as empty.
			lowest = 0
		}
		s.minMatch[i] = lowest
	}
	state.Write(preFilterKey, s)
	return nil, nil
}

// Filter rejects a node without one of the topology keys
// (UnschedulableAndUnresolvable) or where placing the pod would make a
// domain exceed maxSkew over the emptiest one (Unschedulable).
func (p *Plugin) Filter(_ context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadState[*filterState](state, preFilterKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	node := ni.Node()
	podLabels := labels.Set(pod.Labels)
	for i := range s.constraints {
		c := &s.constraints[i]
		value, ok := node.Labels[c.key]
		if !ok {
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonNodeLabelNotMatch)
		}
		var self int64
		if c.selector.Matches(podLabels) {
			self = 1
		}
		if s.counts[i][value]+self-s.minMatch[i] > int64(c.maxSkew) {
			return framework.NewStatus(framework.Unschedulable, ErrReasonConstraintsNotMatch)
		}
	}
	return nil
}
