package ownership

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// OwnerIndex is the name of the informer index that files an object under
// ControlledKey(its controller's UID), or OrphanKey(its namespace) when it
// has no controller. The workload controllers add it to the shared pod and
// ReplicaSet informers, so a sync reads its own objects and the orphans it
// could adopt without listing the whole namespace.
const OwnerIndex = "nodeplane.io/controller-uid"

// ControlledKey is the OwnerIndex key of the objects owner controls.
func ControlledKey(owner types.UID) string { return "uid/" + string(owner) }

// OrphanKey is the OwnerIndex key of the objects without a controller in
// namespace.
func OrphanKey(namespace string) string { return "orphan/" + namespace }

// OwnerIndexer adds OwnerIndex to inf unless it is there (the controllers
// of one term share informers and prepare one after the other) and returns
// the indexer. Call it before the informer starts.
func OwnerIndexer(inf cache.SharedIndexInformer) (cache.Indexer, error) {
	if _, ok := inf.GetIndexer().GetIndexers()[OwnerIndex]; !ok {
		if err := inf.AddIndexers(cache.Indexers{OwnerIndex: ownerKeys}); err != nil {
			return nil, err
		}
	}
	return inf.GetIndexer(), nil
}

func ownerKeys(obj any) ([]string, error) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
		return []string{ControlledKey(ref.UID)}, nil
	}
	return []string{OrphanKey(o.GetNamespace())}, nil
}

// Candidates returns the objects of idx (an OwnerIndexer) that owner
// controls, then the orphans of its namespace.
func Candidates[T any](idx cache.Indexer, owner metav1.Object) ([]T, error) {
	var out []T
	for _, key := range []string{ControlledKey(owner.GetUID()), OrphanKey(owner.GetNamespace())} {
		objs, err := idx.ByIndex(OwnerIndex, key)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if t, ok := o.(T); ok {
				out = append(out, t)
			}
		}
	}
	return out, nil
}
