// Package garbagecollector is the garbage-collector-controller: it carries
// out the delete propagation policies the API server records as finalizers,
// following owner references between the objects the node plane serves
// (Pods, ReplicaSets, Deployments, DaemonSets, Leases and their owner Nodes).
//
//   - Background: an object all of whose owners are gone (no object of that
//     kind, name and UID exists, confirmed by a live read) is deleted; its
//     own dependents then follow the same way. An object that keeps at
//     least one owner only loses its references to the gone ones.
//   - Foreground: an owner marked deleted with the foregroundDeletion
//     finalizer is "deleting its dependents": every dependent is deleted
//     (in the foreground itself when it has dependents of its own, so the
//     cascade waits bottom-up), and once no dependent whose reference has
//     blockOwnerDeletion=true remains, the finalizer is removed and the API
//     server completes the owner's delete.
//   - Orphan: an owner marked deleted with the orphan finalizer has its
//     reference removed from every dependent, then the finalizer removed.
//
// A dependent is deleted with the policy its own finalizers ask for
// (Background when none). References to kinds the collector does not watch
// (StatefulSets, Jobs, ...) and a cluster-scoped dependent's reference to
// a namespaced kind are unresolvable: such an owner counts as present and
// nothing is collected through it, as upstream.
//
// Plan and PlanDeleting are the pure decisions (observed objects in, what
// to do out); patch.go builds the JSON patches; Controller is the shell:
// shared informers with an owner-UID index, one rate-limited work queue of
// object keys, live reads to confirm absence before a delete, and every
// write guarded (UID and resourceVersion preconditions on deletes, JSON
// patch tests on patches). It replaces package leasegc, whose Node→Lease
// rule is one case of the above.
//
// The package touches objects only through the API (client-go) and only
// the kinds listed above; it must not import the API server or storage.
//
// # Where nodeplane differs from upstream
//
//   - Upstream discovers every served resource and builds a graph of all of
//     them; nodeplane serves a fixed set and watches exactly those.
//   - Upstream re-reads the dependent before deleting and deletes with a
//     UID precondition; nodeplane also adds the re-read object's
//     resourceVersion, so an owner reference added between the read and
//     the delete cannot be missed.
package garbagecollector
