// Package shareddir holds the names of nodeplane's built-in network-volume
// driver, nodeplane.io/shared-dir, that the server side (binder,
// provisioner, attach/detach controller, attacher) and the agent side share
// (docs/volumes.md, "Contract"): each volume is the directory
// <shared-volume-root>/<volume handle>, attached to one node at a time
// through a storage.k8s.io/v1 VolumeAttachment, as a CSI driver is.
//
// It owns only names and the handle rule; it does no I/O.
package shareddir

import (
	"crypto/sha256"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

const (
	// Driver is the CSI driver, provisioner and attacher name.
	Driver = "nodeplane.io/shared-dir"
	// Finalizer is what the attacher keeps on a VolumeAttachment it has
	// attached, as the external-attacher names it (driver with / → -).
	Finalizer = "external-attacher/nodeplane-io-shared-dir"
)

// AttachmentName is the name of the VolumeAttachment of a CSI volume on a
// node, as the CSI attacher builds it: csi-<hex sha256(handle+driver+node)>.
func AttachmentName(handle, driver, node string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(handle+driver+node)))
}

// UniqueVolumeName is the name of a CSI volume in node.status.volumesAttached
// and volumesInUse: kubernetes.io/csi/<driver>^<handle>.
func UniqueVolumeName(driver, handle string) corev1.UniqueVolumeName {
	return corev1.UniqueVolumeName("kubernetes.io/csi/" + driver + "^" + handle)
}

// ProvisionedName is both the PV name and the handle of the volume
// provisioned for a claim: pvc-<claim uid>.
func ProvisionedName(claimUID string) string { return "pvc-" + claimUID }

// ValidHandle reports why a handle cannot name a directory under the root
// ("" when it can): it must be one non-empty path element.
func ValidHandle(handle string) string {
	switch {
	case handle == "":
		return "volume handle is empty"
	case handle == "." || handle == "..":
		return fmt.Sprintf("volume handle %q is not a directory name", handle)
	case strings.ContainsAny(handle, "/\x00"):
		return fmt.Sprintf("volume handle %q must be one path element (no /)", handle)
	}
	return ""
}
