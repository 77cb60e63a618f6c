// Package tainteviction is the taint eviction controller (SPEC §2, TEC-1..6):
// pods bound to a node with NoExecute taints they do not tolerate are
// deleted at once, pods that tolerate them for a while are deleted when the
// shortest tolerationSeconds runs out, and a pending deletion is cancelled
// when the taint goes or the pod comes to tolerate it for ever.
//
// The package owns the decision (Decide), the pending evictions (Core) and
// the texts the controller writes: the TaintManagerEviction events and the
// DisruptionTarget condition. Core is pure: it takes what the informers show
// and the time, and returns events to emit and evictions to carry out. It
// starts no goroutine, reads no clock and makes no API call; the shell in the
// same package does the I/O. It must not look at node conditions or write
// taints: taints are the node lifecycle controller's and the operator's.
//
// # Where nodeplane differs from upstream, and why
//
// Deadlines are rebuilt from the taints, not from the controller's memory
// (SPEC P3-3). Upstream starts a pod's toleration clock when its own process
// first handles the taint, so a restarted controller or a new leader starts
// every clock again and pending evictions are postponed by as much as the
// failover took. Here a pod's clock starts at the later of the taint's start
// and the moment the pod was bound to the node (its PodScheduled condition,
// else its creation). The taint's start is the earlier of when this Core
// first saw it and the end of the second its timeAdded names (the node
// lifecycle controller sets timeAdded on every NoExecute taint; clients read
// it with one-second resolution, so the taint went on within that second).
// Both are at or after the real moment, so no pod goes before its
// tolerationSeconds have run, as a client can check them; a Core that sees
// the taint being added counts from its sighting, as upstream does, and a new
// Core instance given the same taints and pods later computes the same
// deadlines from timeAdded + 1 s, so no eviction is lost or brought forward;
// pods that an earlier leader already deleted are terminating and are
// skipped, so none is doubled. A taint without timeAdded (an operator's
// kubectl taint) counts from the moment this Core first saw it, as upstream
// does; so does a timeAdded later than that moment (clock skew).
//
// Kept upstream quirk (SPEC §12): once an eviction is pending, a later
// computation with a different finite delay does not move it, earlier or
// later — only "not tolerated" (evict at once) or "tolerated for ever"
// (cancel) changes it. SPEC lists the rescheduling proposal
// (kubernetes#109226) among the ones not to make default, and the quirk also
// stops a not-ready → unreachable taint swap, whose new taint carries a
// fresh timeAdded, from postponing an eviction that is already counting.
// The price: after a restart a deadline is recomputed from the taints and
// tolerations as they are then, so if they changed while the eviction was
// pending the rebuilt deadline follows the new values.
//
// Smaller differences: pending evictions are keyed by pod UID, not
// namespace/name, so a pod recreated under the same name is a new pod; a pod
// already terminating (deletionTimestamp set) is never evicted again — its
// pending eviction is dropped without an event, since it is going away
// anyway; when an untolerated taint brings a pending eviction forward no
// "Cancelling deletion" event precedes the "Marking for deletion" one
// (upstream emits both, though nothing was cancelled); and an eviction that
// fired stays remembered until the pod shows up terminating, gone or no
// longer to be evicted, so a node update that races the pod's deletion does
// not delete it twice.
//
// Shared with upstream, on purpose: among the tolerations that tolerate a
// taint, only the first in the pod's list counts for that taint (so an
// earlier toleration without tolerationSeconds shadows a later one with it);
// tolerationSeconds ≤ 0 means at once; deleting a Node does not cancel the
// pending evictions of its pods.
package tainteviction
