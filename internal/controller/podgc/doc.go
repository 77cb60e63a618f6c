// Package podgc is the pod garbage collector (SPEC §5, PGC-1..5): every pass
// it force-deletes terminated pods beyond --terminated-pod-gc-threshold,
// terminating pods on out-of-service nodes, pods bound to nodes that no
// longer exist (after a 40 s quarantine and a check with the API server) and
// terminating pods that were never scheduled.
//
// The package owns which pods go and in what order (Core.Plan), the
// quarantine of missing nodes, and the status written before a force delete
// (phase Failed, and for orphans the DisruptionTarget condition). Core is
// pure: the shell in the same package lists pods and nodes from its caches,
// does the node GETs, patches and deletes, and counts the metrics. It must
// not touch pods the rules above do not name, nor delete gracefully: every
// deletion here has grace period 0.
//
// # Where nodeplane differs from upstream
//
//   - A pod qualifies for at most one rule per pass (the first in PGC-1
//     order). Upstream runs each rule over the same snapshot, so a pod that
//     is, say, both terminated and orphaned gets a second DELETE that fails
//     with NotFound and counts an error.
//   - A node that reappears in the cache ends its quarantine, and one that
//     disappears again starts a new one. Upstream's delay queue fires at the
//     first deadline even if the node came and went in between.
//   - Once a node's quarantine has run out it stays confirmable on every
//     pass until its pods are gone or it reappears, so a failed GET or
//     delete is retried on the next pass instead of after a fresh 40 s.
//   - The out-of-service rule (PGC-2) is computed here because PGC-1 fixes
//     its place in the pass; it comes out in its own list (Plan.OutOfService)
//     so the shell can carry it out or not.
package podgc
