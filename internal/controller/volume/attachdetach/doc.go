// Package attachdetach is the attach/detach controller
// (persistentvolume-attach-detach-controller, SPEC §5 ADC-1..5) and the
// attacher of nodeplane's built-in driver nodeplane.io/shared-dir (the role
// the CSI external-attacher plays for a CSI driver).
//
// The controller compares the desired state (for every pod bound to a node
// that manages attachment through the controller — annotation
// volumes.kubernetes.io/controller-managed-attach-detach=true — and is not
// terminated, each CSI PersistentVolume its bound claims name) with the
// actual state (the VolumeAttachments). It creates a VolumeAttachment for
// each desired volume that has none (unless a single-attach volume is
// attached elsewhere: FailedAttachVolume "Multi-Attach error" events),
// lists the attached ones in node.status.volumesAttached, and detaches
// (removes from volumesAttached, then deletes the VolumeAttachment) what is
// no longer desired, by the rules of ADC-2: wait while the node reports the
// volume in use, unless the node is out of service or is unhealthy and the
// detach was requested longer than maxWaitForUnmountDuration ago.
//
// Core is the pure decision; it keeps since when each detach was requested
// and which detaches are in flight. The shell reads the informer caches,
// writes through client-go and counts the forced-detach metric.
//
// Where nodeplane differs from upstream: the actual state is the
// VolumeAttachment cache rather than an in-memory world rebuilt from
// node.status.volumesAttached, so there is nothing for
// --attach-detach-reconcile-sync-period to resync (the flag is accepted and
// validated); maxWaitForUnmountDuration (6 min upstream, fixed) can be
// shortened with the nodeplane-only --max-wait-for-unmount-duration for
// tests; the built-in attacher runs inside this controller.
package attachdetach
