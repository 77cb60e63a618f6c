package podstatus

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func requests(kv ...string) corev1.ResourceRequirements {
	l := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return corev1.ResourceRequirements{Requests: l}
}

func testNode(alloc ...string) *corev1.Node {
	l := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")}
	for i := 0; i+1 < len(alloc); i += 2 {
		l[corev1.ResourceName(alloc[i])] = resource.MustParse(alloc[i+1])
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a", "size": "8"}},
		Status:     corev1.NodeStatus{Allocatable: l},
	}
}

func podWith(name string, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid")},
		Spec: corev1.PodSpec{
			NodeName:   "n1",
			Containers: []corev1.Container{{Name: "c", Image: "sleep"}},
		},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func withRequests(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Resources = requests(kv...) }
}

func always() *corev1.ContainerRestartPolicy {
	p := corev1.ContainerRestartPolicyAlways
	return &p
}

func TestAdmit(t *testing.T) {
	cpuNode := testNode("cpu", "1", "memory", "1Gi", "ephemeral-storage", "10Gi")
	tests := []struct {
		name        string
		pod         *corev1.Pod
		node        *corev1.Node
		running     []*corev1.Pod
		wantReason  string
		wantMessage string
	}{
		{
			name: "a pod that fits is admitted",
			pod:  podWith("p", withRequests("cpu", "500m", "memory", "512Mi")),
			node: cpuNode,
			running: []*corev1.Pod{
				podWith("other", withRequests("cpu", "500m", "memory", "512Mi")),
			},
		},
		{
			name:        "a pod asking more cpu than is left is refused with the kubelet's numbers",
			pod:         podWith("p", withRequests("cpu", "2")),
			node:        cpuNode,
			running:     []*corev1.Pod{podWith("other", withRequests("cpu", "500m"))},
			wantReason:  "OutOfcpu",
			wantMessage: "Node didn't have enough resource: cpu, requested: 2000, used: 500, capacity: 1000",
		},
		{
			name:        "memory is compared in bytes",
			pod:         podWith("p", withRequests("memory", "1Gi")),
			node:        cpuNode,
			running:     []*corev1.Pod{podWith("other", withRequests("memory", "1Mi"))},
			wantReason:  "OutOfmemory",
			wantMessage: "Node didn't have enough resource: memory, requested: 1073741824, used: 1048576, capacity: 1073741824",
		},
		{
			name:        "ephemeral storage is checked",
			pod:         podWith("p", withRequests("ephemeral-storage", "11Gi")),
			node:        cpuNode,
			wantReason:  "OutOfephemeral-storage",
			wantMessage: "Node didn't have enough resource: ephemeral-storage, requested: 11811160064, used: 0, capacity: 10737418240",
		},
		{
			name: "the pod count is checked first",
			pod:  podWith("p", withRequests("cpu", "5")),
			node: func() *corev1.Node {
				n := testNode("cpu", "1")
				n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("1")
				return n
			}(),
			running:     []*corev1.Pod{podWith("other", nil)},
			wantReason:  "OutOfpods",
			wantMessage: "Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1",
		},
		{
			name: "finished pods and the pod itself do not count",
			pod:  podWith("p", withRequests("cpu", "1")),
			node: func() *corev1.Node {
				n := testNode("cpu", "1")
				n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("1")
				return n
			}(),
			running: []*corev1.Pod{
				podWith("done", func(p *corev1.Pod) {
					withRequests("cpu", "1")(p)
					p.Status.Phase = corev1.PodSucceeded
				}),
				podWith("failed", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
				podWith("p", withRequests("cpu", "1")),
			},
		},
		{
			name: "an init container asking more than the containers sets the pod's request",
			pod: podWith("p", func(p *corev1.Pod) {
				withRequests("cpu", "200m")(p)
				p.Spec.InitContainers = []corev1.Container{
					{Name: "i1", Resources: requests("cpu", "1500m")},
					{Name: "i2", Resources: requests("cpu", "100m")},
				}
			}),
			node:        cpuNode,
			wantReason:  "OutOfcpu",
			wantMessage: "Node didn't have enough resource: cpu, requested: 1500, used: 0, capacity: 1000",
		},
		{
			name: "overhead is added on top of the containers",
			pod: podWith("p", func(p *corev1.Pod) {
				withRequests("cpu", "900m")(p)
				p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
			}),
			node:        cpuNode,
			wantReason:  "OutOfcpu",
			wantMessage: "Node didn't have enough resource: cpu, requested: 1150, used: 0, capacity: 1000",
		},
		{
			name: "the running pods' init containers and overhead count too",
			pod:  podWith("p", withRequests("cpu", "100m")),
			node: cpuNode,
			running: []*corev1.Pod{podWith("other", func(p *corev1.Pod) {
				withRequests("cpu", "100m")(p)
				p.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: requests("cpu", "800m")}}
				p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("150m")}
			})},
			wantReason:  "OutOfcpu",
			wantMessage: "Node didn't have enough resource: cpu, requested: 100, used: 950, capacity: 1000",
		},
		{
			name: "a sidecar runs alongside the containers and the later init containers",
			pod: podWith("p", func(p *corev1.Pod) {
				withRequests("cpu", "300m")(p)
				p.Spec.InitContainers = []corev1.Container{
					{Name: "side", RestartPolicy: always(), Resources: requests("cpu", "400m")},
					{Name: "init", Resources: requests("cpu", "700m")},
				}
			}),
			node:        cpuNode,
			wantReason:  "OutOfcpu",
			wantMessage: "Node didn't have enough resource: cpu, requested: 1100, used: 0, capacity: 1000",
		},
		{
			name:        "an extended resource the node advertises is checked",
			pod:         podWith("p", withRequests("example.com/gpu", "2")),
			node:        testNode("example.com/gpu", "1"),
			wantReason:  "OutOfexample.com/gpu",
			wantMessage: "Node didn't have enough resource: example.com/gpu, requested: 2, used: 0, capacity: 1",
		},
		{
			name: "an extended resource the node does not know is ignored",
			pod:  podWith("p", withRequests("example.com/gpu", "2")),
			node: testNode(),
		},
		{
			name: "a nodeSelector the node's labels do not satisfy is refused",
			pod: podWith("p", func(p *corev1.Pod) {
				p.Spec.NodeSelector = map[string]string{"zone": "b"}
			}),
			node:        testNode(),
			wantReason:  "NodeAffinity",
			wantMessage: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
		},
		{
			name: "a required node affinity term that matches admits the pod",
			pod: podWith("p", func(p *corev1.Pod) {
				p.Spec.NodeSelector = map[string]string{"zone": "a"}
				p.Spec.Affinity = affinity(
					corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"x"}}}},
					corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
						{Key: "size", Operator: corev1.NodeSelectorOpGt, Values: []string{"4"}},
						{Key: "gpu", Operator: corev1.NodeSelectorOpDoesNotExist},
					}},
				)
			}),
			node: testNode(),
		},
		{
			name: "required node affinity is matched against the node name with matchFields",
			pod: podWith("p", func(p *corev1.Pod) {
				p.Spec.Affinity = affinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
					{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"n1"}},
				}})
			}),
			node:        testNode(),
			wantReason:  "NodeAffinity",
			wantMessage: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
		},
		{
			name: "an empty node selector term matches nothing",
			pod: podWith("p", func(p *corev1.Pod) {
				p.Spec.Affinity = affinity(corev1.NodeSelectorTerm{})
			}),
			node:       testNode(),
			wantReason: "NodeAffinity",
		},
		{
			name:        "a pod bound to another node is refused",
			pod:         podWith("p", func(p *corev1.Pod) { p.Spec.NodeName = "n2" }),
			node:        testNode(),
			wantReason:  "NodeName",
			wantMessage: "Predicate NodeName failed: node(s) didn't match the requested node name",
		},
		{
			name: "a host port already taken is refused",
			pod: podWith("p", func(p *corev1.Pod) {
				p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
			}),
			node: testNode(),
			running: []*corev1.Pod{podWith("other", func(p *corev1.Pod) {
				p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, HostIP: "10.0.0.1", Protocol: corev1.ProtocolTCP}}
			})},
			wantReason:  "NodePorts",
			wantMessage: "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports",
		},
		{
			name: "the same host port with another protocol is free",
			pod: podWith("p", func(p *corev1.Pod) {
				p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 53, HostPort: 53, Protocol: corev1.ProtocolUDP}}
			}),
			node: testNode(),
			running: []*corev1.Pod{podWith("other", func(p *corev1.Pod) {
				p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 53, HostPort: 53}}
			})},
		},
		{
			name: "an untolerated NoExecute taint is refused",
			pod:  podWith("p", nil),
			node: func() *corev1.Node {
				n := testNode()
				n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoExecute}}
				return n
			}(),
			wantReason:  "TaintToleration",
			wantMessage: "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate",
		},
		{
			name: "a tolerated NoExecute taint and an untolerated NoSchedule taint are accepted",
			pod: podWith("p", func(p *corev1.Pod) {
				p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db"}}
			}),
			node: func() *corev1.Node {
				n := testNode()
				n.Spec.Taints = []corev1.Taint{
					{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoExecute},
					{Key: "other", Effect: corev1.TaintEffectNoSchedule},
				}
				return n
			}(),
		},
		{
			name: "a toleration with the wrong value does not tolerate",
			pod: podWith("p", func(p *corev1.Pod) {
				p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoExecute}}
			}),
			node: func() *corev1.Node {
				n := testNode()
				n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoExecute}}
				return n
			}(),
			wantReason: "TaintToleration",
		},
		{
			name: "resources are checked before affinity",
			pod: podWith("p", func(p *corev1.Pod) {
				withRequests("cpu", "4")(p)
				p.Spec.NodeSelector = map[string]string{"zone": "nowhere"}
			}),
			node:       cpuNode,
			wantReason: "OutOfcpu",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, reason, message := Admit(tt.pod, tt.node, tt.running)
			if ok != (tt.wantReason == "") {
				t.Fatalf("Admit ok = %v (reason %q, message %q), want %v", ok, reason, message, tt.wantReason == "")
			}
			if reason != tt.wantReason {
				t.Errorf("reason = %q, want %q", reason, tt.wantReason)
			}
			if tt.wantMessage != "" && message != tt.wantMessage {
				t.Errorf("message = %q, want %q", message, tt.wantMessage)
			}
		})
	}
}

func affinity(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
	}}
}

func TestPodRequestsUsesPodLevelResources(t *testing.T) {
	p := podWith("p", withRequests("cpu", "100m", "memory", "1Gi"))
	p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
	got := PodRequests(p)
	if cpu := got.Cpu().MilliValue(); cpu != 2000 {
		t.Errorf("cpu = %dm, want 2000m (pod-level request wins)", cpu)
	}
	if mem := got.Memory().Value(); mem != 1<<30 {
		t.Errorf("memory = %d, want %d (from the container)", mem, 1<<30)
	}
}
