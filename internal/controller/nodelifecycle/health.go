package nodelifecycle

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition reasons and messages this controller writes (SPEC §10.3).
const (
	ReasonStatusUnknown       = "NodeStatusUnknown"
	MessageStatusUnknown      = "Kubelet stopped posting node status."
	ReasonStatusNeverUpdated  = "NodeStatusNeverUpdated"
	MessageStatusNeverUpdated = "Kubelet never posted node status."
)

// unknownConditions are the conditions set to Unknown when a node goes
// silent (SPEC NLC-7); NetworkUnavailable and custom conditions are not.
var unknownConditions = []corev1.NodeConditionType{
	corev1.NodeReady,
	corev1.NodeMemoryPressure,
	corev1.NodeDiskPressure,
	corev1.NodePIDPressure,
}

// health is what the core remembers of one node's signs of life (SPEC NLC-6).
// Every time in it comes from the controller's own clock (the now given to
// Monitor); timestamps written by the node are only compared with earlier
// values written by the same node, never with the controller's clock.
type health struct {
	// probe is when the controller last saw a sign of life: a new Ready
	// heartbeat or a lease renewal.
	probe time.Time
	// ready is the Ready condition as last seen, or as this controller last
	// wrote it (ours, at oursAt); nil if the node had none.
	ready  *corev1.NodeCondition
	ours   bool
	oursAt time.Time
	// lease and renew: whether a Lease was seen, and its last renewTime.
	lease bool
	renew *metav1.MicroTime
}

// neverAlive reports a node that has shown no sign of life at all: no Ready
// condition and no Lease. (Once this controller marks it Unknown it has a
// Ready condition, and nothing more to be marked.)
func (h *health) neverAlive() bool {
	return h.ready == nil && !h.lease
}

// firstProbe is where a node's grace period starts when the controller
// first sees it (a new node, or every node after a start or a failover):
// now, except for a node without a Ready condition, whose startup grace
// period runs from its creation as upstream's does (SPEC NLC-6) — a Node
// made by hand long ago is marked Unknown on the first pass. A creation time
// in the future (clock skew) counts as now.
func firstProbe(node *corev1.Node, now time.Time) time.Time {
	created := node.CreationTimestamp.Time
	if readyCondition(node) != nil || created.IsZero() || created.After(now) {
		return now
	}
	return created
}

// readyCondition returns the node's Ready condition, or nil.
func readyCondition(node *corev1.Node) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// readyStatus is the node's Ready status, "" if it has no Ready condition.
func readyStatus(node *corev1.Node) corev1.ConditionStatus {
	if c := readyCondition(node); c != nil {
		return c.Status
	}
	return ""
}

// observe folds one observation of a node and its lease into h (SPEC NLC-6
// rules 3 and 4) and reports whether it was a sign of life. A new Ready
// heartbeat, a Ready condition appearing, and a lease seen for the first
// time or with a later renewTime are signs of life; an equal or earlier
// renewTime is not. A Ready condition that vanished counts as one too
// (upstream's "start over"), unless the one remembered is this controller's
// own write that has not reached the view yet.
//
// The probe moves to now for a new Ready heartbeat, and to leaseSeen (when
// the controller's watch delivered the renewal, at or before now) for a
// lease renewal; never backwards.
//
// While the view still shows the Ready condition this controller judged
// the node by (same heartbeat, not Unknown) after its own Unknown write,
// for at most lag since that write, the write is taken to be on its way:
// the view lags, and the node stays Unknown here instead of being marked
// again. Past lag, what the view shows counts.
func (h *health) observe(node *corev1.Node, lease *coordinationv1.Lease, now, leaseSeen time.Time, lag time.Duration) bool {
	alive, probe := false, now
	cur := readyCondition(node)
	switch {
	case h.ready == nil && cur != nil:
		alive = true
	case h.ready != nil && cur == nil:
		alive = !h.ours
	case h.ready != nil && cur != nil:
		alive = !h.ready.LastHeartbeatTime.Equal(&cur.LastHeartbeatTime)
	}
	if (cur != nil && !h.writeOnItsWay(cur, now, lag)) || !h.ours {
		h.ready, h.ours = copyCondition(cur), false
	}
	if lease != nil {
		// Only a later renewTime replaces the remembered one, so a lease
		// going back in time is not a sign of life until it passes the
		// latest value seen.
		if r := lease.Spec.RenewTime; !h.lease || h.renew.Before(r) {
			if !alive {
				probe = leaseSeen
			}
			h.lease, h.renew, alive = true, r.DeepCopy(), true
		}
	}
	if alive && probe.After(h.probe) {
		h.probe = probe
	}
	return alive
}

// writeOnItsWay reports whether cur, the Ready condition in the view, is
// still the one this controller marked Unknown less than lag ago.
func (h *health) writeOnItsWay(cur *corev1.NodeCondition, now time.Time, lag time.Duration) bool {
	return h.ours && h.ready != nil && cur.Status != corev1.ConditionUnknown &&
		cur.LastHeartbeatTime.Equal(&h.ready.LastHeartbeatTime) && now.Sub(h.oursAt) < lag
}

func copyCondition(c *corev1.NodeCondition) *corev1.NodeCondition {
	if c == nil {
		return nil
	}
	cc := *c
	return &cc
}

// gracePeriod is G for a node that has posted a Ready condition and S for one
// that has not (SPEC NLC-6).
func (c *Core) gracePeriod(n *nodeState) time.Duration {
	if !n.hasReady {
		return c.cfg.NodeStartupGracePeriod
	}
	return c.cfg.NodeMonitorGracePeriod
}

// markUnknown returns a copy of node with Ready, MemoryPressure, DiskPressure
// and PIDPressure set to Unknown as upstream does (SPEC NLC-7): a missing
// condition is appended with NodeStatusNeverUpdated and the node's creation
// time as heartbeat; a present one not yet Unknown gets NodeStatusUnknown and
// keeps its heartbeat; an Unknown one is left alone. Every changed condition's
// lastTransitionTime is now. It returns nil when the Ready condition would not
// change (already Unknown): then upstream writes nothing, even if another of
// the four is not Unknown yet.
func markUnknown(node *corev1.Node, now time.Time) *corev1.Node {
	if r := readyCondition(node); r != nil && r.Status == corev1.ConditionUnknown {
		return nil
	}
	out := node.DeepCopy()
	at := metav1.NewTime(now)
	for _, t := range unknownConditions {
		found := false
		for i := range out.Status.Conditions {
			c := &out.Status.Conditions[i]
			if c.Type != t {
				continue
			}
			found = true
			if c.Status != corev1.ConditionUnknown {
				c.Status = corev1.ConditionUnknown
				c.Reason = ReasonStatusUnknown
				c.Message = MessageStatusUnknown
				c.LastTransitionTime = at
			}
			break
		}
		if !found {
			out.Status.Conditions = append(out.Status.Conditions, corev1.NodeCondition{
				Type:               t,
				Status:             corev1.ConditionUnknown,
				Reason:             ReasonStatusNeverUpdated,
				Message:            MessageStatusNeverUpdated,
				LastHeartbeatTime:  node.CreationTimestamp,
				LastTransitionTime: at,
			})
		}
	}
	return out
}
