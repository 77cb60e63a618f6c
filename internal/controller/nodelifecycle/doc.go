// Package nodelifecycle is the node lifecycle controller (SPEC §1, NLC-1..24):
// it notices that a node went silent and says so on the Node (conditions
// Unknown, NodeNotReady events, the node's pods Ready=False), keeps new work
// away (NoSchedule taints from conditions and spec.unschedulable), and asks
// for the old work to move (not-ready / unreachable NoExecute taints, which
// the taint eviction controller acts on) — at a pace set per zone, so that a
// network blip or a lost zone does not turn into an outage.
//
// The decisions live in a pure core: Core (Monitor, Taint and the feedback
// methods), NoScheduleTaints, BetaLabels, ZoneKey. The core takes what the
// informers show and the time on the controller's clock and returns what to
// write; it starts no goroutine, reads no clock and makes no API call. The
// shell in the same package (controller.go) owns the informers, the work
// queue, the writes, leader election and the metrics. The package must not
// delete pods (SPEC NLC-10) nor touch taints other than its own seven
// NoSchedule keys and the two NoExecute ones.
//
// # What the shell does
//
// Every NodeMonitorPeriod: list nodes and their leases from the informers,
// decide whether its view is fresh (watches progressing, storage answering),
// call Monitor, then carry out the PassResult in its documented order,
// reporting failures back (StatusUpdateFailed, PodMarkingFailed,
// TaintNotApplied). Every 100 ms: call Taint and write its updates; and, if
// DueNodes names nodes whose grace period ended since the pass, call
// MonitorDue with their current Node and Lease and carry out its result as
// a pass's. On every
// node add/update: write NoScheduleTaints and BetaLabels. On a pod
// bound to a node: ask PodsShouldBeNotReady. On gaining leadership: Reset (or
// a new Core). For /debug/nodeplane/zones: View.
//
// # Where nodeplane differs from upstream, and why
//
// A node is marked Unknown when its grace period ends, not at the next
// monitor pass (SPEC NLC-8 allows up to two periods more): each pass plans
// the nodes whose grace ends before the next one, and the shell has them
// judged every 100 ms (due.go). Upstream's pass-only check leaves a dead
// node unmarked for up to a period after its grace, plus the pass's own
// time (a second at 100,000 nodes).
//
// No one-period lag of the NoExecute taint (SPEC NLC-13, §12,
// kubernetes#120815). Upstream decides the NoExecute taint from the Ready
// status observed at the start of a pass, so a node the pass itself marks
// Unknown is only queued at the next pass, P later. Here the decision uses
// the status after the pass's own write: the node is queued at once and,
// if its zone's limiter has a token, tainted within the next tainting step.
// Reasons: the lag buys nothing (the node has already been silent for the
// whole grace period), it is what upstream v1.34 was measured to do anyway
// (taint within ~0.1 s of the Unknown write), and the taint's timeAdded is
// where the eviction clock starts. Rate limiting is unchanged.
//
// Awareness of its own view (SPEC P3-2). Monitor takes the view's freshness.
// While the view is stale no node is marked Unknown, no NoExecute taint is
// added or swapped (removals from Ready nodes still happen), and zone states
// and limiters stay as they were; when it turns fresh every node gets a new
// grace period. Upstream marks every node Unknown after a long enough storage
// stall (kubernetes#121793).
//
// Failover (SPEC P3-3). Upstream removes every node's NoExecute taints the
// first time a (new) controller sees the node (NLC-5 "mark reachable") and
// re-adds them later, so eviction clocks restart and taints are re-added with
// a burst. Here the first sight of a node keeps its taints; not-Ready nodes
// without one are queued, ordered by how long their Ready condition has been
// not True; each zone's limiter starts as if its last token had gone at the
// latest timeAdded on the zone's nodes; every node gets a fresh grace period
// from the moment the new leader first sees it — except a node that never
// posted status nor had a Lease: it has no heartbeat to have missed, so, as
// upstream, its startup grace period runs from its creationTimestamp (clamped
// to the first sighting) and an old hand-made Node is marked Unknown on the
// first pass. Neither the view turning fresh again nor the end of master
// disruption mode restarts that period.
//
// A zone's first NoExecute taint comes at once, as upstream's limiter (a
// token bucket of burst 1) allows: the tainting step runs beside a pass's
// status writes and may grant a token before the shell's cache shows the
// Unknown just written; the shell then skips the write and the token is given
// back (TaintNotApplied), the node keeping its place at the head of the
// queue. Upstream spends a token on a skipped node.
//
// Master disruption mode is remembered, not re-derived from zone states
// (SPEC NLC-20). Upstream's "all zones were fully disrupted" is false as soon
// as a zone it has not judged before appears, so a new zone with a Ready node
// ends the mode without the fresh grace period and leaves the other zones'
// limiters at 0. Here the mode ends exactly when some counted node is Ready
// again; a zone appearing during the mode joins it. A zone left with no
// counted node is forgotten, as upstream does, and its limiter goes back to
// the normal rate (upstream keeps whatever rate it had), so nodes excluded
// from disruption checks in such a zone are still tainted at the normal pace.
//
// Smaller differences: a queue entry that no longer needs a taint is dropped
// without using a token; a taint write that does not show up on the node
// within two monitor periods is decided again; a deleted node's record is
// dropped (upstream keeps it for ever, NLC-23, with no visible effect); all
// zones that lost their counted nodes are forgotten in the same pass (upstream
// may keep some for a pass, depending on map order).
//
// Kept from upstream on purpose: the float32 comparison of the not-Ready
// ratio with the threshold; limiter swaps that never grant a burst; the
// NodeNotReady event and pod marking only when this controller itself turns
// Ready from True to Unknown (not when the agent posts False); nothing is
// written when Ready is already Unknown even if a pressure condition is not;
// a node without a Ready condition loses the not-ready NoSchedule taint the
// admission plugin gave it, and is neither queued nor counted as Ready.
package nodelifecycle
