package loadgen

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// NodeLeaseNamespace is where node heartbeat leases live.
const NodeLeaseNamespace = "kube-node-lease"

// leaseDurationSeconds is the kubelet's default nodeLeaseDurationSeconds.
const leaseDurationSeconds = 40

// NodeName returns the name of the i-th load node.
func NodeName(prefix string, i int) string { return fmt.Sprintf("%snode-%06d", prefix, i) }

// nodeImages are the images a typical kubelet reports; they make up most of
// a real Node's size.
var nodeImages = []struct {
	names []string
	size  int64
}{
	{[]string{"registry.k8s.io/kube-proxy@sha256:5d1d4ed2d5ab3fd9a5f0dbe4b9b5b2a3c8c2a5e3f4b9b1d9f3f1e2a1c7e2d1b0", "registry.k8s.io/kube-proxy:v1.33.2"}, 31_142_112},
	{[]string{"docker.io/calico/node@sha256:9a3b5f6c1d2e7f8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a", "docker.io/calico/node:v3.28.1"}, 118_442_517},
	{[]string{"docker.io/calico/cni@sha256:1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c", "docker.io/calico/cni:v3.28.1"}, 94_530_171},
	{[]string{"registry.k8s.io/coredns/coredns@sha256:a0ead06651cf580044aeb0a0feba63591858fb2e43ade8c9dea45a6a89ae7e5e", "registry.k8s.io/coredns/coredns:v1.11.3"}, 18_562_039},
	{[]string{"quay.io/prometheus/node-exporter@sha256:4cb2b9019f1757be8482419002cb7afe028fdba35d47958829e4cfeaf6246d80", "quay.io/prometheus/node-exporter:v1.8.2"}, 12_271_356},
	{[]string{"docker.io/library/nginx@sha256:28402db69fec7c17e179ea87882667f1e054391138f77ffaf0c3eb388efc3ffb", "docker.io/library/nginx:1.27"}, 72_955_450},
	{[]string{"registry.k8s.io/pause@sha256:7031c1b283388d2c2e09b57badb803c05ebed362dc88d84b480cc47f72a21097", "registry.k8s.io/pause:3.10"}, 320_368},
	{[]string{"registry.k8s.io/metrics-server/metrics-server@sha256:ffcb2bf004d6aa0a17d90e0247cf94f2865c8901dcab4427034c341951c239f9", "registry.k8s.io/metrics-server/metrics-server:v0.7.2"}, 19_494_617},
	{[]string{"docker.io/fluent/fluent-bit@sha256:2a4b6c8d0e2f4a6b8c0d2e4f6a8b0c2d4e6f8a0b2c4d6e8f0a2b4c6d8e0f2a4b", "docker.io/fluent/fluent-bit:3.1.9"}, 34_911_220},
}

// NewNode returns a Node as a kubelet on a cloud VM registers and reports
// it: labels, annotations, capacity and allocatable, the five conditions,
// addresses, node info and a list of images — about 4 KB of JSON
// (see TestNewNodeIsRealistic).
func NewNode(name string, i int, now time.Time) *corev1.Node {
	zone := []string{"a", "b", "c"}[i%3]
	ip := fmt.Sprintf("10.%d.%d.%d", 64+i>>16&63, i>>8&255, i&255)
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"beta.kubernetes.io/arch":                "amd64",
				"beta.kubernetes.io/os":                  "linux",
				"kubernetes.io/arch":                     "amd64",
				"kubernetes.io/os":                       "linux",
				"kubernetes.io/hostname":                 name,
				"node.kubernetes.io/instance-type":       "m6i.2xlarge",
				"topology.kubernetes.io/region":          "eu-west-1",
				"topology.kubernetes.io/zone":            "eu-west-1" + zone,
				"failure-domain.beta.kubernetes.io/zone": "eu-west-1" + zone,
				"nodeplane.io/load":                      "true",
			},
			Annotations: map[string]string{
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
				"csi.volume.kubernetes.io/nodeid":                        fmt.Sprintf(`{"ebs.csi.aws.com":"i-%017x"}`, i),
			},
		},
		Spec: corev1.NodeSpec{
			PodCIDR:    fmt.Sprintf("10.%d.%d.0/24", 128+i>>16&63, i>>8&255),
			PodCIDRs:   []string{fmt.Sprintf("10.%d.%d.0/24", 128+i>>16&63, i>>8&255)},
			ProviderID: fmt.Sprintf("aws:///eu-west-1%s/i-%017x", zone, i),
		},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:              resource.MustParse("8"),
				corev1.ResourceMemory:           resource.MustParse("32386544Ki"),
				corev1.ResourcePods:             resource.MustParse("110"),
				corev1.ResourceEphemeralStorage: resource.MustParse("104845292Ki"),
				"hugepages-1Gi":                 resource.MustParse("0"),
				"hugepages-2Mi":                 resource.MustParse("0"),
				"attachable-volumes-aws-ebs":    resource.MustParse("25"),
			},
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU:              resource.MustParse("7910m"),
				corev1.ResourceMemory:           resource.MustParse("31369712Ki"),
				corev1.ResourcePods:             resource.MustParse("110"),
				corev1.ResourceEphemeralStorage: resource.MustParse("95551679124"),
				"hugepages-1Gi":                 resource.MustParse("0"),
				"hugepages-2Mi":                 resource.MustParse("0"),
				"attachable-volumes-aws-ebs":    resource.MustParse("25"),
			},
			Conditions: NodeConditions(now),
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: ip},
				{Type: corev1.NodeInternalDNS, Address: fmt.Sprintf("ip-%s.eu-west-1.compute.internal", ip)},
				{Type: corev1.NodeHostName, Address: name},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID:               fmt.Sprintf("ec2%029x", i),
				SystemUUID:              fmt.Sprintf("ec2%05x-0000-4000-8000-%012x", i&0xfffff, i),
				BootID:                  fmt.Sprintf("%08x-1111-4222-8333-%012x", i, i),
				KernelVersion:           "6.1.112-124.190.amzn2023.x86_64",
				OSImage:                 "Amazon Linux 2023.6.20241010",
				ContainerRuntimeVersion: "containerd://1.7.22",
				KubeletVersion:          "v1.33.2",
				OperatingSystem:         "linux",
				Architecture:            "amd64",
			},
		},
	}
	for _, im := range nodeImages {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: im.names, SizeBytes: im.size})
	}
	return n
}

// NodeConditions returns the five conditions of a healthy node, with
// heartbeat and transition times at now (truncated to seconds, as the API
// stores them).
func NodeConditions(now time.Time) []corev1.NodeCondition {
	t := metav1.NewTime(now.Truncate(time.Second))
	c := func(typ corev1.NodeConditionType, status corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: typ, Status: status, LastHeartbeatTime: t, LastTransitionTime: t, Reason: reason, Message: msg}
	}
	return []corev1.NodeCondition{
		c(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		c(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		c(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		c(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
		c(corev1.NodeNetworkUnavailable, corev1.ConditionFalse, "CalicoIsUp", "Calico is running on this node"),
	}
}

// NewLease returns a node's heartbeat lease as the kubelet creates it,
// owned by the node when node is non-nil.
func NewLease(name string, now time.Time, node *corev1.Node) *coordinationv1.Lease {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: NodeLeaseNamespace},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(name),
			LeaseDurationSeconds: ptr.To[int32](leaseDurationSeconds),
			RenewTime:            &metav1.MicroTime{Time: now},
		},
	}
	if node != nil {
		l.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
		}}
	}
	return l
}
