// Package replicaset is the ReplicaSet controller (SPEC §9, issue 5): it
// keeps spec.replicas active pods that match a ReplicaSet's selector and are
// controlled by it. It creates the missing ones from the template, deletes
// the extras in upstream's order (unscheduled, pending, not ready, … newest
// first), adopts orphans that match, releases owned pods that no longer
// match, and writes the status (replicas, fullyLabeledReplicas,
// readyReplicas, availableReplicas, terminatingReplicas,
// observedGeneration, and the ReplicaFailure condition).
//
// Decide is the pure core: a ReplicaSet, the pods it could own, whether
// earlier writes have been observed, and now → what to adopt, release,
// create and delete, and the status. It makes no API call and reads no
// clock. The shell (Controller) feeds it from the informers and carries out
// the plan through the API; Expectations keeps a burst of creates or
// deletes from being repeated before the informer shows it.
//
// The owner handlers, claim, expectations, pod writes and status write are
// package ownership's, shared by every workload controller. This package
// still owns what the others read about pods and templates: readiness and
// availability (PodReady, PodAvailable, UntilAvailable), the pod built from
// a template (PodFromTemplate) and the template hash (TemplateHash).
//
// It must not touch pods it does not control and cannot adopt, bind pods to
// nodes, or change a ReplicaSet's spec (that is its owner's or the user's).
//
// # Where nodeplane differs from upstream
//
//   - Victims: equal candidates go by name last, so the choice is
//     deterministic; upstream's LogarithmicScaleDown (creation times
//     compared in powers-of-two buckets, then by UID hash) is not done: among
//     otherwise equal pods the newest goes first, plainly.
//   - A ReplicaSet whose ready pods become available later (minReadySeconds)
//     is resynced when the first of them does, not minReadySeconds after the
//     sync.
//   - Deletions are sent with a UID precondition, so a pod recreated under
//     the same name is never deleted by mistake.
package replicaset
