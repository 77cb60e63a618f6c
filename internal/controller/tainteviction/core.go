package tainteviction

import (
	"container/heap"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeplane/nodeplane/internal/podcondition"
)

// Names the controller writes (SPEC TEC-5, §10.4, §10.5).
const (
	// ControllerName is the --controllers name and the event source component.
	ControllerName = "taint-eviction-controller"
	// EventReason is the reason of both events the controller emits.
	EventReason = "TaintManagerEviction"
	// ConditionReason and ConditionMessage go on the DisruptionTarget
	// condition added before the deletion.
	ConditionReason  = "DeletionByTaintManager"
	ConditionMessage = "Taint manager: deleting due to NoExecute taint"
	// MetricPodDeletions counts successful deletions;
	// MetricPodDeletionDuration observes seconds from Eviction.At to the
	// successful delete (buckets 0.005…240 s).
	MetricPodDeletions        = "taint_eviction_controller_pod_deletions_total"
	MetricPodDeletionDuration = "taint_eviction_controller_pod_deletion_duration_seconds"
)

// PodRef names a pod; UID tells apart pods that reuse a name.
type PodRef struct {
	Namespace string
	Name      string
	UID       types.UID
	NodeName  string
}

// String is "<namespace>/<name>", as in the event messages.
func (p PodRef) String() string { return p.Namespace + "/" + p.Name }

// RefOf returns the PodRef of pod.
func RefOf(pod *corev1.Pod) PodRef {
	return PodRef{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, NodeName: pod.Spec.NodeName}
}

// Event is a Normal event to record on the pod.
type Event struct {
	Pod     PodRef
	Type    string
	Reason  string
	Message string
}

func cancelEvent(p PodRef) Event {
	return Event{Pod: p, Type: corev1.EventTypeNormal, Reason: EventReason, Message: fmt.Sprintf("Cancelling deletion of Pod %s", p)}
}

// Eviction is a pod whose time has come. The shell emits Event, then (up to
// five attempts) gets the pod, adds Condition with SetCondition and patches
// the status if it changed, and deletes the pod with default options
// (graceful; not the Eviction API). It reports a failure with Failed.
type Eviction struct {
	Pod PodRef
	// At is when the eviction became due.
	At time.Time
	// Taint is the NoExecute taint behind it: the untolerated one, or the
	// one whose toleration ran out first (for logs and the simulation's
	// "every eviction explained by a taint").
	Taint     corev1.Taint
	Event     Event
	Condition corev1.PodCondition
}

// Pending is a scheduled eviction, for tests and the debug view.
type Pending struct {
	Pod PodRef
	At  time.Time
}

type entry struct {
	pod   PodRef
	at    time.Time
	taint corev1.Taint
	fired bool
	index int // position in the heap while not fired
}

type seenTaint struct {
	taint     corev1.Taint
	firstSeen time.Time
}

// Core holds the NoExecute taints of the tainted nodes and the pending
// evictions. It is not safe for concurrent use: the shell serialises calls.
//
// The shell feeds it every node add/update (ObserveNode with all pods bound
// to the node), node delete (ForgetNode), pod add/update (ObservePod) and pod
// delete (ForgetPod), emits the returned events, and after each call runs
// Due(now) and arms a timer for NextDue. Repeating an observation changes
// nothing.
type Core struct {
	nodes   map[string][]seenTaint
	entries map[types.UID]*entry
	byNode  map[string]map[types.UID]*entry
	queue   deadlines
}

// New returns an empty Core.
func New() *Core {
	return &Core{
		nodes:   map[string][]seenTaint{},
		entries: map[types.UID]*entry{},
		byNode:  map[string]map[types.UID]*entry{},
	}
}

// ObserveNode records node's NoExecute taints and decides for every pod
// bound to it. pods must be all the pods bound to the node as the cache
// shows them; a pending eviction of a pod not among them is cancelled.
func (c *Core) ObserveNode(now time.Time, node *corev1.Node, pods []*corev1.Pod) []Event {
	taints := c.updateTaints(now, node)
	if len(taints) == 0 && len(c.byNode[node.Name]) == 0 {
		return nil // the common case: an untainted node with nothing pending
	}
	present := make(map[types.UID]bool, len(pods))
	var events []Event
	for _, pod := range pods {
		if pod.Spec.NodeName != node.Name {
			continue
		}
		present[pod.UID] = true
		events = append(events, c.apply(now, pod, taints)...)
	}
	for uid, e := range c.byNode[node.Name] {
		if present[uid] {
			continue
		}
		if ev, ok := c.remove(e); ok {
			events = append(events, ev)
		}
	}
	sortEvents(events)
	return events
}

// ForgetNode drops a deleted node's taints. As upstream, pending evictions of
// its pods keep running (pod GC removes the pods of a deleted node anyway).
func (c *Core) ForgetNode(name string) {
	delete(c.nodes, name)
}

// ObservePod decides for one added or updated pod against the taints its
// node had when last observed. A pod of a node that has no NoExecute taint
// or was never observed is left alone (its pending eviction, if any, is
// settled by ObserveNode).
func (c *Core) ObservePod(now time.Time, pod *corev1.Pod) []Event {
	if pod.Spec.NodeName == "" {
		return nil
	}
	if e := c.entries[pod.UID]; e != nil && pod.DeletionTimestamp != nil {
		c.remove(e)
		return nil
	}
	taints, ok := c.nodes[pod.Spec.NodeName]
	if !ok {
		return nil
	}
	return c.apply(now, pod, c.since(taints))
}

// ForgetPod drops a deleted pod. If its eviction was still pending the
// "Cancelling deletion" event is returned (TEC-4).
func (c *Core) ForgetPod(uid types.UID) []Event {
	e := c.entries[uid]
	if e == nil {
		return nil
	}
	if ev, ok := c.remove(e); ok {
		return []Event{ev}
	}
	return nil
}

// Due returns the evictions whose time is not after now, earliest first, and
// marks them fired: they are not returned again, nor rescheduled by later
// observations, until the pod is seen terminating or gone (the entry is then
// dropped) or the shell reports a failure.
func (c *Core) Due(now time.Time) []Eviction {
	var out []Eviction
	for c.queue.Len() > 0 && !c.queue[0].at.After(now) {
		e := heap.Pop(&c.queue).(*entry)
		e.fired = true
		out = append(out, Eviction{
			Pod:   e.pod,
			At:    e.at,
			Taint: e.taint,
			Event: Event{
				Pod: e.pod, Type: corev1.EventTypeNormal, Reason: EventReason,
				Message: fmt.Sprintf("Marking for deletion Pod %s", e.pod),
			},
			Condition: corev1.PodCondition{
				Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
				Reason: ConditionReason, Message: ConditionMessage,
			},
		})
	}
	return out
}

// Failed reschedules a fired eviction the shell could not carry out, at
// retryAt. It does nothing if the pod is no longer tracked (it was deleted,
// or observed since then no longer to be evicted).
func (c *Core) Failed(uid types.UID, retryAt time.Time) {
	e := c.entries[uid]
	if e == nil || !e.fired {
		return
	}
	e.fired = false
	e.at = retryAt
	heap.Push(&c.queue, e)
}

// NextDue is the time of the earliest pending eviction.
func (c *Core) NextDue() (time.Time, bool) {
	if c.queue.Len() == 0 {
		return time.Time{}, false
	}
	return c.queue[0].at, true
}

// Pending lists the evictions not yet due, earliest first.
func (c *Core) Pending() []Pending {
	out := make([]Pending, 0, c.queue.Len())
	for _, e := range c.queue {
		out = append(out, Pending{Pod: e.pod, At: e.at})
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].At.Equal(out[j].At) {
			return out[i].At.Before(out[j].At)
		}
		return out[i].Pod.String() < out[j].Pod.String()
	})
	return out
}

// updateTaints stores node's NoExecute taints, keeping the first-seen time
// of those it already had, and returns them with their clock starts. A node
// left with none is forgotten.
func (c *Core) updateTaints(now time.Time, node *corev1.Node) []Taint {
	prev := c.nodes[node.Name]
	var seen []seenTaint
	for _, t := range node.Spec.Taints {
		if t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		first := now
		for _, p := range prev {
			if p.taint.Key == t.Key && p.taint.Value == t.Value && p.taint.Effect == t.Effect {
				first = p.firstSeen
				break
			}
		}
		seen = append(seen, seenTaint{taint: t, firstSeen: first})
	}
	if len(seen) == 0 {
		delete(c.nodes, node.Name)
		return nil
	}
	c.nodes[node.Name] = seen
	return c.since(seen)
}

// since gives each taint its clock start: the earlier of when this Core
// first saw the taint and the end of the second its timeAdded names.
//
// timeAdded reaches clients truncated to the second (JSON and protobuf both
// carry whole seconds), so the taint really went on somewhere in
// [timeAdded, timeAdded+1s). Counting from timeAdded itself evicted up to a
// second before the toleration had run (issue 12); counting from the end of
// that second never does. A taint this Core sees being added is seen after
// it went on, so its first sight — usually a few milliseconds after the
// write, well within that second — is a safe and closer start; after a
// restart or failover the first sight is late and the end of the timeAdded
// second is used, so the new leader keeps the old deadline (SPEC P3-3) to
// within a second, never earlier. A timeAdded after the first sight (clock
// skew) counts from the first sight.
func (c *Core) since(seen []seenTaint) []Taint {
	out := make([]Taint, len(seen))
	for i, s := range seen {
		start := s.firstSeen
		if s.taint.TimeAdded != nil {
			if end := s.taint.TimeAdded.Time.Truncate(time.Second).Add(time.Second); end.Before(start) {
				start = end
			}
		}
		out[i] = Taint{Taint: s.taint, Since: start}
	}
	return out
}

// apply updates pod's pending eviction from its decision.
func (c *Core) apply(now time.Time, pod *corev1.Pod, taints []Taint) []Event {
	e := c.entries[pod.UID]
	if pod.DeletionTimestamp != nil {
		if e != nil {
			c.remove(e)
		}
		return nil
	}
	d := Decide(now, taints, pod)
	if e != nil && e.fired {
		// Deleted already (or being retried): never again, but forget it
		// once the pod would no longer be evicted.
		if d.Verdict == Stay {
			c.remove(e)
		}
		return nil
	}
	switch d.Verdict {
	case Stay:
		if e != nil {
			if ev, ok := c.remove(e); ok {
				return []Event{ev}
			}
		}
	case EvictNow:
		if e == nil {
			c.add(RefOf(pod), now, d.Taint)
		} else if e.at.After(now) {
			e.at, e.taint = now, d.Taint
			heap.Fix(&c.queue, e.index)
		}
	case EvictAt:
		if e == nil {
			c.add(RefOf(pod), d.At, d.Taint)
		}
		// An eviction already pending keeps its time (upstream quirk, see
		// the package documentation).
	}
	return nil
}

func (c *Core) add(p PodRef, at time.Time, taint corev1.Taint) {
	e := &entry{pod: p, at: at, taint: taint}
	c.entries[p.UID] = e
	if c.byNode[p.NodeName] == nil {
		c.byNode[p.NodeName] = map[types.UID]*entry{}
	}
	c.byNode[p.NodeName][p.UID] = e
	heap.Push(&c.queue, e)
}

// remove drops e; if it was still pending it returns the cancel event.
func (c *Core) remove(e *entry) (Event, bool) {
	delete(c.entries, e.pod.UID)
	if m := c.byNode[e.pod.NodeName]; m != nil {
		delete(m, e.pod.UID)
		if len(m) == 0 {
			delete(c.byNode, e.pod.NodeName)
		}
	}
	if e.fired {
		return Event{}, false
	}
	heap.Remove(&c.queue, e.index)
	return cancelEvent(e.pod), true
}

func sortEvents(events []Event) {
	sort.SliceStable(events, func(i, j int) bool { return events[i].Pod.String() < events[j].Pod.String() })
}

// SetCondition is podcondition.Set (kept for callers of this package).
func SetCondition(status *corev1.PodStatus, c corev1.PodCondition, now time.Time) bool {
	return podcondition.Set(status, c, now)
}

// deadlines is a min-heap of pending entries by time, then pod name.
type deadlines []*entry

func (q deadlines) Len() int { return len(q) }
func (q deadlines) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].pod.String() < q[j].pod.String()
}
func (q deadlines) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index = i
	q[j].index = j
}
func (q *deadlines) Push(x any) {
	e := x.(*entry)
	e.index = len(*q)
	*q = append(*q, e)
}
func (q *deadlines) Pop() any {
	old := *q
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	e.index = -1
	*q = old[:n-1]
	return e
}
