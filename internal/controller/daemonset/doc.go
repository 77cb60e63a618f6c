// Package daemonset is the DaemonSet controller (SPEC §9, SCH-6, DTS-3,
// issue 5): one pod of a DaemonSet on every eligible node. A node is
// eligible when the template's nodeName, nodeSelector and required node
// affinity admit it and it has no NoSchedule or NoExecute taint the pod
// does not tolerate — counting the tolerations every daemon pod gets
// (DTS-3: not-ready and unreachable NoExecute without tolerationSeconds,
// disk-, memory- and pid-pressure and unschedulable NoSchedule, and
// network-unavailable for host-network pods), so daemon pods run on
// cordoned nodes and survive condition taints. A pod already on a node
// that becomes ineligible stays unless a NoExecute taint is untolerated or
// the node no longer matches the selectors.
//
// Pods are bound directly (spec.nodeName) and carry a required node
// affinity to their node's name, as upstream's, so the scheduler would
// agree. Failed pods are deleted and replaced, with a per-node back-off;
// deleted ones are replaced once they are gone (a node never runs two).
// RollingUpdate replaces old-template pods keeping at most maxUnavailable
// nodes without an available pod; OnDelete replaces them only when
// deleted. The status carries desiredNumberScheduled,
// currentNumberScheduled, numberReady, numberAvailable,
// numberUnavailable, updatedNumberScheduled, numberMisscheduled and
// observedGeneration, as `kubectl rollout status ds` reads them.
//
// Core.Decide is the core: DaemonSet, nodes, candidate pods and now → what
// to adopt, release, create and delete, and the status; it keeps only the
// failed-pod back-off. Eligibility reuses the scheduler's matching
// (k8s.io/component-helpers: nodeaffinity.RequiredNodeAffinity, FindMatchingUntoleratedTaint). The
// shell (Controller) feeds it from the informers and writes through the
// API. It must not touch pods other controllers own, nor node objects.
//
// # Where nodeplane differs from upstream
//
//   - No ControllerRevisions: the template hash (replicaset.TemplateHash)
//     goes straight into the controller-revision-hash label, so `kubectl
//     rollout history/undo daemonset` have nothing to show.
//   - RollingUpdate's maxSurge is not supported (counted as 0).
//   - Nodes are visited in name order, so which old pods a rolling update
//     replaces first is deterministic.
//   - A failed pod's back-off wakes the DaemonSet when it runs out, not a
//     whole back-off period later.
package daemonset
