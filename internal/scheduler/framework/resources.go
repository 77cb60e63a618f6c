package framework

import (
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Requests the scheduler assumes, for scoring only, for a container that sets
// no cpu or memory request, so best-effort pods still spread (SCH-4).
const (
	DefaultMilliCPURequest int64 = 100               // 0.1 core
	DefaultMemoryRequest   int64 = 200 * 1024 * 1024 // 200 MiB
)

// Resource is a resource vector in the scheduler's integer units: milli-cores
// for cpu, bytes for memory, ephemeral-storage and hugepages, plain counts for
// extended resources. AllowedPodNumber is only meaningful for allocatable.
type Resource struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	AllowedPodNumber int64
	// Scalar holds extended resources (anything with a domain prefix, such as
	// example.com/gpu) and hugepages-*; nil when there are none.
	Scalar map[corev1.ResourceName]int64
}

// NewResource converts a ResourceList (node allocatable, or requests).
func NewResource(list corev1.ResourceList) Resource {
	var r Resource
	r.AddList(list)
	return r
}

// AddList adds every quantity of list that the scheduler accounts for;
// resource names it does not know (no domain prefix, not one of the native
// ones) are ignored as upstream does.
func (r *Resource) AddList(list corev1.ResourceList) {
	for name, q := range list {
		switch name {
		case corev1.ResourceCPU:
			r.MilliCPU += q.MilliValue()
		case corev1.ResourceMemory:
			r.Memory += q.Value()
		case corev1.ResourceEphemeralStorage:
			r.EphemeralStorage += q.Value()
		case corev1.ResourcePods:
			r.AllowedPodNumber += q.Value()
		default:
			if IsScalarResourceName(name) {
				r.AddScalar(name, q.Value())
			}
		}
	}
}

// AddScalar adds v to the scalar resource name.
func (r *Resource) AddScalar(name corev1.ResourceName, v int64) {
	if r.Scalar == nil {
		r.Scalar = make(map[corev1.ResourceName]int64, 1)
	}
	r.Scalar[name] += v
}

// Add adds o to r.
func (r *Resource) Add(o *Resource) {
	r.MilliCPU += o.MilliCPU
	r.Memory += o.Memory
	r.EphemeralStorage += o.EphemeralStorage
	r.AllowedPodNumber += o.AllowedPodNumber
	for name, v := range o.Scalar {
		r.AddScalar(name, v)
	}
}

// Sub subtracts o from r.
func (r *Resource) Sub(o *Resource) {
	r.MilliCPU -= o.MilliCPU
	r.Memory -= o.Memory
	r.EphemeralStorage -= o.EphemeralStorage
	r.AllowedPodNumber -= o.AllowedPodNumber
	for name, v := range o.Scalar {
		r.AddScalar(name, -v)
	}
}

// SetMax raises every dimension of r to at least o's.
func (r *Resource) SetMax(o *Resource) {
	r.MilliCPU = max(r.MilliCPU, o.MilliCPU)
	r.Memory = max(r.Memory, o.Memory)
	r.EphemeralStorage = max(r.EphemeralStorage, o.EphemeralStorage)
	r.AllowedPodNumber = max(r.AllowedPodNumber, o.AllowedPodNumber)
	for name, v := range o.Scalar {
		if v > r.Scalar[name] {
			if r.Scalar == nil {
				r.Scalar = make(map[corev1.ResourceName]int64, len(o.Scalar))
			}
			r.Scalar[name] = v
		}
	}
}

// Clone returns a deep copy.
func (r Resource) Clone() Resource {
	if r.Scalar != nil {
		r.Scalar = maps.Clone(r.Scalar)
	}
	return r
}

// Get returns the amount of one resource in the units described on Resource.
func (r *Resource) Get(name corev1.ResourceName) int64 {
	switch name {
	case corev1.ResourceCPU:
		return r.MilliCPU
	case corev1.ResourceMemory:
		return r.Memory
	case corev1.ResourceEphemeralStorage:
		return r.EphemeralStorage
	case corev1.ResourcePods:
		return r.AllowedPodNumber
	default:
		return r.Scalar[name]
	}
}

// IsScalarResourceName reports whether name is accounted as a scalar
// resource: hugepages-*, or any name with a domain prefix (extended
// resources such as example.com/gpu, and prefixed native ones).
func IsScalarResourceName(name corev1.ResourceName) bool {
	s := string(name)
	return strings.HasPrefix(s, corev1.ResourceHugePagesPrefix) || strings.Contains(s, "/")
}

// IsExtendedResourceName reports whether name is an extended resource: it has
// a domain prefix that is not kubernetes.io, and is not a quota "requests."
// name.
func IsExtendedResourceName(name corev1.ResourceName) bool {
	s := string(name)
	if !strings.Contains(s, "/") || strings.Contains(s, corev1.ResourceDefaultNamespacePrefix) {
		return false
	}
	return !strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix)
}

// podRequests is one pod's request vector plus the cpu/memory used for
// scoring, where a container without a cpu or memory request counts as
// DefaultMilliCPURequest / DefaultMemoryRequest.
type podRequests struct {
	Resource
	nonZeroCPU, nonZeroMem int64
}

func (p *podRequests) add(o *podRequests) {
	p.Resource.Add(&o.Resource)
	p.nonZeroCPU += o.nonZeroCPU
	p.nonZeroMem += o.nonZeroMem
}

func (p *podRequests) setMax(o *podRequests) {
	p.Resource.SetMax(&o.Resource)
	p.nonZeroCPU = max(p.nonZeroCPU, o.nonZeroCPU)
	p.nonZeroMem = max(p.nonZeroMem, o.nonZeroMem)
}

func containerRequests(c *corev1.Container) podRequests {
	var p podRequests
	p.AddList(c.Resources.Requests)
	p.nonZeroCPU, p.nonZeroMem = DefaultMilliCPURequest, DefaultMemoryRequest
	if q, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
		p.nonZeroCPU = q.MilliValue()
	}
	if q, ok := c.Resources.Requests[corev1.ResourceMemory]; ok {
		p.nonZeroMem = q.Value()
	}
	return p
}

// ComputePodRequests returns what the pod asks of a node, with the upstream
// arithmetic (SCH-4):
//
//	max( Σ regular containers + Σ sidecars (restartable init containers),
//	     max over init containers i of (request(i) + Σ sidecars started before i) )
//	+ pod overhead
//
// where a sidecar's own "init" step counts the sidecars up to and including
// it. When the pod sets pod-level requests (spec.resources, for cpu, memory
// and hugepages) those replace the container sum for that resource, before
// the overhead is added. It also returns the cpu (milli) and memory used for
// scoring, where a container without a cpu or memory request counts as
// DefaultMilliCPURequest / DefaultMemoryRequest.
func ComputePodRequests(pod *corev1.Pod) (req Resource, nonZeroMilliCPU, nonZeroMemory int64) {
	var total podRequests
	for i := range pod.Spec.Containers {
		c := containerRequests(&pod.Spec.Containers[i])
		total.add(&c)
	}
	var sidecars, initMax podRequests
	for i := range pod.Spec.InitContainers {
		ic := &pod.Spec.InitContainers[i]
		c := containerRequests(ic)
		if ic.RestartPolicy != nil && *ic.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			// A sidecar keeps running next to the regular containers, and
			// while it starts every earlier sidecar is running too.
			total.add(&c)
			sidecars.add(&c)
			initMax.setMax(&sidecars)
			continue
		}
		c.add(&sidecars)
		initMax.setMax(&c)
	}
	total.setMax(&initMax)

	if pr := pod.Spec.Resources; pr != nil {
		for name, q := range pr.Requests {
			switch {
			case name == corev1.ResourceCPU:
				total.MilliCPU = q.MilliValue()
				total.nonZeroCPU = total.MilliCPU
			case name == corev1.ResourceMemory:
				total.Memory = q.Value()
				total.nonZeroMem = total.Memory
			case strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
				if total.Scalar == nil {
					total.Scalar = make(map[corev1.ResourceName]int64, 1)
				}
				total.Scalar[name] = q.Value()
			}
		}
	}
	if len(pod.Spec.Overhead) > 0 {
		var o podRequests
		o.AddList(pod.Spec.Overhead)
		o.nonZeroCPU, o.nonZeroMem = o.MilliCPU, o.Memory
		total.add(&o)
	}
	total.AllowedPodNumber = 0
	return total.Resource, total.nonZeroCPU, total.nonZeroMem
}
