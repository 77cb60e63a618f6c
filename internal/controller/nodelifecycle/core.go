package nodelifecycle

import (
	"fmt"
	"sort"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
)

// Core is the node lifecycle controller's decision state machine. It is not
// safe for concurrent use: the shell serialises every call (one mutex around
// Monitor, Taint, the feedback methods and the queries).
//
// Each monitor period the shell calls Monitor with what its informers show;
// every 100 ms it calls Taint. Both return what to write; the shell writes it
// and reports the writes that failed (StatusUpdateFailed, TaintNotApplied,
// PodMarkingFailed). A write that succeeds needs no report: the next Monitor
// sees it on the node.
type Core struct {
	cfg   Config
	nodes map[string]*nodeState
	zones map[string]*zone
	// fresh is the view freshness given to the last Monitor.
	fresh bool
	// disrupted: every zone was fully disrupted at the last judged pass
	// ("master disruption mode", SPEC NLC-20).
	disrupted bool
	// metricZones are the zones whose metrics were last published.
	metricZones map[string]bool
	// due lists, earliest first, the nodes whose grace period ends
	// before the next monitor pass is expected (plan, MonitorDue).
	due []dueNode
	// pass counts monitor passes; a node a pass did not see is gone.
	pass uint64
}

// nodeState is everything the core keeps about one node.
type nodeState struct {
	// node is the object last observed (read-only: it belongs to the
	// informer cache).
	node     *corev1.Node
	zone     string
	excluded bool
	health   health
	// status is the Ready status after the last pass: as observed, or
	// Unknown if this controller just wrote it; "" without a Ready
	// condition.
	status corev1.ConditionStatus
	// taints are the NoExecute taints observed on the node; pending, when
	// set, is what the core last asked for and has not seen yet.
	taints  noExecute
	pending *pendingTaints
	// lease is the Lease last folded into health (read-only, the
	// informer's), to tell a new version from one already seen.
	lease *coordinationv1.Lease
	// What the pass reads from node, worked out once per version of it
	// (see): the Ready status on it, whether it has a Ready condition,
	// and the latest timeAdded of its NoExecute taints.
	viewStatus  corev1.ConditionStatus
	hasReady    bool
	taintLatest time.Time
	// pass is the number of the last pass that observed the node.
	pass uint64
	// retryPods: marking the node's pods NotReady failed; retried on later
	// passes while the node is not Ready.
	retryPods bool
}

type pendingTaints struct {
	set noExecute
	at  time.Time
}

// noExecute is the set of NoExecute taints the core takes the node to have:
// what it last asked for if that is not visible yet, else what it saw.
func (n *nodeState) noExecute() noExecute {
	if n.pending != nil {
		return n.pending.set
	}
	return n.taints
}

// New returns a Core for a valid cfg.
func New(cfg Config) (*Core, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("node lifecycle config: %w", err)
	}
	c := &Core{cfg: cfg, metricZones: map[string]bool{}}
	c.Reset()
	return c, nil
}

// Reset forgets every node, zone, queue and limiter, as a newly elected
// leader must (SPEC P3-3). The next Monitor pass sees every node for the
// first time: it gives each a fresh grace period from that pass's now
// (except a node that never posted status: its startup grace period counts
// from its creation, as upstream's does, so an old hand-made Node is marked
// Unknown at once),
// emits RegisteredNode for each, keeps the NoExecute taints already on the
// nodes (no removal, no second copy, so the taint eviction controller keeps
// counting from their timeAdded), queues the not-Ready nodes that still lack
// one, and starts each zone's limiter as if its last token had gone at the
// latest timeAdded found in the zone — a failover grants no burst.
func (c *Core) Reset() {
	c.nodes = map[string]*nodeState{}
	c.zones = map[string]*zone{}
	c.due = nil
	c.fresh = true
	c.disrupted = false
}

// Observation is one node as the informers show it.
type Observation struct {
	// Node is the cached Node; the core never modifies it.
	Node *corev1.Node
	// Lease is the node's Lease in kube-node-lease, nil if there is none.
	Lease *coordinationv1.Lease
	// LeaseSeenAt is when the shell's watch delivered this version of the
	// Lease, by the controller's clock; zero if unknown. A renewal counts
	// as a sign of life from then instead of from the pass that looks at
	// it, so a node's grace runs from (at most a watch delay after) its
	// renewal, not from up to a monitor period later. A time after the
	// pass's now counts as now.
	LeaseSeenAt time.Time
}

// PassResult is what a monitor pass asks the shell to do. Carry out
// StatusUpdates first (each with its NodeNotReady event and pod marking
// after success), then MarkPodsNotReady and TaintUpdates; events, logs and
// metrics in any order.
type PassResult struct {
	// Registered and Removed are nodes seen for the first time and nodes
	// gone: emit RegisteredNode / RemovingNode on each (SPEC NLC-5).
	Registered, Removed []string
	// StatusUpdates are nodes whose conditions became Unknown (SPEC NLC-7),
	// in the order to write them: the longest overdue first.
	StatusUpdates []StatusUpdate
	// MarkPodsNotReady are nodes whose earlier pod marking failed and that
	// are still not Ready: mark their pods Ready=False again (no node
	// event) (SPEC NLC-9).
	MarkPodsNotReady []string
	// TaintUpdates are NoExecute changes that are not rate limited:
	// removals from Ready nodes or from every node when all zones are
	// down, and not-ready ↔ unreachable swaps (SPEC NLC-13, NLC-20). Write
	// them all, except those for a node whose StatusUpdate failed in this
	// pass: skip those with TaintNotApplied(u, false).
	TaintUpdates []TaintUpdate
	// ZoneChanges are zones whose state changed: log "Controller detected
	// that zone is now in new state" for each.
	ZoneChanges []ZoneChange
	// Disruption says whether the pass entered or left master disruption
	// mode.
	Disruption Disruption
	// FreshGrace: every node got a fresh grace period in this pass (the
	// view turned fresh again, or master disruption mode ended).
	FreshGrace bool
	// Zones are the metric values per zone with counted nodes (SPEC NLC-19);
	// VanishedZones had metrics before and have no counted node now: set
	// them to 0/100/0 and delete their series.
	Zones         []ZoneMetrics
	VanishedZones []string
}

// StatusUpdate asks for one node status write.
type StatusUpdate struct {
	// Node is the observed node with its conditions set to Unknown; write
	// it with UpdateStatus (retrying as SPEC NLC-7 says, re-reading the node
	// and applying the same change with MarkUnknown). If it finally fails,
	// call StatusUpdateFailed and skip NotReady's work.
	Node *corev1.Node
	// NotReady: Ready went from True to Unknown. After the write succeeds,
	// emit NodeNotReady on the node and mark every pod bound to it
	// Ready=False with a NodeNotReady event on each changed pod; if that
	// fails, call PodMarkingFailed.
	NotReady bool
}

// overdueNode is a node found stale in a pass and since when: the end of
// its grace period.
type overdueNode struct {
	update StatusUpdate
	due    time.Time
}

// longestOverdueFirst orders a pass's Unknown writes by how long each node
// has been overdue, the longest first (name order among equals). When a
// zone goes dark, one pass finds the nodes whose grace ended over a whole
// period and writes thousands of them: the nodes found just after their
// grace ended are written last, so no node waits both a full period and a
// full pass of writes.
func longestOverdueFirst(nodes []overdueNode) []StatusUpdate {
	if len(nodes) == 0 {
		return nil
	}
	sort.Slice(nodes, func(i, j int) bool {
		if !nodes[i].due.Equal(nodes[j].due) {
			return nodes[i].due.Before(nodes[j].due)
		}
		return nodes[i].update.Node.Name < nodes[j].update.Node.Name
	})
	out := make([]StatusUpdate, len(nodes))
	for i, n := range nodes {
		out[i] = n.update
	}
	return out
}

// TaintUpdate asks for one change of a node's NoExecute taints, written as
// one patch of spec.taints computed from the current node: add each of Add
// (replacing a taint of the same key and effect), remove each of Remove
// (matched by key and effect).
type TaintUpdate struct {
	Node string
	Zone string
	Add  []corev1.Taint
	// Remove lists taints by key and effect (timeAdded unset).
	Remove []corev1.Taint
	// Ready is the node Ready status the added taint stands for; empty for
	// a pure removal. For an update from Taint, the shell first checks the
	// cached node: if its Ready status is no longer this one (the node
	// recovered since the last pass), it skips the write and calls
	// TaintNotApplied(u, false).
	Ready corev1.ConditionStatus
	// Eviction: the taint was granted by the zone's limiter; count it in
	// node_collector_evictions_total{zone=Zone} once written.
	Eviction bool
}

// ZoneMetrics are the per-zone values of SPEC NLC-19. The shell sets the
// three gauges from them and adds 0 to node_collector_evictions_total{zone}
// so that a new zone's counter exists from its first pass (SPEC NLC-5).
type ZoneMetrics struct {
	Zone string
	// Size is node_collector_zone_size, Unhealthy
	// node_collector_unhealthy_nodes_in_zone, Health
	// node_collector_zone_health (percent of Size that is Ready).
	Size, Unhealthy int
	Health          float64
}

// Monitor runs one monitor pass (SPEC NLC-5..9, NLC-13, NLC-16..21) over
// every node the informers show, at now on the controller's clock.
//
// fresh says whether the shell's view is known to be current (its watches
// are making progress and storage answers; SPEC P3-2). While it is false the
// pass still records signs of life and removes NoExecute taints from Ready
// nodes, but it marks no node Unknown, swaps no taint, keeps every zone's
// state and limiter as they were, and Taint adds nothing. The first pass
// with fresh true again gives every node a fresh grace period.
func (c *Core) Monitor(now time.Time, fresh bool, observed []Observation) PassResult {
	var res PassResult
	turnedFresh := fresh && !c.fresh
	c.fresh = fresh
	res.FreshGrace = turnedFresh

	// The nodes are taken in the informers' order: every list in the
	// result is sorted where it is made, so a pass over 100,000 nodes sorts
	// only what it returns (docs/performance.md, "A cheaper monitor pass").
	c.pass++
	c.due = c.due[:0]
	horizon := now.Add(dueHorizon * c.cfg.NodeMonitorPeriod)
	var overdue []overdueNode
	counts := map[string][2]int{}
	members := map[string]int{}
	latestTaint := map[string]time.Time{}
	states := make([]*nodeState, 0, len(observed))
	for _, o := range observed {
		node := o.Node
		if node == nil {
			continue
		}
		name := node.Name
		n, known := c.nodes[name]
		if !known {
			n = &nodeState{health: health{probe: firstProbe(node, now)}}
			c.nodes[name] = n
			res.Registered = append(res.Registered, name)
		}
		n.pass = c.pass
		states = append(states, n)
		oldZone := n.zone
		changed := c.see(n, node)
		key := n.zone
		if known && oldZone != key {
			if z := c.zones[oldZone]; z != nil {
				z.queue.remove(name)
			}
		}
		if c.zones[key] == nil {
			c.zones[key] = c.newZone(key, now)
		}
		members[key]++
		c.observe(n, o, changed, now)
		if turnedFresh && !n.health.neverAlive() {
			n.health.probe = now
		}
		latest := c.observeTaints(n, now)
		if latest.After(latestTaint[key]) {
			latestTaint[key] = latest
		}
		if od, ok := c.judge(n, now, fresh); ok {
			overdue = append(overdue, od)
		}
		if fresh {
			c.plan(name, n, horizon)
		}
		switch {
		case n.status == corev1.ConditionTrue:
			n.retryPods = false
		case n.retryPods && n.status != "":
			res.MarkPodsNotReady = append(res.MarkPodsNotReady, name)
			n.retryPods = false
		}

		if !n.excluded {
			cnt := counts[key]
			if n.status == corev1.ConditionTrue {
				cnt[0]++
			} else {
				cnt[1]++
			}
			counts[key] = cnt
		}
	}
	for name, n := range c.nodes {
		if n.pass != c.pass {
			res.Removed = append(res.Removed, name)
		}
	}
	sort.Strings(res.Removed)
	for _, name := range res.Removed {
		c.forget(name)
	}
	sort.Strings(res.Registered)
	sort.Strings(res.MarkPodsNotReady)
	c.sortDue()
	res.StatusUpdates = longestOverdueFirst(overdue)
	for key, z := range c.zones {
		z.size = counts[key][0] + counts[key][1]
		z.unhealthy = counts[key][1]
	}

	if fresh {
		c.handleDisruption(counts, now, &res)
		if res.Disruption == DisruptionExited {
			res.FreshGrace = true
		}
		// A zone's limiter, once set for the zone's state, starts as if its
		// last token had gone at the latest timeAdded on its nodes.
		for key, z := range c.zones {
			if !z.seeded {
				z.seeded = true
				z.bucket.seed(latestTaint[key], now)
			}
		}
	}
	c.publishMetrics(counts, &res)

	c.decideNoExecute(now, fresh, states, &res)

	for key, z := range c.zones {
		if members[key] == 0 && !z.tracked && z.queue.len() == 0 {
			delete(c.zones, key)
		}
	}
	return res
}

// decideNoExecute brings each node's NoExecute taints in line with its Ready
// status (SPEC NLC-13, NLC-20): removals and swaps now, additions through
// the zone queues.
//
// It uses the Ready status after this pass's own Unknown writes, not the one
// observed at the start of the pass, so a node this pass marks Unknown is
// queued in the same pass (upstream queues it one monitor period later,
// kubernetes#120815; see the package documentation).
func (c *Core) decideNoExecute(now time.Time, fresh bool, nodes []*nodeState, res *PassResult) {
	type candidate struct {
		name string
		at   time.Time
	}
	var enqueue []candidate
	first := len(res.TaintUpdates)
	for _, n := range nodes {
		name := n.node.Name
		z := c.zones[n.zone]
		have := n.noExecute()
		want := noExecuteFor(n.status)
		switch {
		case c.disrupted || n.status == corev1.ConditionTrue:
			if have != 0 {
				res.TaintUpdates = append(res.TaintUpdates, TaintUpdate{Node: name, Zone: n.zone, Remove: have.taints(time.Time{})})
				n.pending = &pendingTaints{set: 0, at: now}
			}
			if c.disrupted && want != 0 {
				enqueue = append(enqueue, candidate{name, readyTransition(n.node, now)})
			} else {
				z.queue.remove(name)
			}
		case want == 0 || have == want:
			z.queue.remove(name)
		case have&^want != 0:
			// The other taint (or both) is on the node: swap at once, not
			// rate limited — but not on a stale view.
			z.queue.remove(name)
			if !fresh {
				continue
			}
			u := TaintUpdate{Node: name, Zone: n.zone, Remove: (have &^ want).taints(time.Time{}), Ready: n.status}
			if have&want == 0 {
				u.Add = want.taints(now)
			}
			res.TaintUpdates = append(res.TaintUpdates, u)
			n.pending = &pendingTaints{set: want, at: now}
		default:
			enqueue = append(enqueue, candidate{name, readyTransition(n.node, now)})
		}
	}
	added := res.TaintUpdates[first:]
	sort.Slice(added, func(i, j int) bool { return added[i].Node < added[j].Node })
	// Nodes unhealthy the longest go first; ties (typically every node this
	// pass marked Unknown) by name.
	sort.Slice(enqueue, func(i, j int) bool {
		if !enqueue[i].at.Equal(enqueue[j].at) {
			return enqueue[i].at.Before(enqueue[j].at)
		}
		return enqueue[i].name < enqueue[j].name
	})
	for _, e := range enqueue {
		n := c.nodes[e.name]
		c.zones[n.zone].queue.push(e.name)
	}
}

// readyTransition is when the node's Ready condition last changed as written
// on it (by its agent or by this controller), now if this pass wrote it or
// it has none. Used only to order a queue.
func readyTransition(node *corev1.Node, now time.Time) time.Time {
	if r := readyCondition(node); r != nil && r.Status != corev1.ConditionTrue {
		return r.LastTransitionTime.Time
	}
	return now
}

// Taint runs the rate-limited tainting step (SPEC NLC-14, NLC-15): in every
// zone, while the queue's head still needs a NoExecute taint and the zone's
// limiter grants a token at now, it hands out that taint. The shell calls it
// every 100 ms (NodeEvictionPeriod) with the view freshness it would give
// Monitor; nothing is added while the view is stale (now or at the last
// pass) or while every zone is fully disrupted.
//
// Queue entries that no longer need a taint (the node is gone, Ready, or
// already has it) are dropped without using a token.
func (c *Core) Taint(now time.Time, fresh bool) []TaintUpdate {
	if !fresh || !c.fresh || c.disrupted {
		return nil
	}
	var out []TaintUpdate
	for _, key := range c.zoneKeys() {
		z := c.zones[key]
		for {
			name, ok := z.queue.head()
			if !ok {
				break
			}
			n := c.nodes[name]
			if n == nil || n.zone != key {
				z.queue.remove(name)
				continue
			}
			want, have := noExecuteFor(n.status), n.noExecute()
			if want == 0 || have&want != 0 {
				z.queue.remove(name)
				continue
			}
			prev := z.bucket.readyAt
			if !z.bucket.take(now) {
				break
			}
			z.lastGrant = grant{node: name, prev: prev, readyAt: z.bucket.readyAt}
			z.queue.remove(name)
			out = append(out, TaintUpdate{
				Node:     name,
				Zone:     key,
				Add:      want.taints(now),
				Remove:   (have &^ want).taints(time.Time{}),
				Ready:    n.status,
				Eviction: true,
			})
			n.pending = &pendingTaints{set: want, at: now}
			z.evictions++
		}
	}
	return out
}

// StatusUpdateFailed reports that the StatusUpdate for node could not be
// written: the core goes back to the Ready status observed on the node and
// will decide again at the next pass.
func (c *Core) StatusUpdateFailed(node string) {
	n := c.nodes[node]
	if n == nil || !n.health.ours {
		return
	}
	n.health.ready, n.health.ours = copyCondition(readyCondition(n.node)), false
	n.status = readyStatus(n.node)
	if noExecuteFor(n.status) == 0 {
		if z := c.zones[n.zone]; z != nil {
			z.queue.remove(node)
		}
	}
}

// TaintNotApplied reports that a TaintUpdate was not written. Either way the
// core stops assuming the change happened.
//
// With retry (the write failed) a limiter-granted taint goes back to the
// head of its zone's queue; its token stays used, as upstream's does.
//
// Without retry the shell skipped the write because the Ready status in its
// cache was not the one the taint stands for. That happens for a moment
// after every pass that marks a node Unknown: Taint runs every 100 ms,
// beside the pass's status writes, and the cache shows the write only once
// the watch delivers it. So a limiter-granted taint gives its token back
// (nothing was written) and, while the core still takes the node's Ready
// status to be u.Ready, goes back to the head of its queue for the next
// tainting step; if the node really recovered, the next pass sees it and
// drops it. Spending the token here made a zone's first taint wait a whole
// interval (issue 12).
func (c *Core) TaintNotApplied(u TaintUpdate, retry bool) {
	n := c.nodes[u.Node]
	if n == nil {
		return
	}
	n.pending = nil
	z := c.zones[u.Zone]
	if z == nil || !u.Eviction {
		return
	}
	z.evictions--
	if n.zone != u.Zone {
		return
	}
	if retry {
		z.queue.pushFront(u.Node)
		return
	}
	if g := z.lastGrant; g.node == u.Node {
		z.bucket.giveBack(g.prev, g.readyAt)
		z.lastGrant = grant{}
	}
	if n.status == u.Ready && noExecuteFor(n.status) != 0 {
		z.queue.pushFront(u.Node)
	}
}

// PodMarkingFailed reports that marking the pods of node Ready=False failed
// (SPEC NLC-9): later passes ask again while the node is not Ready.
func (c *Core) PodMarkingFailed(node string) {
	if n := c.nodes[node]; n != nil {
		n.retryPods = true
	}
}

// PodsShouldBeNotReady tells the pod-update workers (SPEC NLC-3b) whether a
// pod newly bound to node must be marked Ready=False: the core knows the
// node and its Ready condition, as last observed or written, is not True.
func (c *Core) PodsShouldBeNotReady(node string) bool {
	n := c.nodes[node]
	return n != nil && n.status != "" && n.status != corev1.ConditionTrue
}

// MarkUnknown applies the Unknown conditions of SPEC NLC-7 to a copy of node
// at now, for the shell's retry of a failed StatusUpdate on a node it read
// again. It returns nil if Ready is already Unknown (nothing to write).
func MarkUnknown(node *corev1.Node, now time.Time) *corev1.Node {
	return markUnknown(node, now)
}

// freshGrace gives every node a new grace period from now, except those
// that never showed a sign of life: they have no heartbeat the view could
// have missed, and keep counting from their creation.
func (c *Core) freshGrace(now time.Time) {
	for _, n := range c.nodes {
		if !n.health.neverAlive() {
			n.health.probe = now
		}
	}
}

// forget drops a node that is gone. (Upstream keeps its health record for
// ever, SPEC NLC-23; a node re-created under the same name starts afresh
// here, with the same observable result.)
func (c *Core) forget(name string) {
	n := c.nodes[name]
	if z := c.zones[n.zone]; z != nil {
		z.queue.remove(name)
	}
	delete(c.nodes, name)
}

func (c *Core) nodeNames() []string {
	names := make([]string, 0, len(c.nodes))
	for name := range c.nodes {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// publishMetrics fills the per-zone metric values for the zones with counted
// nodes and names the zones that no longer have any.
func (c *Core) publishMetrics(counts map[string][2]int, res *PassResult) {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		size, unhealthy := counts[k][0]+counts[k][1], counts[k][1]
		res.Zones = append(res.Zones, ZoneMetrics{Zone: k, Size: size, Unhealthy: unhealthy, Health: zoneHealth(size, unhealthy)})
	}
	for _, k := range sortedKeys(c.metricZones) {
		if _, ok := counts[k]; !ok {
			res.VanishedZones = append(res.VanishedZones, k)
			delete(c.metricZones, k)
		}
	}
	for _, k := range keys {
		c.metricZones[k] = true
	}
}

// zoneHealth is the percentage of Ready nodes among size (100 when empty).
func zoneHealth(size, unhealthy int) float64 {
	if size == 0 {
		return 100
	}
	return float64(100*(size-unhealthy)) / float64(size)
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
