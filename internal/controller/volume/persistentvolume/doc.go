// Package persistentvolume is the PersistentVolume controller
// (persistentvolume-binder-controller): it binds claims to volumes, static
// and dynamic, for Immediate and WaitForFirstConsumer storage classes,
// keeps the phases of both (claims Pending/Bound/Lost, volumes
// Available/Bound/Released/Failed), reclaims released volumes (Delete,
// Retain) and, for storage classes of nodeplane's built-in driver
// nodeplane.io/shared-dir, provisions volumes itself (the external
// provisioner's role): a PV named and with handle pvc-<claim uid>,
// pre-bound to its claim.
//
// Core is pure: given one object, the objects it depends on and now, it
// returns the next single write (and events), as upstream's controller
// makes a bind in four writes (volume claimRef, volume phase, claim
// volumeName and annotations, claim phase), each sync taking the next step
// once the cache shows the last. The shell feeds a work queue from the
// informers, reads the caches and writes through client-go; optimistic
// concurrency (resourceVersion) keeps two claims from taking one volume.
//
// Where nodeplane differs from upstream: the scheduler does not set the
// volume.kubernetes.io/selected-node annotation, so a WaitForFirstConsumer
// claim is bound (or provisioned) once a pod using it is bound to a node;
// the controller then writes the annotation itself. Volume node affinity
// is not checked against that node (shared-dir volumes have none). Claims
// with no storageClassName are given the default class (the
// storageclass.kubernetes.io/is-default-class annotation) by this
// controller, as upstream's retroactive default assignment does; there is
// no DefaultStorageClass admission plugin.
package persistentvolume
