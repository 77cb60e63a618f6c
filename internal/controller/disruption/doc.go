// Package disruption is the disruption controller (upstream
// "disruption-controller"): it keeps every PodDisruptionBudget's status
// current — expectedPods, currentHealthy, desiredHealthy,
// disruptionsAllowed, observedGeneration, the DisruptionAllowed condition
// (SufficientPods, InsufficientPods, SyncFailed) and disruptedPods, the
// evictions the API server has granted but this controller has not yet
// seen as deletions (kept until the pod is gone or being deleted, or for at
// most DeletionTimeout). It also turns a stale DisruptionTarget condition
// (an eviction or other disruption that never led to a deletion) back to
// False after StaleDisruptionTimeout.
//
// Sync is the pure core: a budget, the pods its selector matches, the
// scale of the workloads controlling them and now → the status to write
// (or none), when to look again, and what to report. The shell
// (Controller) feeds it from informers, resolves each pod's controller
// (a ReplicaSet, or the Deployment owning that ReplicaSet) to its
// spec.replicas, and writes the status through the API. The API server's
// pods/eviction handler reads the status this controller writes; it is the
// only other writer of a budget's status.
//
// It must not delete or evict pods, nor write a budget's spec.
//
// # Where nodeplane differs from upstream
//
//   - A pod matched by several budgets wakes every one of them; upstream
//     picks one arbitrarily (and says so in a MultiplePodDisruptionBudgets
//     event), leaving the others stale until something else wakes them.
//   - Scale comes from ReplicaSets and Deployments only (no
//     ReplicationControllers or StatefulSets are served yet, and no generic
//     scale-subresource lookup): a percentage or maxUnavailable budget over
//     pods controlled by anything else fails its sync ("found no controllers
//     for pod"), which sets disruptionsAllowed to 0 with reason SyncFailed,
//     as upstream does for a controller it cannot find.
package disruption
