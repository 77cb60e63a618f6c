package replicaset

import (
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// DeletionCostAnnotation ranks pods for deletion: lower cost goes first
// (an int32; missing or invalid counts as 0).
const DeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// Victims returns the n pods of pods to delete first when scaling down, in
// order. related are other active pods of the same owner family (sibling
// ReplicaSets under one Deployment); with pods they count how crowded each
// node is. The order, as upstream's:
//
//  1. not yet bound to a node;
//  2. phase Pending, then Unknown, then Running;
//  3. not ready;
//  4. lower pod-deletion-cost;
//  5. on a node with more pods of the family;
//  6. ready for a shorter time;
//  7. more restarts of any one container;
//  8. created later;
//  9. name (nodeplane: so equal pods are chosen the same way every time).
func Victims(pods, related []*corev1.Pod, n int) []*corev1.Pod {
	if n <= 0 {
		return nil
	}
	onNode := map[string]int{}
	seen := map[*corev1.Pod]bool{}
	for _, group := range [][]*corev1.Pod{pods, related} {
		for _, p := range group {
			if p.Spec.NodeName != "" && !seen[p] {
				seen[p] = true
				onNode[p.Spec.NodeName]++
			}
		}
	}
	ranked := make([]victim, len(pods))
	for i, p := range pods {
		ranked[i] = victim{pod: p, crowd: onNode[p.Spec.NodeName], cost: deletionCost(p), restarts: maxRestarts(p)}
	}
	sort.SliceStable(ranked, func(i, j int) bool { return ranked[i].before(&ranked[j]) })
	n = min(n, len(ranked))
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = ranked[i].pod
	}
	return out
}

type victim struct {
	pod      *corev1.Pod
	crowd    int
	cost     int32
	restarts int32
}

var phaseOrder = map[corev1.PodPhase]int{corev1.PodPending: 0, corev1.PodUnknown: 1, corev1.PodRunning: 2}

// before reports whether v should be deleted before w.
func (v *victim) before(w *victim) bool {
	a, b := v.pod, w.pod
	if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	if pa, pb := phaseOrder[a.Status.Phase], phaseOrder[b.Status.Phase]; pa != pb {
		return pa < pb
	}
	ra, rb := PodReady(a), PodReady(b)
	if ra != rb {
		return !ra
	}
	if v.cost != w.cost {
		return v.cost < w.cost
	}
	if v.crowd != w.crowd {
		return v.crowd > w.crowd
	}
	if ra && rb {
		ta, tb := readyCondition(a).LastTransitionTime, readyCondition(b).LastTransitionTime
		if !ta.Equal(&tb) {
			// Ready for a shorter time = became ready later; a missing
			// time counts as latest.
			if ta.IsZero() || tb.IsZero() {
				return ta.IsZero()
			}
			return tb.Before(&ta)
		}
	}
	if v.restarts != w.restarts {
		return v.restarts > w.restarts
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	return a.Name < b.Name
}

func deletionCost(p *corev1.Pod) int32 {
	v, err := strconv.ParseInt(p.Annotations[DeletionCostAnnotation], 10, 32)
	if err != nil {
		return 0
	}
	return int32(v)
}

func maxRestarts(p *corev1.Pod) int32 {
	var m int32
	for _, s := range p.Status.ContainerStatuses {
		m = max(m, s.RestartCount)
	}
	return m
}
