package store

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// Handed writes: over a backend whose watch events carry the value slice a
// write stored (storage.ValuesPassedThrough), Update records that slice
// and a copy of the object it encodes, and the cache's apply takes the
// copy for that event instead of decoding the value again (Config.HandWrites).

// handedWrite is a write's stored value (its first byte and length) and
// the object it encodes, without its new resourceVersion.
type handedWrite struct {
	value *byte
	n     int
	obj   runtime.Object
}

// hand records that value, about to be stored under key, encodes obj: when
// its event comes, apply takes obj (which nobody may modify any more)
// instead of decoding value. A later hand for the key replaces it.
func (c *cache) hand(key string, value []byte, obj runtime.Object) {
	c.handMu.Lock()
	c.handed[key] = handedWrite{value: &value[0], n: len(value), obj: obj}
	c.handMu.Unlock()
}

// unhand forgets what hand recorded for value (its write failed).
func (c *cache) unhand(key string, value []byte) {
	c.handMu.Lock()
	if h, ok := c.handed[key]; ok && h.value == &value[0] {
		delete(c.handed, key)
	}
	c.handMu.Unlock()
}

// takeHanded returns the object handed for a put of value under key (nil
// if none), and forgets it. A delete (value nil) forgets what the key had.
func (c *cache) takeHanded(key string, value []byte) runtime.Object {
	c.handMu.Lock()
	defer c.handMu.Unlock()
	h, ok := c.handed[key]
	if !ok {
		return nil
	}
	if len(value) == 0 {
		delete(c.handed, key)
		return nil
	}
	if h.value != &value[0] || h.n != len(value) {
		return nil // another write's (an earlier one's event, or a later hand)
	}
	delete(c.handed, key)
	return h.obj
}

// dropHanded forgets every handed write (the cache reloads: their events
// may be covered by the load and never come).
func (c *cache) dropHanded() {
	c.handMu.Lock()
	clear(c.handed)
	c.handMu.Unlock()
}

// handCopy returns the copy of obj that Update hands to the watch cache:
// a shallow copy, so that the writer may set its own object's
// resourceVersion while the cache sets the copy's, with its metadata's
// empty maps and lists made absent, as a decode makes them. What the two
// share (maps, slices, pointed-to values) is never modified once written:
// the caller of Update only reads the object it gets back, and the
// cache's objects are read only. The copy is interned as a decoded one.
func (s *Store) handCopy(obj runtime.Object) (runtime.Object, error) {
	v := reflect.ValueOf(obj)
	cp := reflect.New(v.Type().Elem())
	cp.Elem().Set(v.Elem())
	out, ok := cp.Interface().(runtime.Object)
	if !ok {
		return nil, fmt.Errorf("copy of a %T is not an object", obj)
	}
	a, err := meta.Accessor(out)
	if err != nil {
		return nil, err
	}
	if len(a.GetLabels()) == 0 {
		a.SetLabels(nil)
	}
	if len(a.GetAnnotations()) == 0 {
		a.SetAnnotations(nil)
	}
	if len(a.GetOwnerReferences()) == 0 {
		a.SetOwnerReferences(nil)
	}
	if len(a.GetFinalizers()) == 0 {
		a.SetFinalizers(nil)
	}
	if len(a.GetManagedFields()) == 0 {
		a.SetManagedFields(nil)
	}
	if s.cfg.InternCached != nil {
		s.cfg.InternCached(out)
	}
	return out, nil
}
