package nodelifecycle

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// noScheduleKeys are the NoSchedule taints this controller owns (SPEC
// NLC-11, §10.1); any other NoSchedule taint is never touched.
var noScheduleKeys = map[string]bool{
	corev1.TaintNodeNotReady:           true,
	corev1.TaintNodeUnreachable:        true,
	corev1.TaintNodeMemoryPressure:     true,
	corev1.TaintNodeDiskPressure:       true,
	corev1.TaintNodePIDPressure:        true,
	corev1.TaintNodeNetworkUnavailable: true,
	corev1.TaintNodeUnschedulable:      true,
}

// conditionTaints maps a condition type and status to the NoSchedule taint it
// calls for.
var conditionTaints = []struct {
	condition corev1.NodeConditionType
	status    corev1.ConditionStatus
	key       string
}{
	{corev1.NodeReady, corev1.ConditionFalse, corev1.TaintNodeNotReady},
	{corev1.NodeReady, corev1.ConditionUnknown, corev1.TaintNodeUnreachable},
	{corev1.NodeMemoryPressure, corev1.ConditionTrue, corev1.TaintNodeMemoryPressure},
	{corev1.NodeDiskPressure, corev1.ConditionTrue, corev1.TaintNodeDiskPressure},
	{corev1.NodePIDPressure, corev1.ConditionTrue, corev1.TaintNodePIDPressure},
	{corev1.NodeNetworkUnavailable, corev1.ConditionTrue, corev1.TaintNodeNetworkUnavailable},
}

// NoScheduleTaints is the taint-nodes-by-condition decision (SPEC NLC-11) for
// one node: the controller-owned NoSchedule taints to add (timeAdded = now)
// and the ones to remove (as found on the node), from the node's conditions
// and spec.unschedulable. Taints are matched by key and effect; taints of
// other keys or effects are never in either list. Both lists are empty when
// the node is as it should be. The shell runs it on every node add/update
// event and writes the result as one patch of spec.taints.
func NoScheduleTaints(node *corev1.Node, now time.Time) (add, remove []corev1.Taint) {
	want := map[string]bool{}
	for _, c := range node.Status.Conditions {
		for _, m := range conditionTaints {
			if c.Type == m.condition && c.Status == m.status {
				want[m.key] = true
			}
		}
	}
	if node.Spec.Unschedulable {
		want[corev1.TaintNodeUnschedulable] = true
	}
	have := map[string]bool{}
	for _, t := range node.Spec.Taints {
		if t.Effect != corev1.TaintEffectNoSchedule || !noScheduleKeys[t.Key] {
			continue
		}
		have[t.Key] = true
		if !want[t.Key] {
			remove = append(remove, t)
		}
	}
	// Walk the table (not the map) so the order is stable.
	keys := make([]string, 0, len(conditionTaints)+1)
	for _, m := range conditionTaints {
		keys = append(keys, m.key)
	}
	keys = append(keys, corev1.TaintNodeUnschedulable)
	for _, k := range keys {
		if want[k] && !have[k] {
			add = append(add, noScheduleTaint(k, now))
			have[k] = true
		}
	}
	return add, remove
}

func noScheduleTaint(key string, now time.Time) corev1.Taint {
	at := metav1.NewTime(now)
	return corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &at}
}

// noExecute is the set of this controller's NoExecute taints on a node.
type noExecute uint8

const (
	notReadyNoExecute noExecute = 1 << iota
	unreachableNoExecute
)

// noExecuteOf reads the not-ready/unreachable NoExecute taints of a node, and
// the latest timeAdded among them (zero if none has one).
func noExecuteOf(node *corev1.Node) (noExecute, time.Time) {
	var set noExecute
	var latest time.Time
	for _, t := range node.Spec.Taints {
		if t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		switch t.Key {
		case corev1.TaintNodeNotReady:
			set |= notReadyNoExecute
		case corev1.TaintNodeUnreachable:
			set |= unreachableNoExecute
		default:
			continue
		}
		if t.TimeAdded != nil && t.TimeAdded.After(latest) {
			latest = t.TimeAdded.Time
		}
	}
	return set, latest
}

// noExecuteFor is the NoExecute taint a Ready status calls for: not-ready for
// False, unreachable for Unknown, none otherwise.
func noExecuteFor(s corev1.ConditionStatus) noExecute {
	switch s {
	case corev1.ConditionFalse:
		return notReadyNoExecute
	case corev1.ConditionUnknown:
		return unreachableNoExecute
	}
	return 0
}

// taints turns the set into NoExecute taints (not-ready first), stamped with
// timeAdded = at unless at is zero.
func (s noExecute) taints(at time.Time) []corev1.Taint {
	var out []corev1.Taint
	for _, k := range []struct {
		bit noExecute
		key string
	}{{notReadyNoExecute, corev1.TaintNodeNotReady}, {unreachableNoExecute, corev1.TaintNodeUnreachable}} {
		if s&k.bit == 0 {
			continue
		}
		t := corev1.Taint{Key: k.key, Effect: corev1.TaintEffectNoExecute}
		if !at.IsZero() {
			ta := metav1.NewTime(at)
			t.TimeAdded = &ta
		}
		out = append(out, t)
	}
	return out
}

// key names the taint of a one-element set ("" for none, "both" for both).
func (s noExecute) key() string {
	switch s {
	case 0:
		return ""
	case notReadyNoExecute:
		return corev1.TaintNodeNotReady
	case unreachableNoExecute:
		return corev1.TaintNodeUnreachable
	}
	return corev1.TaintNodeNotReady + "," + corev1.TaintNodeUnreachable
}
