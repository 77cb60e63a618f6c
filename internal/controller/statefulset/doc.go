// Package statefulset is the StatefulSet controller (statefulset-controller,
// issue 14): pods with stable names <set>-<ordinal>, each with its own
// PersistentVolumeClaims <template>-<set>-<ordinal> made from
// spec.volumeClaimTemplates; OrderedReady (one pod at a time, in ordinal
// order, each waiting for the previous to be Running and available; scale-down
// from the highest ordinal) or Parallel management; RollingUpdate (highest
// ordinal first, down to the partition, each updated pod available before
// the next goes) or OnDelete updates; and
// ControllerRevisions that snapshot each template, so status.currentRevision
// and status.updateRevision tell `kubectl rollout status sts/x` where the
// rollout is.
//
// Decide is the pure core: a StatefulSet, the pods, claims and revisions it
// could own, and now → what to adopt and release, which revision to
// create, which claims to create or re-own, which pods to create and
// delete, which old revisions to drop, and the status. The shell
// (Controller) feeds it from the informers and writes through the API,
// using package ownership for the owner events, the claim and the status
// write.
//
// A pod is available once it has been Ready for more than
// spec.minReadySeconds (its Ready condition's lastTransitionTime, compared
// with the injected now; at once when 0), as upstream apps/v1;
// status.availableReplicas counts those, and while a Ready pod is not yet
// available the sync asks to be run again when the first such pod becomes
// so (Plan.RequeueAfter).
//
// Claims follow spec.persistentVolumeClaimRetentionPolicy: whenDeleted
// Delete makes the set an owner of every claim (the garbage collector
// removes them with it); whenScaled Delete makes a condemned pod the owner
// of its claims before the pod is deleted, so they go with it. Retain (the
// default) leaves claims unowned.
//
// # Where nodeplane differs from upstream
//
//   - The revision hash is replicaset.TemplateHash of the template (upstream
//     hashes the revision's data with a different function), so revision
//     names differ from upstream's for the same template.
//   - A revision equal to an older one is reused as is: its revision number
//     is not raised to the newest.
//   - No maxUnavailable for RollingUpdate (alpha upstream): one pod at a time.
package statefulset
