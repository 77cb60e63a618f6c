// Package tainttoleration is the TaintToleration plugin (SCH-3): a node with
// a NoSchedule or NoExecute taint the pod does not tolerate is infeasible,
// and among feasible nodes those with fewer untolerated PreferNoSchedule
// taints score higher. It also owns toleration matching (TEC-3 rules), which
// the other plugins use. It reads only the pod and the Node object and must
// not look at node conditions (SCH-1: they reach the scheduler as taints).
package tainttoleration

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
)

// Name is the upstream plugin name.
const Name = "TaintToleration"

// ErrReasonNotMatch is the Filter reason. Upstream printed the first
// untolerated taint ("node(s) had untolerated taint {key: value}") until
// kubernetes#134740 (v1.35, backported to v1.34 patches) replaced it with
// this generic text so taint keys and values do not leak into pod status.
const ErrReasonNotMatch = "node(s) had untolerated taint(s)"

const preScoreKey framework.StateKey = "PreScore" + Name

// DoNotSchedule selects the taints that keep pods off a node: NoSchedule and
// NoExecute.
func DoNotSchedule(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// Plugin is the TaintToleration plugin.
type Plugin struct{}

// New returns the plugin.
func New() *Plugin { return &Plugin{} }

var (
	_ framework.FilterPlugin      = (*Plugin)(nil)
	_ framework.PreScorePlugin    = (*Plugin)(nil)
	_ framework.ScorePlugin       = (*Plugin)(nil)
	_ framework.ScoreNormalizer   = (*Plugin)(nil)
	_ framework.EnqueueExtensions = (*Plugin)(nil)
)

var statusNotMatch = framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonNotMatch).WithPlugin(Name)

// Name implements framework.Plugin.
func (*Plugin) Name() string { return Name }

// EventsToRegister implements framework.EnqueueExtensions: a new node, or a
// change of a node's taints.
func (*Plugin) EventsToRegister() []framework.ClusterEvent {
	return []framework.ClusterEvent{{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeTaint}}
}

// Filter rejects a node with an untolerated NoSchedule or NoExecute taint.
func (*Plugin) Filter(_ context.Context, _ *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	if _, found := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), ni.Node().Spec.Taints, pod.Spec.Tolerations, DoNotSchedule, false); found {
		return statusNotMatch
	}
	return nil
}

// PreScore keeps the tolerations that can tolerate a PreferNoSchedule taint.
func (*Plugin) PreScore(_ context.Context, state *framework.CycleState, pod *corev1.Pod, _, _ []*framework.NodeInfo) *framework.Status {
	var prefer []corev1.Toleration
	for _, t := range pod.Spec.Tolerations {
		if t.Effect == "" || t.Effect == corev1.TaintEffectPreferNoSchedule {
			prefer = append(prefer, t)
		}
	}
	state.Write(preScoreKey, prefer)
	return nil
}

// Score counts the node's untolerated PreferNoSchedule taints (normalised so
// fewer is better).
func (*Plugin) Score(_ context.Context, state *framework.CycleState, _ *corev1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	prefer, err := framework.ReadState[[]corev1.Toleration](state, preScoreKey)
	if err != nil {
		return 0, framework.AsStatus(err)
	}
	var n int64
	for i := range ni.Node().Spec.Taints {
		t := &ni.Node().Spec.Taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule && !corev1helpers.TolerationsTolerateTaint(klog.Background(), prefer, t, false) {
			n++
		}
	}
	return n, nil
}

// NormalizeScore maps the counts to [0, 100], the node with the most
// untolerated PreferNoSchedule taints getting 0.
func (*Plugin) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *corev1.Pod, scores framework.NodeScoreList) *framework.Status {
	framework.DefaultNormalizeScore(framework.MaxNodeScore, true, scores)
	return nil
}
