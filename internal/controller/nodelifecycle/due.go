package nodelifecycle

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Marking a node at the end of its grace period, not at the next pass.
//
// A monitor pass marks a node Unknown once its grace period has ended. With
// a pass every NodeMonitorPeriod, a node whose grace ends just after a pass
// waits up to a whole period for the next one, and then for that pass to
// reach it (at 100,000 nodes a pass takes about a second). So each pass
// also plans the nodes whose grace ends before the next pass is expected
// (plan), and the shell asks every 100 ms for those whose grace has
// ended since (DueNodes) and has them judged at once from their current
// Node and Lease (MonitorDue): a renewal that arrived in between still
// counts, and only those few nodes are looked at.

// dueNode is a node whose grace period ends at at.
type dueNode struct {
	name string
	at   time.Time
}

// dueHorizon is how far ahead of a pass plan looks, in monitor periods:
// two, so that a pass that starts late leaves no node to wait for it.
const dueHorizon = 2

// plan adds the node to the plan if its grace period ends within
// dueHorizon periods of now (horizon) — including one whose grace ends
// exactly now, which this pass did not mark. A monitor pass on a fresh view
// calls it for every node after judging it, then sortDue; on a stale view
// nothing is planned: the next fresh pass gives every node a new grace
// period anyway. Nodes already Unknown, or marked by this controller and not
// yet seen so, are left out (a node past its grace on a fresh view is one of
// those).
func (c *Core) plan(name string, n *nodeState, horizon time.Time) {
	if n.node == nil || n.health.ours || n.status == corev1.ConditionUnknown {
		return
	}
	if at := n.health.probe.Add(c.gracePeriod(n)); !at.After(horizon) {
		c.due = append(c.due, dueNode{name: name, at: at})
	}
}

// sortDue puts the plan in order: earliest first, then by name.
func (c *Core) sortDue() {
	sort.Slice(c.due, func(i, j int) bool {
		if !c.due[i].at.Equal(c.due[j].at) {
			return c.due[i].at.Before(c.due[j].at)
		}
		return c.due[i].name < c.due[j].name
	})
}

// DueNodes names the planned nodes whose grace period has ended by now,
// earliest first. The shell passes their current Node and Lease to
// MonitorDue. It returns nil, without allocating, when no node is due.
func (c *Core) DueNodes(now time.Time) []string {
	var names []string
	for _, d := range c.due {
		if !now.After(d.at) {
			break
		}
		names = append(names, d.name)
	}
	return names
}

// MonitorDue judges the nodes DueNodes named, from observed (their Nodes
// and Leases as the informers show them now), as a monitor pass would:
// signs of life seen since the pass count, a node still past its grace
// period is marked Unknown (StatusUpdates), its zone's state is judged
// again from the last pass's counts with this change (ZoneChanges, limiter
// rates, master disruption mode, the zone metrics) and its NoExecute taint
// is swapped or queued. Carry out the result as a monitor pass's.
//
// Every planned node due by now leaves the plan, judged or not. On a stale
// view (fresh false) nothing is judged and the plan is kept, to be judged
// once the view is fresh again; after a pass on a stale view nothing is
// planned (the next fresh pass gives every node a new grace period). A
// node the last pass did not see, or that changed zone or its exclusion
// from zone statistics since, is left to the next pass, which counts it
// where it belongs now.
func (c *Core) MonitorDue(now time.Time, fresh bool, observed []Observation) PassResult {
	var res PassResult
	if !fresh || !c.fresh {
		return res
	}
	i := 0
	for i < len(c.due) && now.After(c.due[i].at) {
		i++
	}
	c.due = c.due[i:]
	if len(observed) == 0 {
		return res
	}
	counts := c.lastCounts()
	var overdue []overdueNode
	judged := make([]*nodeState, 0, len(observed))
	for _, o := range observed {
		if o.Node == nil {
			continue
		}
		n := c.nodes[o.Node.Name]
		if n == nil || o.Node != n.node && (ZoneKey(o.Node) != n.zone || excludedFromDisruption(o.Node) != n.excluded) {
			continue
		}
		wasReady := n.status == corev1.ConditionTrue
		changed := c.see(n, o.Node)
		c.observe(n, o, changed, now)
		c.observeTaints(n, now)
		if od, ok := c.judge(n, now, true); ok {
			overdue = append(overdue, od)
		}
		if ready := n.status == corev1.ConditionTrue; !n.excluded && ready != wasReady {
			cnt := counts[n.zone]
			if ready {
				cnt[0], cnt[1] = cnt[0]+1, cnt[1]-1
			} else {
				cnt[0], cnt[1] = cnt[0]-1, cnt[1]+1
			}
			counts[n.zone] = cnt
		}
		judged = append(judged, n)
	}
	if len(judged) == 0 {
		return res
	}
	res.StatusUpdates = longestOverdueFirst(overdue)
	for key, cnt := range counts {
		z := c.zones[key]
		z.size, z.unhealthy = cnt[0]+cnt[1], cnt[1]
	}
	c.handleDisruption(counts, now, &res)
	if res.Disruption == DisruptionExited {
		res.FreshGrace = true
	}
	c.publishMetrics(counts, &res)
	if res.Disruption != DisruptionUnchanged {
		// Entering or leaving master disruption mode changes what every
		// node's NoExecute taints should be, not only the judged nodes'.
		judged = c.lastObserved()
	}
	c.decideNoExecute(now, true, judged, &res)
	return res
}

// lastObserved is every known node as last observed (by the last pass, or
// just now by MonitorDue).
func (c *Core) lastObserved() []*nodeState {
	nodes := make([]*nodeState, 0, len(c.nodes))
	for _, n := range c.nodes {
		if n.node != nil {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// lastCounts are the Ready and not-Ready counted nodes per zone as the last
// pass left them (zones with counted nodes only, as a pass's counts).
func (c *Core) lastCounts() map[string][2]int {
	counts := make(map[string][2]int, len(c.zones))
	for key, z := range c.zones {
		if z.size > 0 {
			counts[key] = [2]int{z.size - z.unhealthy, z.unhealthy}
		}
	}
	return counts
}

// see records node, the node's current version, in n and works out what a
// pass reads from it (zone, exclusion, Ready status, NoExecute taints); it
// reports whether node is a new version. Informers replace an object on
// every change and never modify it, so the same pointer is the same
// version: at 100,000 nodes most passes see most nodes unchanged, and
// reading each Node again cost most of a pass (docs/performance.md, "A
// cheaper monitor pass").
func (c *Core) see(n *nodeState, node *corev1.Node) bool {
	if n.node == node {
		return false
	}
	n.node = node
	n.zone, n.excluded = ZoneKey(node), excludedFromDisruption(node)
	r := readyCondition(node)
	n.hasReady, n.viewStatus = r != nil, ""
	if r != nil {
		n.viewStatus = r.Status
	}
	n.taints, n.taintLatest = noExecuteOf(node)
	return true
}

// observe folds o, the node's current Node and Lease, into n's health
// record; a lease renewal counts from when the shell's watch delivered it.
// nodeChanged is see's answer for o.Node. A node whose Node and Lease are
// both the versions already folded in shows no new sign of life, and unless
// this controller's own Unknown write is pending (which can stop being on
// its way as time passes) there is nothing to fold.
func (c *Core) observe(n *nodeState, o Observation, nodeChanged bool, now time.Time) {
	if !nodeChanged && o.Lease == n.lease && !n.health.ours {
		return
	}
	n.lease = o.Lease
	seen := now
	if !o.LeaseSeenAt.IsZero() && o.LeaseSeenAt.Before(now) {
		seen = o.LeaseSeenAt
	}
	n.health.observe(o.Node, o.Lease, now, seen, c.cfg.NodeMonitorGracePeriod)
}

// observeTaints forgets a pending NoExecute change once it shows on the
// node (or after two periods) and returns the latest timeAdded among the
// node's NoExecute taints (see).
func (c *Core) observeTaints(n *nodeState, now time.Time) time.Time {
	if p := n.pending; p != nil && (p.set == n.taints || now.Sub(p.at) > 2*c.cfg.NodeMonitorPeriod) {
		n.pending = nil
	}
	return n.taintLatest
}

// judge sets n's Ready status from n.node (or from this controller's own
// Unknown write not in the view yet) and, on a fresh view, marks the node
// Unknown if its grace period has ended (SPEC NLC-7): it returns the write
// and when the grace ended.
func (c *Core) judge(n *nodeState, now time.Time, fresh bool) (overdueNode, bool) {
	node := n.node
	n.status = n.viewStatus
	if n.health.ours {
		n.status = n.health.ready.Status
	}
	due := n.health.probe.Add(c.gracePeriod(n))
	if !fresh || n.health.ours || !now.After(due) {
		return overdueNode{}, false
	}
	upd := markUnknown(node, now)
	if upd == nil {
		return overdueNode{}, false
	}
	notReady := n.status == corev1.ConditionTrue
	n.health.ready, n.health.ours, n.health.oursAt = copyCondition(readyCondition(upd)), true, now
	n.status = corev1.ConditionUnknown
	if notReady {
		n.retryPods = false
	}
	return overdueNode{StatusUpdate{Node: upd, NotReady: notReady}, due}, true
}
