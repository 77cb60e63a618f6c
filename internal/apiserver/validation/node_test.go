package validation_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/apiserver/defaults"
	"github.com/nodeplane/nodeplane/internal/apiserver/validation"
)

func validNode() *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"kubernetes.io/hostname": "node-1"}},
		Spec:       corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}, ProviderID: "kwok://node-1"},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("4"),
				corev1.ResourceMemory: resource.MustParse("8Gi"),
				corev1.ResourcePods:   resource.MustParse("110"),
			},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
		},
	}
	defaults.Node(n)
	return n
}

func TestNode(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(n *corev1.Node)
		want   []want
	}{
		{"a complete node is valid", func(*corev1.Node) {}, nil},
		{"a node name with upper-case letters is invalid", func(n *corev1.Node) { n.Name = "Node-1" }, []want{invalid("metadata.name")}},
		{"a node without a name is rejected", func(n *corev1.Node) { n.Name = "" }, []want{required("metadata.name")}},
		{"a node may not have a namespace", func(n *corev1.Node) { n.Namespace = "default" }, []want{forbidden("metadata.namespace")}},
		{"a label with an invalid key is rejected", func(n *corev1.Node) { n.Labels["bad key"] = "x" }, []want{invalid("metadata.labels")}},
		{"a label with an invalid value is rejected", func(n *corev1.Node) { n.Labels["zone"] = "-bad-" }, []want{invalid("metadata.labels")}},
		{"annotations larger than 256 kB are rejected", func(n *corev1.Node) {
			n.Annotations = map[string]string{"a": strings.Repeat("x", 256*1024)}
		}, []want{tooLong("metadata.annotations")}},
		{"an unprefixed non-standard finalizer is rejected", func(n *corev1.Node) { n.Finalizers = []string{"mine"} }, []want{invalid("metadata.finalizers[0]")}},
		{"a taint with an unknown effect is rejected", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: "Sometimes"}}
		}, []want{notSupported("metadata.taints[0].effect")}},
		{"a taint without an effect is rejected", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "k"}}
		}, []want{required("metadata.taints[0].effect")}},
		{"a taint key must be a qualified name", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "not a key", Effect: corev1.TaintEffectNoSchedule}}
		}, []want{invalid("metadata.taints[0].key")}},
		{"a taint value must be a label value", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "k", Value: "no spaces", Effect: corev1.TaintEffectNoSchedule}}
		}, []want{invalid("metadata.taints[0].value")}},
		{"two taints with the same key and effect are rejected", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{
				{Key: "k", Value: "a", Effect: corev1.TaintEffectNoSchedule},
				{Key: "k", Value: "b", Effect: corev1.TaintEffectNoSchedule},
			}
		}, []want{duplicate("metadata.taints[1]")}},
		{"two taints with the same key and different effects are valid", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{
				{Key: "k", Effect: corev1.TaintEffectNoSchedule},
				{Key: "k", Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{}},
			}
		}, nil},
		{"an invalid podCIDR is rejected", func(n *corev1.Node) {
			n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.1.0/33", []string{"10.244.1.0/33"}
		}, []want{invalid("spec.podCIDRs[0]")}},
		{"a legacy podCIDR alone is validated too", func(n *corev1.Node) {
			n.Spec.PodCIDR, n.Spec.PodCIDRs = "banana", nil
		}, []want{invalid("spec.podCIDRs[0]")}},
		{"one IPv4 and one IPv6 podCIDR are valid", func(n *corev1.Node) {
			n.Spec.PodCIDRs = []string{"10.244.1.0/24", "fd00:10:244:1::/64"}
		}, nil},
		{"two IPv4 podCIDRs are rejected", func(n *corev1.Node) {
			n.Spec.PodCIDRs = []string{"10.244.1.0/24", "10.244.2.0/24"}
		}, []want{invalid("spec.podCIDRs")}},
		{"three podCIDRs are rejected", func(n *corev1.Node) {
			n.Spec.PodCIDRs = []string{"10.244.1.0/24", "fd00::/64", "10.244.2.0/24"}
		}, []want{invalid("spec.podCIDRs")}},
		{"a negative capacity is rejected", func(n *corev1.Node) {
			n.Status.Capacity[corev1.ResourceCPU] = resource.MustParse("-1")
		}, []want{invalid("status.capacity.cpu")}},
		{"a fractional pod capacity is rejected", func(n *corev1.Node) {
			n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("1500m")
		}, []want{invalid("status.allocatable.pods")}},
		{"a malformed taints annotation is rejected", func(n *corev1.Node) {
			n.Annotations = map[string]string{"scheduler.alpha.kubernetes.io/taints": "{"}
		}, []want{invalid("metadata.annotations")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := validNode()
			tt.mutate(n)
			checkErrs(t, validation.Node(n), tt.want...)
		})
	}
}

func TestNodeTaintDuplicateMessage(t *testing.T) {
	n := validNode()
	n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}, {Key: "k", Effect: corev1.TaintEffectNoSchedule}}
	checkDetail(t, validation.Node(n), "metadata.taints[1]", "taints must be unique by key and effect pair")
}

func TestNodeUpdate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(n *corev1.Node)
		want   []want
	}{
		{"an update that changes labels and taints is valid", func(n *corev1.Node) {
			n.Labels["role"] = "worker"
			n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
			n.Spec.Unschedulable = true
		}, nil},
		{"podCIDR cannot change once set", func(n *corev1.Node) {
			n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.9.0/24", []string{"10.244.9.0/24"}
		}, []want{forbidden("spec.podCIDRs")}},
		{"podCIDRs cannot gain a second family once set", func(n *corev1.Node) {
			n.Spec.PodCIDRs = append(n.Spec.PodCIDRs, "fd00::/64")
		}, []want{forbidden("spec.podCIDRs")}},
		{"providerID cannot change once set", func(n *corev1.Node) { n.Spec.ProviderID = "kwok://other" }, []want{forbidden("spec.providerID")}},
		{"the name cannot change", func(n *corev1.Node) { n.Name = "node-2" }, []want{invalid("metadata.name")}},
		{"the uid cannot change", func(n *corev1.Node) { n.UID = "other" }, []want{invalid("metadata.uid")}},
		{"an update needs a resourceVersion", func(n *corev1.Node) { n.ResourceVersion = "" }, []want{invalid("metadata.resourceVersion")}},
		{"an invalid label is reported by both the create and the update pass", func(n *corev1.Node) {
			n.Labels["bad key"] = "x"
		}, []want{invalid("metadata.labels"), invalid("metadata.labels")}},
		{"a duplicate address is rejected", func(n *corev1.Node) {
			n.Status.Addresses = append(n.Status.Addresses, n.Status.Addresses[0])
		}, []want{duplicate("status.addresses[1]")}},
		{"a config source without a reference is rejected", func(n *corev1.Node) {
			n.Spec.ConfigSource = &corev1.NodeConfigSource{}
		}, []want{invalid("spec.configSource")}},
		{"a config source in spec may not carry a uid", func(n *corev1.Node) {
			n.Spec.ConfigSource = &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
				Namespace: "kube-system", Name: "kubelet", KubeletConfigKey: "kubelet", UID: "u",
			}}
		}, []want{forbidden("spec.configSource.configMap.uid")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := validNode()
			old.ResourceVersion, old.UID = "1", "uid-1"
			n := old.DeepCopy()
			tt.mutate(n)
			checkErrs(t, validation.NodeUpdate(n, old), tt.want...)
		})
	}
}

func TestNodeUpdateAllowsFirstPodCIDR(t *testing.T) {
	old := validNode()
	old.ResourceVersion = "1"
	old.Spec.PodCIDR, old.Spec.PodCIDRs = "", nil
	n := old.DeepCopy()
	n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.3.0/24", []string{"10.244.3.0/24"}
	checkErrs(t, validation.NodeUpdate(n, old))
	checkDetail(t, validation.NodeUpdate(old, n), "spec.podCIDRs", `node updates may not change podCIDR except from "" to valid`)
}

func TestNodeStatusUpdate(t *testing.T) {
	old := validNode()
	old.ResourceVersion = "1"
	n := old.DeepCopy()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	n.Status.Capacity[corev1.ResourceMemory] = resource.MustParse("-1Gi")
	checkErrs(t, validation.NodeStatusUpdate(n, old), invalid("status.capacity.memory"))
}
