// Package pvprotection is the PV protection controller
// (persistentvolume-protection-controller): a PersistentVolume carries the
// finalizer kubernetes.io/pv-protection (added on create by the
// StorageObjectInUseProtection admission plugin, or by this controller for
// a volume without it), so deleting a Bound volume only marks it
// Terminating; the controller removes the finalizer once the volume is no
// longer Bound (its claim is gone and it is Released, or it is Available),
// and the volume goes.
//
// Decide is pure: given the volume it returns the one write to make; the
// shell feeds a work queue from the volume informer.
package pvprotection
