// Package pvcprotection is the PVC protection controller
// (persistentvolumeclaim-protection-controller): a claim carries the
// finalizer kubernetes.io/pvc-protection (added on create by the
// StorageObjectInUseProtection admission plugin, or by this controller for
// a claim without it), so deleting a claim that a pod still uses only
// marks it Terminating; the controller removes the finalizer once no
// scheduled pod in the claim's namespace names it, and the claim goes.
//
// Decide is pure: given the claim and the pods of its namespace it returns
// the one write to make. The shell feeds a work queue from the claim and
// pod informers and, before removing the finalizer, confirms with a live
// pod list that the informer cache was not behind (as upstream does).
package pvcprotection
