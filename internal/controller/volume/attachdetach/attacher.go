package attachdetach

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/nodeplane/nodeplane/internal/volume/shareddir"
)

// AttacherStep is what the shared-dir attacher does next with one
// VolumeAttachment; the external-attacher's order: finalizer first, then
// status; on deletion, drop the finalizer (detach of a directory is a
// no-op, so ControllerUnpublish always succeeds).
type AttacherStep int

// The attacher's steps.
const (
	StepNone AttacherStep = iota
	StepAddFinalizer
	StepMarkAttached
	StepMarkError
	StepRemoveFinalizer
)

// DecideAttacher returns the next step for va (pv is its volume, nil when
// missing) and, for StepMarkError, the attach error message. Attachments of
// other attachers are not ours: StepNone.
func DecideAttacher(va *storagev1.VolumeAttachment, pv *corev1.PersistentVolume) (AttacherStep, string) {
	if va.Spec.Attacher != shareddir.Driver {
		return StepNone, ""
	}
	has := hasFinalizer(va.Finalizers)
	if va.DeletionTimestamp != nil {
		if has {
			return StepRemoveFinalizer, ""
		}
		return StepNone, ""
	}
	if !has {
		return StepAddFinalizer, ""
	}
	msg := attachError(va, pv)
	if msg != "" {
		if va.Status.Attached || va.Status.AttachError == nil || va.Status.AttachError.Message != msg {
			return StepMarkError, msg
		}
		return StepNone, ""
	}
	if !va.Status.Attached || va.Status.AttachError != nil {
		return StepMarkAttached, ""
	}
	return StepNone, ""
}

// attachError says why va cannot be attached ("" when it can).
func attachError(va *storagev1.VolumeAttachment, pv *corev1.PersistentVolume) string {
	if va.Spec.Source.PersistentVolumeName == nil {
		return "inline volumes are not supported by " + shareddir.Driver
	}
	if pv == nil {
		return "persistentvolume " + *va.Spec.Source.PersistentVolumeName + " not found"
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != shareddir.Driver {
		return "persistentvolume " + pv.Name + " is not a " + shareddir.Driver + " volume"
	}
	return shareddir.ValidHandle(pv.Spec.CSI.VolumeHandle)
}

func hasFinalizer(fs []string) bool {
	for _, f := range fs {
		if f == shareddir.Finalizer {
			return true
		}
	}
	return false
}
