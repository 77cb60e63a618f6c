// Package deployment is the Deployment controller (SPEC §9, issue 5): a
// Deployment runs its pod template through ReplicaSets it owns, one per
// template, named <deployment>-<pod-template-hash> and labelled
// pod-template-hash (replicaset.TemplateHash). When the template changes
// it rolls out a new ReplicaSet — RollingUpdate within maxSurge and
// maxUnavailable, or Recreate (all old pods gone first) — numbers it in
// the deployment.kubernetes.io/revision annotation, scales it up and the
// old ones down, and trims old empty ReplicaSets beyond
// revisionHistoryLimit. A change of spec.replicas alone (`kubectl scale`)
// resizes the ReplicaSets without a rollout, in proportion during one.
// It writes the status `kubectl rollout status` reads — observedGeneration,
// replicas, updatedReplicas, readyReplicas, availableReplicas,
// unavailableReplicas, terminatingReplicas — and the Available and
// Progressing conditions with upstream's reasons, including
// ProgressDeadlineExceeded and the paused/resumed states.
//
// Decide is the pure core: a Deployment, its candidate ReplicaSets (and,
// for Recreate, their pods) and now → the ReplicaSets to create, update
// and delete, the events, and the Deployment's new status. It follows
// upstream's sync step by step on copies of the objects. The shell
// (Controller) feeds it from the informers and carries the plan out. Pods
// are the ReplicaSet controller's; this package never creates or deletes
// one, and it does not touch ReplicaSets other Deployments control.
//
// # Where nodeplane differs from upstream
//
//   - The template hash is FNV-1a of the template's protobuf encoding
//     written in seven characters (see replicaset.TemplateHash); upstream
//     hashes a spew dump. A Deployment moved from an upstream cluster finds
//     its ReplicaSets by template, not by name, so nothing is lost.
//   - One sync makes its changes in one write per object: when upstream
//     would scale a ReplicaSet twice in a sync (unavailable pods first,
//     then available ones) there is one update and one ScalingReplicaSet
//     event with the total.
//   - unavailableReplicas is computed from the sizes the sync just set,
//     where upstream uses the sizes it read; the next sync agrees.
//   - The revision annotation is written on the Deployment with its status
//     (as upstream, through the status subresource) in the same sync that
//     creates the ReplicaSet; a name collision with a foreign ReplicaSet
//     bumps status.collisionCount as upstream.
//   - spec.rollbackTo (extensions/v1beta1, gone) is not supported;
//     `kubectl rollout undo` works, as it patches the template.
package deployment
