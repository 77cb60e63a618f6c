package ownership

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// Claimed is how a controller's candidate objects (pods of a ReplicaSet or
// a DaemonSet, ReplicaSets of a Deployment) split by controller reference.
type Claimed[T metav1.Object] struct {
	// Owned are controlled by the owner and match its selector.
	Owned []T
	// Adopt match the selector, have no controller and are not being
	// deleted: the owner takes them (AdoptPatch).
	Adopt []T
	// Release are controlled by the owner but no longer match: it lets
	// them go (ReleasePatch).
	Release []T
}

// Claim splits objs for owner. Objects controlled by someone else are
// ignored. An owner being deleted adopts and releases nothing (the garbage
// collector is at work); its owned objects that no longer match are
// ignored.
func Claim[T metav1.Object](owner metav1.Object, selector labels.Selector, objs []T) Claimed[T] {
	var c Claimed[T]
	ownerGoing := owner.GetDeletionTimestamp() != nil
	for _, o := range objs {
		match := selector.Matches(labels.Set(o.GetLabels()))
		ref := metav1.GetControllerOfNoCopy(o)
		switch {
		case ref != nil && ref.UID == owner.GetUID():
			if match {
				c.Owned = append(c.Owned, o)
			} else if !ownerGoing {
				c.Release = append(c.Release, o)
			}
		case ref != nil:
		case match && !ownerGoing && o.GetDeletionTimestamp() == nil:
			c.Adopt = append(c.Adopt, o)
		}
	}
	return c
}

// AdoptPatch is the strategic merge patch that makes ref the controller of
// the object with uid: it merges ref into ownerReferences (keyed by uid)
// and names the object's uid, so the patch fails if the name was reused.
func AdoptPatch(ref metav1.OwnerReference, uid types.UID) []byte {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": []metav1.OwnerReference{ref},
		"uid":             uid,
	}})
	return b
}

// ReleasePatch is the strategic merge patch that removes the owner
// reference to ownerUID from the object with uid.
func ReleasePatch(ownerUID, uid types.UID) []byte {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": []map[string]any{{"$patch": "delete", "uid": ownerUID}},
		"uid":             uid,
	}})
	return b
}
