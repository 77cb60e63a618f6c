// Package ownership is what every workload controller (replicaset,
// deployment, daemonset, statefulset) does the same way about the objects
// it owns, written once:
//
//   - the owner index on the shared informers (OwnerIndexer, Candidates):
//     an owner reads its own objects and its namespace's orphans without
//     listing the namespace;
//   - owned-object event handlers (Handlers): an add, update or delete of a
//     pod (or ReplicaSet) wakes its controller, or — for an orphan — every
//     owner whose selector matches it, and settles Expectations;
//   - the controller-reference claim with upstream's semantics (Claim,
//     ApplyClaim): adopt only matching orphans that are not being deleted,
//     by a patch carrying the object's UID (so a reused name is never
//     adopted), release owned objects that no longer match, and neither
//     adopt nor release while the owner is being deleted — after rechecking
//     with the API server that the owner still exists;
//   - Expectations: the creates and deletes a controller has asked for and
//     not yet seen in its informer;
//   - pod writes in slow-start batches with events (SlowStart, CreatePods,
//     DeletePods);
//   - the status write, retried once on a conflict (WriteStatus), and the
//     one conflict back-off every client of the API uses (OnConflict).
//
// The package makes API calls only through the functions its callers pass
// in, so a controller's typed client plugs straight in.
package ownership
