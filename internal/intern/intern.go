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
package intern

import (
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// DefaultMax bounds a Table: a fleet's shared strings are a few hundred;
// the bound keeps strings that turn out unique (a label value per node)
// from growing the table without end.
const DefaultMax = 16384

// Table holds one copy of each string it was given, up to its bound; it is
// safe for concurrent use.
type Table struct {
	mu  sync.RWMutex
	m   map[string]string
	max int
}

// NewTable returns an empty table that keeps at most max strings
// (DefaultMax when max <= 0).
func NewTable(max int) *Table {
	if max <= 0 {
		max = DefaultMax
	}
	return &Table{m: map[string]string{}, max: max}
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
