package intern

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// decodedNode returns node i as a decoder would: every string its own copy.
func decodedNode(i int) *corev1.Node {
	own := func(s string) string { return strings.Clone(s) }
	name := fmt.Sprintf("node-%d", i)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: own(name),
			Labels: map[string]string{
				own("kubernetes.io/hostname"):      own(name),
				own("topology.kubernetes.io/zone"): own("eu-west-1a"),
			},
			Annotations: map[string]string{own("csi.volume.kubernetes.io/nodeid"): own(fmt.Sprintf(`{"x":"%d"}`, i))},
		},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: own("node.kubernetes.io/unreachable"), Effect: corev1.TaintEffectNoExecute}}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeConditionType(own("Ready")), Status: corev1.ConditionStatus(own("True")),
				Reason: own("KubeletReady"), Message: own("kubelet is posting ready status")}},
			Images:   []corev1.ContainerImage{{Names: []string{own("registry.k8s.io/pause:3.10")}, SizeBytes: 1}},
			NodeInfo: corev1.NodeSystemInfo{MachineID: own(fmt.Sprintf("m%d", i)), KernelVersion: own("6.1.112"), OSImage: own("Debian 12")},
		},
	}
}

func same(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func TestNodesShareTheStringsTheyRepeat(t *testing.T) {
	tbl := NewTable(0)
	a, b := decodedNode(1), decodedNode(2)
	wantA, wantB := a.DeepCopy(), b.DeepCopy()
	tbl.Object(a)
	tbl.Object(b)
	if !reflect.DeepEqual(a, wantA) || !reflect.DeepEqual(b, wantB) {
		t.Fatal("interning changed a value")
	}
	for _, tt := range []struct {
		name   string
		ga, gb string
		shared bool
	}{
		{"an image name is shared", a.Status.Images[0].Names[0], b.Status.Images[0].Names[0], true},
		{"a condition message is shared", a.Status.Conditions[0].Message, b.Status.Conditions[0].Message, true},
		{"a condition type is shared", string(a.Status.Conditions[0].Type), string(b.Status.Conditions[0].Type), true},
		{"a kernel version is shared", a.Status.NodeInfo.KernelVersion, b.Status.NodeInfo.KernelVersion, true},
		{"a zone label's value is shared", a.Labels["topology.kubernetes.io/zone"], b.Labels["topology.kubernetes.io/zone"], true},
		{"a taint key is shared", a.Spec.Taints[0].Key, b.Spec.Taints[0].Key, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := same(tt.ga, tt.gb); got != tt.shared {
				t.Errorf("%q and %q share their bytes: %v, want %v", tt.ga, tt.gb, got, tt.shared)
			}
		})
	}
	var keyA, keyB string
	for k := range a.Labels {
		if k == "topology.kubernetes.io/zone" {
			keyA = k
		}
	}
	for k := range b.Labels {
		if k == "topology.kubernetes.io/zone" {
			keyB = k
		}
	}
	if !same(keyA, keyB) {
		t.Error("a label key is not shared")
	}
	// Unique values never enter the table: names, the hostname label's
	// value, annotation values, machine IDs.
	for _, unique := range []string{"node-1", "node-2", `{"x":"1"}`, "m1"} {
		tbl.mu.RLock()
		_, in := tbl.m[unique]
		tbl.mu.RUnlock()
		if in {
			t.Errorf("the unique value %q is in the table", unique)
		}
	}
}

func TestATableStopsGrowingAtItsBound(t *testing.T) {
	tbl := NewTable(3)
	for i := range 10 {
		s := fmt.Sprintf("value-%d", i)
		if got := tbl.String(s); got != s {
			t.Fatalf("String(%q) = %q", s, got)
		}
	}
	if n := tbl.Len(); n != 3 {
		t.Fatalf("the table holds %d strings, want its bound 3", n)
	}
	first := strings.Clone("value-0")
	if !same(tbl.String(first), tbl.String("value-0")) || same(tbl.String(first), first) {
		t.Error("a string kept before the bound is not handed out")
	}
}

func TestObjectsOfOtherKindsAreLeftAsTheyAre(t *testing.T) {
	tbl := NewTable(0)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"app": "x"}}}
	want := pod.DeepCopy()
	tbl.Object(pod)
	tbl.Object(nil)
	if !reflect.DeepEqual(pod, want) || tbl.Len() != 0 {
		t.Errorf("a Pod was touched (table holds %d strings)", tbl.Len())
	}
}

// BenchmarkInternNode is the cost of sharing a Node's strings once the table
// holds them (the decode path of the watch cache and the informers).
func BenchmarkInternNode(b *testing.B) {
	tbl := NewTable(0)
	nodes := make([]*corev1.Node, 1000)
	for i := range nodes {
		nodes[i] = decodedNode(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	// Every string is found in the table, as for a freshly decoded Node of
	// a fleet whose strings the table already holds; the label and
	// annotation maps are rebuilt each time, as for a decoded Node.
	for i := range b.N {
		tbl.Node(nodes[i%len(nodes)])
	}
}

func TestADecodedNodeKeepsNoSpareRoomInItsLists(t *testing.T) {
	n := decodedNode(1)
	for _, typ := range []corev1.NodeConditionType{"MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"} {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: typ, Status: corev1.ConditionFalse})
	}
	for i := range 8 {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{fmt.Sprintf("img-%d", i)}, SizeBytes: int64(i)})
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: "node-1"}, {Type: corev1.NodeInternalDNS, Address: "node-1.internal"}}
	raw, err := n.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.Node
	if err := got.Unmarshal(raw); err != nil {
		t.Fatal(err)
	}
	if cap(got.Status.Conditions) == len(got.Status.Conditions) {
		t.Fatalf("the decoder left no spare room (%d conditions in %d): the case this guards against is gone", len(got.Status.Conditions), cap(got.Status.Conditions))
	}
	want := got.DeepCopy()
	NewTable(0).Object(&got)
	if !reflect.DeepEqual(&got, want) {
		t.Fatal("trimming changed a value")
	}
	for _, l := range []struct {
		name     string
		len, cap int
	}{
		{"conditions", len(got.Status.Conditions), cap(got.Status.Conditions)},
		{"images", len(got.Status.Images), cap(got.Status.Images)},
		{"addresses", len(got.Status.Addresses), cap(got.Status.Addresses)},
		{"taints", len(got.Spec.Taints), cap(got.Spec.Taints)},
	} {
		if l.cap != l.len {
			t.Errorf("%s: %d in room for %d", l.name, l.len, l.cap)
		}
	}
}

// listsOf returns a Node as a decoder would, with the given CPU and memory
// capacity (allocatable the same) and images.
func listsOf(cpu, memory string, images ...corev1.ContainerImage) *corev1.Node {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(memory),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	n := decodedNode(1)
	n.Status.Capacity, n.Status.Allocatable = res, res.DeepCopy()
	n.Status.Images = images
	return n
}

func image(size int64, names ...string) corev1.ContainerImage {
	return corev1.ContainerImage{Names: names, SizeBytes: size}
}

func mapOf(l corev1.ResourceList) unsafe.Pointer { return reflect.ValueOf(l).UnsafePointer() }

func TestFrozenNodesShareTheListsTheyRepeat(t *testing.T) {
	pause, dns := image(320_368, "registry.k8s.io/pause:3.10"), image(18_562_039, "registry.k8s.io/coredns/coredns:v1.11.3")
	for _, tt := range []struct {
		name       string
		a, b       *corev1.Node
		resources  bool // capacity and allocatable shared
		images     bool
		modifiable bool // b goes through Object (it may be modified), not Frozen
	}{
		{"nodes of one machine type share capacity, allocatable and images",
			listsOf("8", "32Gi", pause, dns), listsOf("8", "32Gi", pause, dns), true, true, false},
		{"a quantity written another way but serialized alike is shared",
			listsOf("8", "32Gi", pause), listsOf("8000m", "32768Mi", pause), true, true, false},
		{"a different value is not shared",
			listsOf("8", "32Gi", pause), listsOf("8", "31Gi", pause), false, true, false},
		{"an equal value in another format is not shared",
			listsOf("8", "1Ki", pause), listsOf("8", "1024", pause), false, true, false},
		{"images in another order are not shared",
			listsOf("8", "32Gi", pause, dns), listsOf("8", "32Gi", dns, pause), true, false, false},
		{"an image of another size is not shared",
			listsOf("8", "32Gi", pause), listsOf("8", "32Gi", image(1, "registry.k8s.io/pause:3.10")), true, false, false},
		{"an object that may be modified shares no list",
			listsOf("8", "32Gi", pause), listsOf("8", "32Gi", pause), false, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tbl := NewTable(0)
			codec := json.NewSerializerWithOptions(json.DefaultMetaFactory, nil, nil, json.SerializerOptions{})
			before, err := runtime.Encode(codec, tt.b)
			if err != nil {
				t.Fatal(err)
			}
			tbl.Frozen(tt.a)
			if tt.modifiable {
				tbl.Object(tt.b)
			} else {
				tbl.Frozen(tt.b)
			}
			after, err := runtime.Encode(codec, tt.b)
			if err != nil {
				t.Fatal(err)
			}
			if string(before) != string(after) {
				t.Fatalf("sharing changed what the Node serializes to:\n%s\n%s", before, after)
			}
			a, b := &tt.a.Status, &tt.b.Status
			if got := mapOf(a.Capacity) == mapOf(b.Capacity); got != tt.resources {
				t.Errorf("capacity shared: %v, want %v", got, tt.resources)
			}
			if got := mapOf(a.Allocatable) == mapOf(b.Allocatable); got != tt.resources {
				t.Errorf("allocatable shared: %v, want %v", got, tt.resources)
			}
			if got := unsafe.SliceData(a.Images) == unsafe.SliceData(b.Images); got != tt.images {
				t.Errorf("images shared: %v, want %v", got, tt.images)
			}
		})
	}
}

func TestATableSharesAtMostItsBoundOfLists(t *testing.T) {
	tbl := NewTable(0)
	for i := range maxLists + 10 {
		tbl.Frozen(listsOf(fmt.Sprint(i+1), "1Gi"))
	}
	if n := len(tbl.resources) + len(tbl.images); n != maxLists {
		t.Fatalf("the table holds %d lists, want its bound %d", n, maxLists)
	}
	a, b := listsOf("1", "1Gi"), listsOf(fmt.Sprint(maxLists+5), "1Gi")
	tbl.Frozen(a)
	tbl.Frozen(b)
	if mapOf(a.Status.Capacity) == mapOf(b.Status.Capacity) {
		t.Fatal("different lists were made one")
	}
	c := listsOf("1", "1Gi")
	tbl.Frozen(c)
	if mapOf(a.Status.Capacity) != mapOf(c.Status.Capacity) {
		t.Error("a list kept before the bound is not handed out")
	}
}
