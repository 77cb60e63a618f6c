// Package flowcontrol decides, for each API request, whether the server
// serves it now, lets it wait for a seat, or turns it away with 429:
// nodeplane's own, small take on Kubernetes API priority and fairness.
//
// Three decisions, all pure and cheap (no I/O, no clock, no allocation, no
// lock unless a request waits; lease renewals, the hottest path of the
// system, go through them):
//
//   - Classify puts a request in a priority Level from who sends it and
//     what it touches: the leader election of the server's own controllers
//     (Exempt, never limited), the rest of the controllers' and the
//     scheduler's work (System), node heartbeats — a node's Lease in
//     kube-node-lease and its Node's status (NodeHeartbeat) —, everything
//     else a node asks (Node), administrators in system:masters (Admin),
//     and everyone else (Workload).
//   - Width estimates the work of a request in seats: one for most
//     requests, up to MaxWidth for a LIST (by its page size; the most when
//     it is not paginated).
//   - Controller.AdmitWidth takes that many seats for the request in its
//     level. Each level has its own seats, so a request never waits behind
//     another level's. Within a level, one identity (the user name: a flow) may hold
//     at most its share of the level's seats, so one client cannot take a
//     level from the others. Past either limit the answer is "no" at once
//     and the caller answers 429 with Retry-After. Controller.Wait is the
//     same, except in the one level with a queue (System: the server's own
//     controllers, whose bursts would otherwise each sleep a whole
//     Retry-After): there a request waits, first come first served, for a
//     seat, and is refused only when the queue is full or after
//     Config.QueueWait.
//
// The per-identity count is kept in a count-min sketch: each flow hashes
// (with a per-process random seed) to two of a fixed number of counters and
// its estimated seat count is the smaller of the two. The estimate is never
// below the true count, so no identity ever exceeds its share; an innocent
// identity is refused only if both its counters are full of other
// identities' requests, which for one busy identity among many happens with
// a probability of about 2/buckets².
//
// This package owns the classification rules and the seat accounting. It
// does not read requests (the HTTP layer extracts user, groups and path),
// write responses, keep metrics or apply deadlines; internal/apiserver's
// LimitInFlight does that.
package flowcontrol
