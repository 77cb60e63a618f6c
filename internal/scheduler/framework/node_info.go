package framework

import (
	corev1 "k8s.io/api/core/v1"
)

// PodKey identifies a pod in the scheduler's maps: its UID, or
// "namespace/name" for a pod that has none (tests, static manifests).
func PodKey(pod *corev1.Pod) string {
	if pod.UID != "" {
		return string(pod.UID)
	}
	return pod.Namespace + "/" + pod.Name
}

// PodInfo is a pod plus its requests, computed once when the pod enters the
// cache so per-node arithmetic never walks containers again. It is immutable.
type PodInfo struct {
	Pod *corev1.Pod
	// Requests follows ComputePodRequests.
	Requests Resource
	// NonZeroMilliCPU and NonZeroMemory are the requests used for scoring.
	NonZeroMilliCPU int64
	NonZeroMemory   int64
}

// NewPodInfo computes the requests of pod.
func NewPodInfo(pod *corev1.Pod) *PodInfo {
	req, cpu, mem := ComputePodRequests(pod)
	return &PodInfo{Pod: pod, Requests: req, NonZeroMilliCPU: cpu, NonZeroMemory: mem}
}

// NodeInfo is the scheduler's view of one node: the Node object, the pods
// assigned (or assumed) to it and the sum of their requests. Plugins must
// treat it as read-only; the cache hands out copies in its snapshot.
type NodeInfo struct {
	node *corev1.Node

	// Pods are the pods bound or assumed to this node.
	Pods []*PodInfo
	// Requested is the sum of the pods' Requests.
	Requested Resource
	// NonZeroRequested holds the sum of the pods' scoring requests
	// (MilliCPU and Memory only).
	NonZeroRequested Resource
	// Allocatable is node.status.allocatable; AllowedPodNumber is its pods.
	Allocatable Resource
	// Generation is set by the cache each time the NodeInfo changes.
	Generation int64
}

// NewNodeInfo returns the NodeInfo of node (which may be nil while only its
// pods are known) holding pods.
func NewNodeInfo(node *corev1.Node, pods ...*PodInfo) *NodeInfo {
	n := &NodeInfo{}
	n.SetNode(node)
	for _, p := range pods {
		n.AddPod(p)
	}
	return n
}

// Node returns the Node object; nil if the node is not (or no longer) known.
func (n *NodeInfo) Node() *corev1.Node { return n.node }

// Name returns the node's name, or "" when the Node object is unknown.
func (n *NodeInfo) Name() string {
	if n.node == nil {
		return ""
	}
	return n.node.Name
}

// SetNode replaces the Node object and recomputes Allocatable.
func (n *NodeInfo) SetNode(node *corev1.Node) {
	n.node = node
	if node == nil {
		n.Allocatable = Resource{}
		return
	}
	n.Allocatable = NewResource(node.Status.Allocatable)
}

// AddPod accounts pi on the node.
func (n *NodeInfo) AddPod(pi *PodInfo) {
	n.Pods = append(n.Pods, pi)
	n.Requested.Add(&pi.Requests)
	n.NonZeroRequested.MilliCPU += pi.NonZeroMilliCPU
	n.NonZeroRequested.Memory += pi.NonZeroMemory
}

// RemovePod removes the pod with pod's key and reports whether it was there.
func (n *NodeInfo) RemovePod(pod *corev1.Pod) bool {
	key := PodKey(pod)
	for i, pi := range n.Pods {
		if PodKey(pi.Pod) != key {
			continue
		}
		last := len(n.Pods) - 1
		n.Pods[i] = n.Pods[last]
		n.Pods[last] = nil
		n.Pods = n.Pods[:last]
		n.Requested.Sub(&pi.Requests)
		n.NonZeroRequested.MilliCPU -= pi.NonZeroMilliCPU
		n.NonZeroRequested.Memory -= pi.NonZeroMemory
		return true
	}
	return false
}

// Clone returns a copy that shares the immutable Node and PodInfos but not
// the slices or maps, so the original may change afterwards.
func (n *NodeInfo) Clone() *NodeInfo {
	c := &NodeInfo{
		node:             n.node,
		Requested:        n.Requested.Clone(),
		NonZeroRequested: n.NonZeroRequested.Clone(),
		Allocatable:      n.Allocatable.Clone(),
		Generation:       n.Generation,
	}
	if len(n.Pods) > 0 {
		c.Pods = append(make([]*PodInfo, 0, len(n.Pods)+1), n.Pods...)
	}
	return c
}
