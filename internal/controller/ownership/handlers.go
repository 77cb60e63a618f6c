package ownership

import (
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// Handlers turn events on owned objects (pods, or a Deployment's
// ReplicaSets) into owner keys (namespace/name) for the owner's queue. O
// is the owner type.
type Handlers[O metav1.Object] struct {
	// Kind is the owner's kind; a controller reference of another kind is
	// not this owner's.
	Kind schema.GroupVersionKind
	// Get reads an owner from the cache.
	Get func(namespace, name string) (O, error)
	// List lists a namespace's owners from the cache.
	List func(namespace string) ([]O, error)
	// Selector is an owner's label selector.
	Selector func(O) *metav1.LabelSelector
	// Enqueue queues an owner key.
	Enqueue func(key string)
	// Expectations, when set, are told of the creates and deletes seen.
	Expectations *Expectations
}

// Funcs returns the handlers to register on the owned objects' informer.
func (h *Handlers[O]) Funcs() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{AddFunc: h.OnAdd, UpdateFunc: h.OnUpdate, DeleteFunc: h.OnDelete}
}

// owner returns the key of the owner ref names in ns, if it is in the
// cache with ref's UID.
func (h *Handlers[O]) owner(ns string, ref *metav1.OwnerReference) (string, bool) {
	if ref == nil || ref.Kind != h.Kind.Kind || ref.APIVersion != h.Kind.GroupVersion().String() {
		return "", false
	}
	o, err := h.Get(ns, ref.Name)
	if err != nil || o.GetUID() != ref.UID {
		return "", false
	}
	return ns + "/" + ref.Name, true
}

// enqueueMatching enqueues every owner of obj's namespace whose selector
// matches the orphan obj: one of them may adopt it.
func (h *Handlers[O]) enqueueMatching(obj metav1.Object) {
	owners, err := h.List(obj.GetNamespace())
	if err != nil {
		return
	}
	for _, o := range owners {
		sel, err := metav1.LabelSelectorAsSelector(h.Selector(o))
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(obj.GetLabels())) {
			continue
		}
		h.Enqueue(obj.GetNamespace() + "/" + o.GetName())
	}
}

// OnAdd: a new object wakes its controller (one expected create seen) or,
// an orphan, the owners that may adopt it. One seen already going (e.g.
// after a restart) is a deletion, never a creation.
func (h *Handlers[O]) OnAdd(obj any) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	if o.GetDeletionTimestamp() != nil {
		h.OnDelete(o)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
		if key, ok := h.owner(o.GetNamespace(), ref); ok {
			if h.Expectations != nil {
				h.Expectations.Created(key)
			}
			h.Enqueue(key)
		}
		return
	}
	h.enqueueMatching(o)
}

// OnUpdate wakes the old and the new controller when the controller
// reference changed, and the matching owners of an orphan whose labels or
// reference changed. An object now being deleted counts as deleted.
func (h *Handlers[O]) OnUpdate(old, cur any) {
	o, ok1 := old.(metav1.Object)
	p, ok2 := cur.(metav1.Object)
	if !ok1 || !ok2 {
		return
	}
	labelsChanged := !labels.Equals(o.GetLabels(), p.GetLabels())
	if p.GetDeletionTimestamp() != nil {
		h.OnDelete(p)
		if labelsChanged {
			h.OnDelete(o)
		}
		return
	}
	oldRef, curRef := metav1.GetControllerOfNoCopy(o), metav1.GetControllerOfNoCopy(p)
	refChanged := !apiequality.Semantic.DeepEqual(oldRef, curRef)
	if refChanged && oldRef != nil {
		if key, ok := h.owner(o.GetNamespace(), oldRef); ok {
			h.Enqueue(key)
		}
	}
	if curRef != nil {
		if key, ok := h.owner(p.GetNamespace(), curRef); ok {
			h.Enqueue(key)
		}
		return
	}
	if labelsChanged || refChanged {
		h.enqueueMatching(p)
	}
}

// OnDelete wakes the controller of a deleted (or tombstoned) object, one
// expected deletion seen.
func (h *Handlers[O]) OnDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	if key, ok := h.owner(o.GetNamespace(), metav1.GetControllerOfNoCopy(o)); ok {
		if h.Expectations != nil {
			h.Expectations.Deleted(key, o.GetUID())
		}
		h.Enqueue(key)
	}
}

// EnqueueFuncs returns handlers for the owners' own informer: every add
// and update queues the owner; a delete is handed to deleted with the last
// known object, or queued when deleted is nil.
func EnqueueFuncs(enqueue func(key string), deleted func(key string, obj metav1.Object)) cache.ResourceEventHandlerFuncs {
	add := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			enqueue(key)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    add,
		UpdateFunc: func(_, cur any) { add(cur) },
		DeleteFunc: func(obj any) {
			key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
			if err != nil {
				return
			}
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if o, ok := obj.(metav1.Object); ok && deleted != nil {
				deleted(key, o)
				return
			}
			enqueue(key)
		},
	}
}

// NamespaceLister is a typed lister for one namespace (client-go's
// <Kind>NamespaceLister).
type NamespaceLister[O any] interface {
	Get(name string) (O, error)
	List(selector labels.Selector) ([]O, error)
}

// NewHandlers returns the owned-object handlers of owners of kind, read
// from the cache through byNamespace (a lister's <Kind>s method).
func NewHandlers[O metav1.Object, L NamespaceLister[O]](kind schema.GroupVersionKind, byNamespace func(string) L, selector func(O) *metav1.LabelSelector, enqueue func(string), exp *Expectations) *Handlers[O] {
	return &Handlers[O]{
		Kind:         kind,
		Get:          func(ns, name string) (O, error) { return byNamespace(ns).Get(name) },
		List:         func(ns string) ([]O, error) { return byNamespace(ns).List(labels.Everything()) },
		Selector:     selector,
		Enqueue:      enqueue,
		Expectations: exp,
	}
}

// Lookup returns the owner key names from the cache (byNamespace: a
// lister's <Kind>s method). found is false, with no error, when the key is
// malformed or the owner is gone; its expectations (exp, may be nil) are
// then forgotten.
func Lookup[O any, L NamespaceLister[O]](key string, byNamespace func(string) L, exp *Expectations) (o O, found bool, err error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return o, false, nil
	}
	o, err = byNamespace(ns).Get(name)
	if apierrors.IsNotFound(err) {
		if exp != nil {
			exp.Forget(key)
		}
		return o, false, nil
	}
	return o, err == nil, err
}

// Load is Lookup followed by Candidates: the owner key names and the
// objects of idx (an OwnerIndexer) it controls or could adopt.
func Load[T any, O metav1.Object, L NamespaceLister[O]](key string, byNamespace func(string) L, exp *Expectations, idx cache.Indexer) (owner O, candidates []T, found bool, err error) {
	owner, found, err = Lookup(key, byNamespace, exp)
	if !found {
		return owner, nil, false, err
	}
	candidates, err = Candidates[T](idx, owner)
	return owner, candidates, err == nil, err
}

// Register wires h for one term: the owners' informer queues its owners
// (a delete goes to deleted, see EnqueueFuncs), and each owned informer
// gets OwnerIndex and h's handlers. It returns the owned informers'
// indexers, in order.
func (h *Handlers[O]) Register(owners cache.SharedIndexInformer, deleted func(key string, obj metav1.Object), owned ...cache.SharedIndexInformer) ([]cache.Indexer, error) {
	if _, err := owners.AddEventHandler(EnqueueFuncs(h.Enqueue, deleted)); err != nil {
		return nil, err
	}
	out := make([]cache.Indexer, len(owned))
	for i, inf := range owned {
		idx, err := OwnerIndexer(inf)
		if err != nil {
			return nil, err
		}
		if _, err := inf.AddEventHandler(h.Funcs()); err != nil {
			return nil, err
		}
		out[i] = idx
	}
	return out, nil
}
