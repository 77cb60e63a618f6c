package garbagecollector

import (
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
)

// The collector changes objects with JSON patches (RFC 6902) built from
// the object it looked at. Each patch first tests the object's UID and the
// element it changes, so it applies to that object in that state or fails
// as a whole (422) — never to a recreated namesake or a shifted list —
// without conflicting with unrelated writes the way a resourceVersion
// precondition would (pods' status changes often).

type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

func uidTest(uid types.UID) patchOp {
	return patchOp{Op: "test", Path: "/metadata/uid", Value: string(uid)}
}

func encode(ops []patchOp) []byte {
	data, err := json.Marshal(ops)
	if err != nil {
		panic(fmt.Sprintf("encode JSON patch: %v", err)) // strings and bools only: cannot fail
	}
	return data
}

// removeOwnersPatch removes obj's references to owners; nil when it has
// none of them.
func removeOwnersPatch(obj Object, owners []types.UID) []byte {
	ops := []patchOp{uidTest(obj.UID)}
	// Highest index first, so each index still names the element tested.
	for i := len(obj.Owners) - 1; i >= 0; i-- {
		if !slices.Contains(owners, obj.Owners[i].UID) {
			continue
		}
		path := fmt.Sprintf("/metadata/ownerReferences/%d", i)
		ops = append(ops, patchOp{Op: "test", Path: path + "/uid", Value: string(obj.Owners[i].UID)}, patchOp{Op: "remove", Path: path})
	}
	if len(ops) == 1 {
		return nil
	}
	return encode(ops)
}

// unblockPatch sets blockOwnerDeletion=false on obj's references to
// owners; nil when none of them blocks.
func unblockPatch(obj Object, owners []types.UID) []byte {
	ops := []patchOp{uidTest(obj.UID)}
	for i, ref := range obj.Owners {
		if !slices.Contains(owners, ref.UID) || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			continue
		}
		path := fmt.Sprintf("/metadata/ownerReferences/%d", i)
		ops = append(ops, patchOp{Op: "test", Path: path + "/uid", Value: string(ref.UID)}, patchOp{Op: "replace", Path: path + "/blockOwnerDeletion", Value: false})
	}
	if len(ops) == 1 {
		return nil
	}
	return encode(ops)
}

// removeFinalizerPatch removes finalizer from obj; nil when obj lacks it.
func removeFinalizerPatch(obj Object, finalizer string) []byte {
	ops := []patchOp{uidTest(obj.UID)}
	for i := len(obj.Finalizers) - 1; i >= 0; i-- {
		if obj.Finalizers[i] != finalizer {
			continue
		}
		path := fmt.Sprintf("/metadata/finalizers/%d", i)
		ops = append(ops, patchOp{Op: "test", Path: path, Value: finalizer}, patchOp{Op: "remove", Path: path})
	}
	if len(ops) == 1 {
		return nil
	}
	return encode(ops)
}
