// Package intern shares, between the decoded objects of a fleet, the
// strings they all repeat.
//
// A Node decoded from protobuf owns a copy of every string in it. Nodes of a
// fleet repeat most of theirs — image names, label keys and the values of
// zone, region and instance type, condition reasons and messages, kernel,
// OS and runtime versions — and those copies are about a quarter of a
// decoded Node (8.2 KB → 6.3 KB for the load generator's realistic Nodes,
// docs/performance.md). The watch cache keeps a decoded copy of every Node
// (and so do informers that are not handed the server's own objects, see
// package loopback), so one shared copy of each such string saves about 4 KB
// per node.
//
// Objects nobody will ever modify — a watch cache's, an informer's — may
// share more than strings: Frozen also gives Nodes of one machine type a
// single copy of their capacity, allocatable and image lists (about 2.2 KB
// of a decoded Node's 5.3 KB, docs/performance.md).
package intern

import (
	"hash/maphash"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// DefaultMax bounds a Table: a fleet's shared strings are a few hundred;
// the bound keeps strings that turn out unique (a label value per node)
// from growing the table without end.
const DefaultMax = 16384

// maxLists bounds the lists a Table shares: a fleet has a few machine
// types and image sets; nodes whose lists are their own (a memory size per
// node) stop adding to the table once it is full.
const maxLists = 4096

// Table holds one copy of each string it was given, up to its bound, and
// of each list frozen objects repeat; it is safe for concurrent use.
type Table struct {
	mu  sync.RWMutex
	m   map[string]string
	max int

	seed maphash.Seed
	// resources and images hold one list per content hash; a list whose
	// hash is taken by a different list stays its object's own.
	resources map[uint64]corev1.ResourceList
	images    map[uint64][]corev1.ContainerImage
}

// NewTable returns an empty table that keeps at most max strings
// (DefaultMax when max <= 0).
func NewTable(max int) *Table {
	if max <= 0 {
		max = DefaultMax
	}
	return &Table{
		m: map[string]string{}, max: max, seed: maphash.MakeSeed(),
		resources: map[uint64]corev1.ResourceList{},
		images:    map[uint64][]corev1.ContainerImage{},
	}
}

// Len returns the number of strings the table holds.
func (t *Table) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}

// String returns the table's copy of s, keeping s as that copy when the
// table has none yet and has room.
func (t *Table) String(s string) string {
	if s == "" {
		return s
	}
	t.mu.RLock()
	v, ok := t.m[s]
	full := len(t.m) >= t.max
	t.mu.RUnlock()
	if ok {
		return v
	}
	if full {
		// A full table is not locked for writing again: the strings that
		// filled it are the ones shared, the rest stay their objects' own.
		return s
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.m[s]; ok {
		return v
	}
	if len(t.m) < t.max {
		t.m[s] = s
	}
	return s
}

// Object shares the repeated strings of obj when it is of a kind the table
// knows (a Node); other objects are left as they are. obj must not be
// shared yet: its fields are replaced by equal strings.
func (t *Table) Object(obj any) {
	if n, ok := obj.(*corev1.Node); ok {
		t.Node(n)
	}
}

// Frozen does what Object does and, since obj will never be modified (the
// watch cache's objects and informers' are shared by every reader), also
// replaces a Node's capacity, allocatable and image lists by an equal list
// another frozen Node holds. Equal means what the API would serialize
// equally: the same resource names with quantities of equal value and
// format, the same images with the same names in the same order and sizes.
func (t *Table) Frozen(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	t.Node(n)
	st := &n.Status
	st.Capacity = t.resourceList(st.Capacity)
	st.Allocatable = t.resourceList(st.Allocatable)
	st.Images = t.imageList(st.Images)
}

// resourceList returns the table's list equal to l, keeping l as that list
// when the table has none yet and has room.
func (t *Table) resourceList(l corev1.ResourceList) corev1.ResourceList {
	if len(l) == 0 {
		return l
	}
	// Map order is random: the hash adds up one hash per entry. A
	// quantity enters it by its value in thousandths (equal values, equal
	// hashes; the rare values that differ below that only collide, and
	// equality below decides).
	var h uint64
	for name, q := range l {
		var e maphash.Hash
		e.SetSeed(t.seed)
		e.WriteString(string(name))
		e.WriteByte(0)
		m := q.MilliValue()
		for range 8 {
			e.WriteByte(byte(m))
			m >>= 8
		}
		e.WriteString(string(q.Format))
		h += e.Sum64()
	}
	return shareList(t, t.resources, h, l, equalResources)
}

// equalResources reports whether a and b serialize alike: a quantity is
// written in the canonical form of its value and format.
func equalResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, qa := range a {
		qb, ok := b[name]
		if !ok || qa.Format != qb.Format || qa.Cmp(qb) != 0 {
			return false
		}
	}
	return true
}

// imageList returns the table's list equal to l, keeping l as that list
// when the table has none yet and has room.
func (t *Table) imageList(l []corev1.ContainerImage) []corev1.ContainerImage {
	if len(l) == 0 {
		return l
	}
	var e maphash.Hash
	e.SetSeed(t.seed)
	for _, im := range l {
		for _, name := range im.Names {
			e.WriteString(name)
			e.WriteByte(0)
		}
		sz := im.SizeBytes
		for range 8 {
			e.WriteByte(byte(sz))
			sz >>= 8
		}
	}
	return shareList(t, t.images, e.Sum64(), l, equalImages)
}

func equalImages(a, b []corev1.ContainerImage) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.ContainerImage) bool {
		return x.SizeBytes == y.SizeBytes && slices.Equal(x.Names, y.Names)
	})
}

// shareList looks l up in lists under hash h.
func shareList[L any](t *Table, lists map[uint64]L, h uint64, l L, equal func(a, b L) bool) L {
	t.mu.RLock()
	v, ok := lists[h]
	full := len(t.resources)+len(t.images) >= maxLists
	t.mu.RUnlock()
	if ok {
		if equal(v, l) {
			return v
		}
		return l
	}
	if full {
		return l
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := lists[h]; ok {
		if equal(v, l) {
			return v
		}
		return l
	}
	if len(t.resources)+len(t.images) < maxLists {
		lists[h] = l
	}
	return l
}

// hostnameLabel's value is the node's name: unique, never worth a copy in
// the table.
const hostnameLabel = "kubernetes.io/hostname"

// Node shares the strings nodes of a fleet repeat; names, UIDs, addresses,
// machine and boot IDs and the hostname label's value stay the node's own.
func (t *Table) Node(n *corev1.Node) {
	n.Labels = t.labels(n.Labels)
	if len(n.Annotations) > 0 {
		a := make(map[string]string, len(n.Annotations))
		for k, v := range n.Annotations {
			a[t.String(k)] = v
		}
		n.Annotations = a
	}
	n.Spec.Taints = exact(n.Spec.Taints)
	for i := range n.Spec.Taints {
		tn := &n.Spec.Taints[i]
		tn.Key, tn.Value = t.String(tn.Key), t.String(tn.Value)
	}
	st := &n.Status
	// The decoder grows these by appending (five conditions sit in room
	// for eight, nine images in room for sixteen): about 600 bytes of
	// spare capacity per Node, kept for as long as the Node is.
	st.Conditions = exact(st.Conditions)
	st.Images = exact(st.Images)
	st.Addresses = exact(st.Addresses)
	st.VolumesAttached = exact(st.VolumesAttached)
	for i := range st.Conditions {
		c := &st.Conditions[i]
		c.Type = corev1.NodeConditionType(t.String(string(c.Type)))
		c.Status = corev1.ConditionStatus(t.String(string(c.Status)))
		c.Reason, c.Message = t.String(c.Reason), t.String(c.Message)
	}
	for i := range st.Images {
		names := st.Images[i].Names
		for j := range names {
			names[j] = t.String(names[j])
		}
	}
	ni := &st.NodeInfo
	ni.KernelVersion = t.String(ni.KernelVersion)
	ni.OSImage = t.String(ni.OSImage)
	ni.ContainerRuntimeVersion = t.String(ni.ContainerRuntimeVersion)
	ni.KubeletVersion = t.String(ni.KubeletVersion)
	ni.KubeProxyVersion = t.String(ni.KubeProxyVersion)
	ni.OperatingSystem = t.String(ni.OperatingSystem)
	ni.Architecture = t.String(ni.Architecture)
}

// exact returns s in an array of its own length.
func exact[T any](s []T) []T {
	if cap(s) == len(s) {
		return s
	}
	return slices.Clone(s)
}

// labels returns a copy of l with shared keys and values (the hostname
// label's value excepted).
func (t *Table) labels(l map[string]string) map[string]string {
	if len(l) == 0 {
		return l
	}
	out := make(map[string]string, len(l))
	for k, v := range l {
		if k != hostnameLabel {
			v = t.String(v)
		}
		out[t.String(k)] = v
	}
	return out
}
