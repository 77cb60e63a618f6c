package framework

import (
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// EventResource is the kind of object a cluster event is about.
type EventResource string

const (
	// Node events: a node was added, deleted or changed.
	Node EventResource = "Node"
	// Pod events: an assigned (bound or assumed) pod was added, deleted or
	// changed. Changes to the pending pod itself go through Queue.Update.
	Pod EventResource = "Pod"
	// WildCard matches every resource.
	WildCard EventResource = "*"
)

// ActionType is a bit set of what happened to the object.
type ActionType uint32

const (
	Add ActionType = 1 << iota
	Delete
	// UpdateNodeAllocatable: status.allocatable changed.
	UpdateNodeAllocatable
	// UpdateNodeLabel: metadata.labels changed.
	UpdateNodeLabel
	// UpdateNodeTaint: spec.taints or spec.unschedulable changed.
	UpdateNodeTaint
	// UpdateNodeCondition: the type/status of a condition changed (heartbeat
	// timestamps alone are not a change).
	UpdateNodeCondition
	// UpdateNodeAnnotation: metadata.annotations changed.
	UpdateNodeAnnotation
	// UpdatePodLabel: an assigned pod's labels changed.
	UpdatePodLabel
	// UpdatePodScaleDown: an assigned pod's requests went down.
	UpdatePodScaleDown

	// Update is every kind of update.
	Update = UpdateNodeAllocatable | UpdateNodeLabel | UpdateNodeTaint | UpdateNodeCondition |
		UpdateNodeAnnotation | UpdatePodLabel | UpdatePodScaleDown
	// All is every action.
	All = Add | Delete | Update
)

var actionNames = []struct {
	a    ActionType
	name string
}{
	{Add, "Add"}, {Delete, "Delete"}, {UpdateNodeAllocatable, "UpdateNodeAllocatable"},
	{UpdateNodeLabel, "UpdateNodeLabel"}, {UpdateNodeTaint, "UpdateNodeTaint"},
	{UpdateNodeCondition, "UpdateNodeCondition"}, {UpdateNodeAnnotation, "UpdateNodeAnnotation"},
	{UpdatePodLabel, "UpdatePodLabel"}, {UpdatePodScaleDown, "UpdatePodScaleDown"},
}

func (a ActionType) String() string {
	if a == All {
		return "All"
	}
	var parts []string
	for _, n := range actionNames {
		if a&n.a != 0 {
			parts = append(parts, n.name)
		}
	}
	return strings.Join(parts, "|")
}

// ClusterEvent is something that happened in the cluster which may make
// pending pods schedulable.
type ClusterEvent struct {
	Resource   EventResource
	ActionType ActionType
}

// Predefined events the queue uses itself.
var (
	// EventUnschedulableTimeout is used when pods leave the unschedulable set
	// because they waited there too long.
	EventUnschedulableTimeout = ClusterEvent{Resource: WildCard, ActionType: All}
	EventNodeAdd              = ClusterEvent{Resource: Node, ActionType: Add}
	EventNodeDelete           = ClusterEvent{Resource: Node, ActionType: Delete}
	EventAssignedPodAdd       = ClusterEvent{Resource: Pod, ActionType: Add}
	EventAssignedPodDelete    = ClusterEvent{Resource: Pod, ActionType: Delete}
)

func (e ClusterEvent) String() string { return string(e.Resource) + "/" + e.ActionType.String() }

// Match reports whether a plugin registered for e is interested in the event
// o: same resource (or a wildcard on either side) and a common action bit.
func (e ClusterEvent) Match(o ClusterEvent) bool {
	sameResource := e.Resource == WildCard || o.Resource == WildCard || e.Resource == o.Resource
	return sameResource && e.ActionType&o.ActionType != 0
}

// NodeUpdateActions classifies a node update by what changed that can
// matter to scheduling; 0 means nothing did (e.g. a heartbeat-only status
// update), and the caller should not wake pending pods.
func NodeUpdateActions(old, cur *corev1.Node) ActionType {
	var a ActionType
	if !equality.Semantic.DeepEqual(old.Status.Allocatable, cur.Status.Allocatable) {
		a |= UpdateNodeAllocatable
	}
	if !maps.Equal(old.Labels, cur.Labels) {
		a |= UpdateNodeLabel
	}
	if old.Spec.Unschedulable != cur.Spec.Unschedulable || !taintsEqual(old.Spec.Taints, cur.Spec.Taints) {
		a |= UpdateNodeTaint
	}
	if !maps.Equal(conditionStatuses(old), conditionStatuses(cur)) {
		a |= UpdateNodeCondition
	}
	if !maps.Equal(old.Annotations, cur.Annotations) {
		a |= UpdateNodeAnnotation
	}
	return a
}

func taintsEqual(a, b []corev1.Taint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || a[i].Value != b[i].Value || a[i].Effect != b[i].Effect {
			return false
		}
	}
	return true
}

func conditionStatuses(n *corev1.Node) map[corev1.NodeConditionType]corev1.ConditionStatus {
	m := make(map[corev1.NodeConditionType]corev1.ConditionStatus, len(n.Status.Conditions))
	for _, c := range n.Status.Conditions {
		m[c.Type] = c.Status
	}
	return m
}

// AssignedPodUpdateActions classifies an update of an assigned pod: its
// labels changed (topology spreading counts differ) or its requests went down
// (room freed). 0 means neither.
func AssignedPodUpdateActions(old, cur *corev1.Pod) ActionType {
	var a ActionType
	if !maps.Equal(old.Labels, cur.Labels) {
		a |= UpdatePodLabel
	}
	o, _, _ := ComputePodRequests(old)
	c, _, _ := ComputePodRequests(cur)
	if c.MilliCPU < o.MilliCPU || c.Memory < o.Memory || c.EphemeralStorage < o.EphemeralStorage {
		a |= UpdatePodScaleDown
	}
	for name, v := range o.Scalar {
		if c.Scalar[name] < v {
			a |= UpdatePodScaleDown
		}
	}
	return a
}
