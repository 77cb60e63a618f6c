// Package frameworktest builds pods, nodes and NodeInfos for the scheduler's
// tests. It is imported only by _test files and must not be used by
// production code.
package frameworktest

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
)

// List builds a ResourceList from name/quantity pairs.
func List(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// PodOption changes a pod under construction.
type PodOption func(*corev1.Pod)

// Pod returns a pod in namespace "default" with UID "<name>-uid" and no
// containers unless options add some.
func Pod(name string, opts ...PodOption) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid")}}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Container adds a regular container requesting kv.
func Container(kv ...string) PodOption {
	return func(p *corev1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{
			Name: "c", Image: "sleep", Resources: corev1.ResourceRequirements{Requests: List(kv...)},
		})
	}
}

// InitContainer adds a (non-restartable) init container requesting kv.
func InitContainer(kv ...string) PodOption {
	return func(p *corev1.Pod) {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{
			Name: "init", Image: "sleep", Resources: corev1.ResourceRequirements{Requests: List(kv...)},
		})
	}
}

// Sidecar adds a restartable init container (restartPolicy Always)
// requesting kv.
func Sidecar(kv ...string) PodOption {
	return func(p *corev1.Pod) {
		always := corev1.ContainerRestartPolicyAlways
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{
			Name: "sidecar", Image: "sleep", RestartPolicy: &always,
			Resources: corev1.ResourceRequirements{Requests: List(kv...)},
		})
	}
}

// Overhead sets spec.overhead.
func Overhead(kv ...string) PodOption {
	return func(p *corev1.Pod) { p.Spec.Overhead = List(kv...) }
}

// PodLevelRequests sets spec.resources.requests.
func PodLevelRequests(kv ...string) PodOption {
	return func(p *corev1.Pod) { p.Spec.Resources = &corev1.ResourceRequirements{Requests: List(kv...)} }
}

// Labels sets the pod's labels from key/value pairs.
func Labels(kv ...string) PodOption {
	return func(p *corev1.Pod) { p.Labels = pairs(kv) }
}

// NodeSelector sets spec.nodeSelector from key/value pairs.
func NodeSelector(kv ...string) PodOption {
	return func(p *corev1.Pod) { p.Spec.NodeSelector = pairs(kv) }
}

// Tolerations sets spec.tolerations.
func Tolerations(t ...corev1.Toleration) PodOption {
	return func(p *corev1.Pod) { p.Spec.Tolerations = t }
}

// OnNode sets spec.nodeName.
func OnNode(name string) PodOption {
	return func(p *corev1.Pod) { p.Spec.NodeName = name }
}

// Priority sets spec.priority.
func Priority(v int32) PodOption {
	return func(p *corev1.Pod) { p.Spec.Priority = &v }
}

// OwnedBy makes the pod controlled by kind/name.
func OwnedBy(kind, name string) PodOption {
	return func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{
			APIVersion: "apps/v1", Kind: kind, Name: name, UID: types.UID(name + "-uid"), Controller: &yes,
		})
	}
}

// Spread adds a topology spread constraint over key selecting the pod's own
// labels.
func Spread(key string, maxSkew int32, when corev1.UnsatisfiableConstraintAction, selector map[string]string) PodOption {
	return func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: when,
			LabelSelector: &metav1.LabelSelector{MatchLabels: selector},
		})
	}
}

// NodeOption changes a node under construction.
type NodeOption func(*corev1.Node)

// Node returns a node with kubernetes.io/hostname=name and allocatable cpu 4,
// memory 8Gi, ephemeral-storage 100Gi, pods 110.
func Node(name string, opts ...NodeOption) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{
			Allocatable: List("cpu", "4", "memory", "8Gi", "ephemeral-storage", "100Gi", "pods", "110"),
		},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

// Allocatable replaces status.allocatable.
func Allocatable(kv ...string) NodeOption {
	return func(n *corev1.Node) { n.Status.Allocatable = List(kv...) }
}

// NodeLabels adds labels from key/value pairs.
func NodeLabels(kv ...string) NodeOption {
	return func(n *corev1.Node) {
		for k, v := range pairs(kv) {
			n.Labels[k] = v
		}
	}
}

// Zone sets topology.kubernetes.io/zone.
func Zone(z string) NodeOption { return NodeLabels(corev1.LabelTopologyZone, z) }

// Taints sets spec.taints.
func Taints(t ...corev1.Taint) NodeOption {
	return func(n *corev1.Node) { n.Spec.Taints = t }
}

// Cordoned sets spec.unschedulable.
func Cordoned() NodeOption {
	return func(n *corev1.Node) { n.Spec.Unschedulable = true }
}

// NodeInfo returns the NodeInfo of node holding pods.
func NodeInfo(node *corev1.Node, pods ...*corev1.Pod) *framework.NodeInfo {
	ni := framework.NewNodeInfo(node)
	for _, p := range pods {
		ni.AddPod(framework.NewPodInfo(p))
	}
	return ni
}

func pairs(kv []string) map[string]string {
	m := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}
