// Package nodestatus computes and posts the node agent's NodeStatus (SPEC
// KUB-5..KUB-10): capacity and allocatable, addresses, node info, the
// MemoryPressure/DiskPressure/PIDPressure/Ready conditions with the upstream
// reasons and messages, and the node events that go with their changes.
//
// Compute is pure: it takes the Node as last seen, what the agent observed of
// its host, and now, and returns the new status and the events to record.
// Updater is the thin shell that runs it every nodeStatusUpdateFrequency and
// patches the status when something changed or nodeStatusReportFrequency has
// passed. The package never writes Ready=Unknown: only the lifecycle
// controller does (KUB-10).
package nodestatus

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Observation is what the agent saw of its host for one status pass.
type Observation struct {
	Capacity    corev1.ResourceList
	Allocatable corev1.ResourceList
	// NodeInfo carries kernel, OS image, IDs, architecture and versions.
	NodeInfo  corev1.NodeSystemInfo
	Addresses []corev1.NodeAddress
	// ExternalCloudProvider (--cloud-provider=external): once the Node has
	// addresses they are the cloud node controller's, and Addresses only
	// fills in a Node that has none (as the kubelet does).
	ExternalCloudProvider bool
	// DaemonPort is where the agent serves logs (status.daemonEndpoints).
	DaemonPort int32
	// Pressure from the eviction signals against evictionHard.
	MemoryPressure, DiskPressure, PIDPressure bool
	// VolumesInUse are the attachable volumes the node's pods use
	// (status.volumesInUse, sorted).
	VolumesInUse []corev1.UniqueVolumeName
	// NotReady lists why the node cannot run pods (runtime down, shutting
	// down...); empty means ready as far as the agent knows.
	NotReady []string
}

// Event is a node event to record (type, reason, message).
type Event struct {
	Type, Reason, Message string
}

// Condition reasons and messages (SPEC §3.4).
const (
	ReasonReady    = "KubeletReady"
	ReasonNotReady = "KubeletNotReady"
	MessageReady   = "kubelet is posting ready status"
)

type pressure struct {
	condType                          corev1.NodeConditionType
	trueReason, trueMsg, trueEvent    string
	falseReason, falseMsg, falseEvent string
	observed                          func(Observation) bool
}

var pressures = []pressure{
	{corev1.NodeMemoryPressure,
		"KubeletHasInsufficientMemory", "kubelet has insufficient memory available", "NodeHasInsufficientMemory",
		"KubeletHasSufficientMemory", "kubelet has sufficient memory available", "NodeHasSufficientMemory",
		func(o Observation) bool { return o.MemoryPressure }},
	{corev1.NodeDiskPressure,
		"KubeletHasDiskPressure", "kubelet has disk pressure", "NodeHasDiskPressure",
		"KubeletHasNoDiskPressure", "kubelet has no disk pressure", "NodeHasNoDiskPressure",
		func(o Observation) bool { return o.DiskPressure }},
	{corev1.NodePIDPressure,
		"KubeletHasInsufficientPID", "kubelet has insufficient PID available", "NodeHasInsufficientPID",
		"KubeletHasSufficientPID", "kubelet has sufficient PID available", "NodeHasSufficientPID",
		func(o Observation) bool { return o.PIDPressure }},
}

// Compute returns node's next status from obs at now, and the events the
// change calls for. node may be nil (first registration).
func Compute(node *corev1.Node, obs Observation, now time.Time) (corev1.NodeStatus, []Event) {
	var status corev1.NodeStatus
	name := ""
	if node != nil {
		status = *node.Status.DeepCopy()
		name = node.Name
	}
	var events []Event
	nowT := metav1.NewTime(now)

	if !obs.ExternalCloudProvider || len(status.Addresses) == 0 {
		status.Addresses = append([]corev1.NodeAddress(nil), obs.Addresses...)
	}
	status.Capacity = obs.Capacity.DeepCopy()
	status.Allocatable = obs.Allocatable.DeepCopy()

	if old := status.NodeInfo.BootID; old != "" && obs.NodeInfo.BootID != "" && old != obs.NodeInfo.BootID {
		events = append(events, Event{corev1.EventTypeWarning, "NodeRebooted",
			fmt.Sprintf("Node %s has been rebooted, boot id: %s", name, obs.NodeInfo.BootID)})
	}
	status.NodeInfo = obs.NodeInfo
	status.VolumesInUse = append([]corev1.UniqueVolumeName(nil), obs.VolumesInUse...)
	status.DaemonEndpoints = corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: obs.DaemonPort}}

	for _, p := range pressures {
		st, reason, msg, ev := corev1.ConditionFalse, p.falseReason, p.falseMsg, p.falseEvent
		if p.observed(obs) {
			st, reason, msg, ev = corev1.ConditionTrue, p.trueReason, p.trueMsg, p.trueEvent
		}
		if setCondition(&status, p.condType, st, reason, msg, nowT) {
			events = append(events, Event{corev1.EventTypeNormal, ev, statusMessage(name, ev)})
		}
	}

	readyStatus, reason, msg := corev1.ConditionTrue, ReasonReady, MessageReady
	if errs := notReadyErrors(obs); len(errs) > 0 {
		readyStatus, reason = corev1.ConditionFalse, ReasonNotReady
		msg = errs[0]
		if len(errs) > 1 {
			msg = "[" + strings.Join(errs, ", ") + "]"
		}
	}
	if setCondition(&status, corev1.NodeReady, readyStatus, reason, msg, nowT) {
		ev := "NodeReady"
		if readyStatus != corev1.ConditionTrue {
			ev = "NodeNotReady"
		}
		events = append(events, Event{corev1.EventTypeNormal, ev, statusMessage(name, ev)})
	}
	keepReadyLast(&status)
	return status, events
}

// InitialEvents are the events announcing the conditions of a Node that was
// just created with its first status (each condition is new, so each counts
// as a transition).
func InitialEvents(n *corev1.Node) []Event {
	var out []Event
	for _, c := range n.Status.Conditions {
		reason := ""
		for _, p := range pressures {
			if p.condType == c.Type {
				reason = p.falseEvent
				if c.Status == corev1.ConditionTrue {
					reason = p.trueEvent
				}
			}
		}
		if c.Type == corev1.NodeReady {
			reason = "NodeNotReady"
			if c.Status == corev1.ConditionTrue {
				reason = "NodeReady"
			}
		}
		if reason != "" {
			out = append(out, Event{corev1.EventTypeNormal, reason, statusMessage(n.Name, reason)})
		}
	}
	return out
}

// SchedulabilityEvent is the event for a change of spec.unschedulable
// (NodeSchedulable / NodeNotSchedulable), or nil when there is none. Before
// the first pass (was == nil) the node counts as schedulable, as the
// kubelet's does, so a schedulable node records nothing at start.
func SchedulabilityEvent(name string, was *bool, now bool) *Event {
	if (was == nil && !now) || (was != nil && *was == now) {
		return nil
	}
	reason := "NodeSchedulable"
	if now {
		reason = "NodeNotSchedulable"
	}
	return &Event{corev1.EventTypeNormal, reason, statusMessage(name, reason)}
}

func statusMessage(node, reason string) string {
	return fmt.Sprintf("Node %s status is now: %s", node, reason)
}

// requiredCapacity are the resources a node must report to be Ready.
var requiredCapacity = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods}

func notReadyErrors(obs Observation) []string {
	errs := append([]string(nil), obs.NotReady...)
	var missing []string
	for _, r := range requiredCapacity {
		if _, ok := obs.Capacity[r]; !ok {
			missing = append(missing, string(r))
		}
	}
	if len(missing) > 0 {
		errs = append(errs, "Missing node capacity for resources: "+strings.Join(missing, ", "))
	}
	return errs
}

// setCondition sets a condition: heartbeat always now, transition time now
// only when the status changes (a new condition counts as a change from
// Unknown). It reports whether the status changed.
func setCondition(status *corev1.NodeStatus, t corev1.NodeConditionType, st corev1.ConditionStatus, reason, msg string, now metav1.Time) bool {
	for i := range status.Conditions {
		c := &status.Conditions[i]
		if c.Type != t {
			continue
		}
		changed := c.Status != st
		if changed {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason, c.Message, c.LastHeartbeatTime = st, reason, msg, now
		return changed
	}
	status.Conditions = append(status.Conditions, corev1.NodeCondition{
		Type: t, Status: st, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now,
	})
	return true
}

// keepReadyLast moves Ready to the end of the list, as the kubelet keeps it.
func keepReadyLast(status *corev1.NodeStatus) {
	for i, c := range status.Conditions {
		if c.Type == corev1.NodeReady && i != len(status.Conditions)-1 {
			status.Conditions = append(append(status.Conditions[:i:i], status.Conditions[i+1:]...), c)
			return
		}
	}
}

// Changed reports whether b differs from a in anything but the conditions'
// heartbeat times (SPEC KUB-5).
func Changed(a, b corev1.NodeStatus) bool {
	return !apiequality.Semantic.DeepEqual(withoutHeartbeats(a), withoutHeartbeats(b))
}

func withoutHeartbeats(s corev1.NodeStatus) corev1.NodeStatus {
	s.Conditions = append([]corev1.NodeCondition(nil), s.Conditions...)
	for i := range s.Conditions {
		s.Conditions[i].LastHeartbeatTime = metav1.Time{}
	}
	return s
}
