package podstatus

import (
	"fmt"
	goruntime "runtime"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Admission rejection reasons, as the kubelet writes them into
// Pod.status.reason (and as the reason of the Warning event).
const (
	ReasonOutOfCPU              = "OutOfcpu"
	ReasonOutOfMemory           = "OutOfmemory"
	ReasonOutOfEphemeralStorage = "OutOfephemeral-storage"
	ReasonOutOfPods             = "OutOfpods"
	// Other exhausted resources are reported as "OutOf" + resource name.
	reasonOutOfPrefix = "OutOf"

	ReasonNodeAffinity    = "NodeAffinity"
	ReasonNodeName        = "NodeName"
	ReasonNodePorts       = "NodePorts"
	ReasonTaintToleration = "TaintToleration"

	ReasonOSSelectorMismatch = "PodOSSelectorNodeLabelDoesNotMatch"
	ReasonOSNotSupported     = "PodOSNotSupported"
)

// Admit decides whether the node accepts pod, the way the kubelet's
// admission does before it starts anything: the pod's OS, then resources
// (pod count, cpu, memory, ephemeral-storage, other resources the node
// advertises) against node.status.allocatable minus what running requests,
// then nodeSelector / required node affinity, spec.nodeName, host ports, and
// finally NoExecute taints the pod does not tolerate (NoSchedule taints are
// the scheduler's business). The first failing check gives reason and
// message (message without the "Pod was rejected: " prefix that Rejected
// adds).
//
// running are the pods already admitted to the node; terminal pods
// (Succeeded, Failed) and pod itself (same UID) are ignored.
func Admit(pod *corev1.Pod, node *corev1.Node, running []*corev1.Pod) (ok bool, reason, message string) {
	if os, set := pod.Labels[corev1.LabelOSStable]; set && os != goruntime.GOOS {
		return false, ReasonOSSelectorMismatch, "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"
	}
	if pod.Spec.OS != nil && string(pod.Spec.OS.Name) != goruntime.GOOS {
		return false, ReasonOSNotSupported, "Failed to admit pod as the OS field doesn't match node OS"
	}

	others := make([]*corev1.Pod, 0, len(running))
	for _, p := range running {
		if p == nil || p.UID == pod.UID || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		others = append(others, p)
	}

	if short, ok := checkResources(pod, node, others); !ok {
		return false, short.reason(), short.message()
	}
	if !MatchesNodeSelector(pod, node) {
		return false, ReasonNodeAffinity, predicateMessage(ReasonNodeAffinity, "node(s) didn't match Pod's node affinity/selector")
	}
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		return false, ReasonNodeName, predicateMessage(ReasonNodeName, "node(s) didn't match the requested node name")
	}
	if hostPortsConflict(pod, others) {
		return false, ReasonNodePorts, predicateMessage(ReasonNodePorts, "node(s) didn't have free ports for the requested pod ports")
	}
	if _, untolerated := UntoleratedTaint(node.Spec.Taints, pod.Spec.Tolerations, corev1.TaintEffectNoExecute); untolerated {
		return false, ReasonTaintToleration, predicateMessage(ReasonTaintToleration, "node(s) had taints that the pod didn't tolerate")
	}
	return true, "", ""
}

func predicateMessage(name, desc string) string {
	return fmt.Sprintf("Predicate %s failed: %s", name, desc)
}

// shortage is one resource the node does not have enough of.
type shortage struct {
	resource                  corev1.ResourceName
	requested, used, capacity int64
}

func (s shortage) reason() string {
	switch s.resource {
	case corev1.ResourceCPU:
		return ReasonOutOfCPU
	case corev1.ResourceMemory:
		return ReasonOutOfMemory
	case corev1.ResourceEphemeralStorage:
		return ReasonOutOfEphemeralStorage
	case corev1.ResourcePods:
		return ReasonOutOfPods
	}
	return reasonOutOfPrefix + string(s.resource)
}

func (s shortage) message() string {
	return fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
		s.resource, s.requested, s.used, s.capacity)
}

// checkResources returns the first resource the pod does not fit in, in the
// kubelet's order: pod count, cpu, memory, ephemeral-storage, then other
// resources by name.
func checkResources(pod *corev1.Pod, node *corev1.Node, others []*corev1.Pod) (shortage, bool) {
	alloc := node.Status.Allocatable
	if maxPods := alloc.Pods().Value(); int64(len(others))+1 > maxPods {
		return shortage{corev1.ResourcePods, 1, int64(len(others)), maxPods}, false
	}
	want := PodRequests(pod)
	used := corev1.ResourceList{}
	for _, p := range others {
		addList(used, PodRequests(p))
	}
	native := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}
	for _, name := range native {
		req := amount(name, want)
		if req <= 0 {
			continue
		}
		capacity, inUse := amount(name, alloc), amount(name, used)
		if req > capacity-inUse {
			return shortage{name, req, inUse, capacity}, false
		}
	}
	var extra []corev1.ResourceName
	for name := range want {
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage || name == corev1.ResourcePods {
			continue
		}
		if _, advertised := alloc[name]; !advertised && isExtendedResource(name) {
			// The kubelet ignores extended resources it does not know
			// (cluster-level or DRA-backed ones).
			continue
		}
		extra = append(extra, name)
	}
	sort.Slice(extra, func(i, j int) bool { return extra[i] < extra[j] })
	for _, name := range extra {
		req := amount(name, want)
		if req <= 0 {
			continue
		}
		capacity, inUse := amount(name, alloc), amount(name, used)
		if req > capacity-inUse {
			return shortage{name, req, inUse, capacity}, false
		}
	}
	return shortage{}, true
}

// isExtendedResource tells whether name is a vendor resource
// ("example.com/gpu"): it has a domain outside kubernetes.io.
func isExtendedResource(name corev1.ResourceName) bool {
	s := string(name)
	return strings.Contains(s, "/") && !strings.HasPrefix(s, corev1.ResourceDefaultNamespacePrefix) &&
		!strings.HasPrefix(s, "requests.")
}

// amount is the quantity in the unit the kubelet compares in: millicores for
// cpu, plain integers (bytes, counts) for everything else.
func amount(name corev1.ResourceName, l corev1.ResourceList) int64 {
	q, ok := l[name]
	if !ok {
		return 0
	}
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// PodRequests is what the pod asks of the node while it runs: the sum of
// its containers' requests (sidecars — init containers with restartPolicy
// Always — included), or more if an init container needs more while it runs
// (an init container runs alongside the sidecars started before it), plus
// spec.overhead. Pod-level requests (spec.resources) replace the
// per-container sum for the resources they name.
func PodRequests(pod *corev1.Pod) corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, c := range pod.Spec.Containers {
		addList(total, c.Resources.Requests)
	}
	sidecars := corev1.ResourceList{}
	peakInit := corev1.ResourceList{}
	for _, c := range pod.Spec.InitContainers {
		var during corev1.ResourceList
		if isSidecar(c) {
			addList(total, c.Resources.Requests)
			addList(sidecars, c.Resources.Requests)
			during = sidecars.DeepCopy()
		} else {
			during = c.Resources.Requests.DeepCopy()
			if during == nil {
				during = corev1.ResourceList{}
			}
			addList(during, sidecars)
		}
		maxList(peakInit, during)
	}
	maxList(total, peakInit)
	if pod.Spec.Resources != nil {
		for name, q := range pod.Spec.Resources.Requests {
			if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
				total[name] = q.DeepCopy()
			}
		}
	}
	addList(total, pod.Spec.Overhead)
	return total
}

func isSidecar(c corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

func addList(dst, src corev1.ResourceList) {
	for name, q := range src {
		sum := dst[name]
		sum.Add(q)
		dst[name] = sum
	}
}

func maxList(dst, src corev1.ResourceList) {
	for name, q := range src {
		if cur, ok := dst[name]; !ok || q.Cmp(cur) > 0 {
			dst[name] = q.DeepCopy()
		}
	}
}

// MatchesNodeSelector tells whether node satisfies the pod's nodeSelector
// and its required node affinity (both must hold).
func MatchesNodeSelector(pod *corev1.Pod, node *corev1.Node) bool {
	for k, v := range pod.Spec.NodeSelector {
		if got, ok := node.Labels[k]; !ok || got != v {
			return false
		}
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	// Terms are ORed; an empty list matches nothing.
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if termMatches(term, node) {
			return true
		}
	}
	return false
}

// termMatches: all expressions and all field expressions must hold; a term
// with neither matches nothing.
func termMatches(term corev1.NodeSelectorTerm, node *corev1.Node) bool {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return false
	}
	for _, r := range term.MatchExpressions {
		v, has := node.Labels[r.Key]
		if !requirementHolds(r, v, has) {
			return false
		}
	}
	for _, r := range term.MatchFields {
		if r.Key != "metadata.name" {
			return false
		}
		if r.Operator != corev1.NodeSelectorOpIn && r.Operator != corev1.NodeSelectorOpNotIn {
			return false
		}
		if !requirementHolds(r, node.Name, true) {
			return false
		}
	}
	return true
}

func requirementHolds(r corev1.NodeSelectorRequirement, value string, has bool) bool {
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return has && contains(r.Values, value)
	case corev1.NodeSelectorOpNotIn:
		return !has || !contains(r.Values, value)
	case corev1.NodeSelectorOpExists:
		return has
	case corev1.NodeSelectorOpDoesNotExist:
		return !has
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !has || len(r.Values) != 1 {
			return false
		}
		got, err1 := strconv.ParseInt(value, 10, 64)
		bound, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == corev1.NodeSelectorOpGt {
			return got > bound
		}
		return got < bound
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// UntoleratedTaint returns the first taint with the given effect that no
// toleration tolerates.
func UntoleratedTaint(taints []corev1.Taint, tolerations []corev1.Toleration, effect corev1.TaintEffect) (corev1.Taint, bool) {
	for _, t := range taints {
		if t.Effect != effect {
			continue
		}
		if !tolerated(t, tolerations) {
			return t, true
		}
	}
	return corev1.Taint{}, false
}

func tolerated(t corev1.Taint, tolerations []corev1.Toleration) bool {
	for _, tol := range tolerations {
		if tol.Effect != "" && tol.Effect != t.Effect {
			continue
		}
		if tol.Key != "" && tol.Key != t.Key {
			continue
		}
		switch tol.Operator {
		case corev1.TolerationOpExists:
			return true
		case "", corev1.TolerationOpEqual:
			if tol.Value == t.Value {
				return true
			}
		}
		// Lt/Gt are behind an alpha feature gate upstream: they tolerate
		// nothing here.
	}
	return false
}

// hostPortsConflict tells whether a host port the pod wants is taken by a
// running pod (same protocol and port, overlapping host IP; an empty or
// 0.0.0.0 IP overlaps everything).
func hostPortsConflict(pod *corev1.Pod, others []*corev1.Pod) bool {
	want := hostPorts(pod)
	if len(want) == 0 {
		return false
	}
	for _, o := range others {
		for _, have := range hostPorts(o) {
			for _, w := range want {
				if w.port == have.port && w.protocol == have.protocol && ipsOverlap(w.ip, have.ip) {
					return true
				}
			}
		}
	}
	return false
}

type hostPort struct {
	ip       string
	protocol corev1.Protocol
	port     int32
}

func hostPorts(pod *corev1.Pod) []hostPort {
	var out []hostPort
	add := func(cs []corev1.Container, onlySidecars bool) {
		for _, c := range cs {
			if onlySidecars && !isSidecar(c) {
				continue
			}
			for _, p := range c.Ports {
				if p.HostPort <= 0 {
					continue
				}
				proto := p.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				out = append(out, hostPort{ip: p.HostIP, protocol: proto, port: p.HostPort})
			}
		}
	}
	add(pod.Spec.InitContainers, true)
	add(pod.Spec.Containers, false)
	return out
}

func ipsOverlap(a, b string) bool {
	wild := func(ip string) bool { return ip == "" || ip == "0.0.0.0" || ip == "::" }
	return wild(a) || wild(b) || a == b
}
