// Package namespace is the namespace controller (kube-controller-manager's
// namespace-controller): when a namespace is deleted, the API server marks
// it Terminating; this controller deletes everything in it, through the
// API, and once nothing is left removes the `kubernetes` finalizer from
// spec.finalizers through the namespace's finalize subresource. With no
// finalizer left the API server removes the namespace.
//
// Plan is the pure decision for one terminating namespace (what to delete,
// whether to finalize); the shell discovers the namespaced resources the
// server serves, lists each one's objects in the namespace as metadata only,
// carries out the plan, and checks again a second later while content
// remains. It runs only while this server leads, like every controller.
//
// # Where nodeplane differs from upstream
//
//   - Content is deleted object by object (background propagation), not
//     with one DELETE collection per resource: an object already being
//     deleted (finalizers pending, or a graceful pod deletion under way)
//     is left to finish.
//   - A namespace whose content remains is checked again after a fixed
//     second rather than after an estimate from the pods' grace periods.
//   - The API server deletes an empty namespace at once when it is
//     deleted, without waiting for this controller.
package namespace
