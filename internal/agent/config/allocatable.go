package config

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Capacity returns the node's capacity (SPEC KUB-11): the machine's
// resources (cpu, memory, ephemeral-storage, as package host reports them)
// plus pods = MaxPods, or, when PodsPerCore > 0 and the CPU count is known,
// min(cores × PodsPerCore, MaxPods), where cores is the CPU capacity rounded
// up to a whole core. machine is not modified.
func Capacity(machine corev1.ResourceList, s Settings) corev1.ResourceList {
	out := maps.Clone(machine)
	if out == nil {
		out = corev1.ResourceList{}
	}
	pods := int64(s.MaxPods)
	if cpu, ok := machine[corev1.ResourceCPU]; ok && s.PodsPerCore > 0 && cpu.Sign() > 0 {
		pods = min(pods, cpu.Value()*int64(s.PodsPerCore))
	}
	out[corev1.ResourcePods] = *resource.NewQuantity(pods, resource.DecimalSI)
	return out
}

// Allocatable returns, for every resource in capacity (SPEC KUB-12):
//
//	max(0, capacity − systemReserved − kubeReserved − hard eviction reservation)
//
// where the eviction reservation is the memory.available threshold for
// memory (a percentage is of memory capacity) and the nodefs.available
// threshold for ephemeral-storage (a percentage is of ephemeral-storage
// capacity), and nothing for other resources. Reservations for resources
// absent from capacity (such as pid) are ignored. capacity is not modified.
func Allocatable(capacity corev1.ResourceList, s Settings) corev1.ResourceList {
	out := make(corev1.ResourceList, len(capacity))
	for name, c := range capacity {
		v := c.DeepCopy()
		if r, ok := s.SystemReserved[name]; ok {
			v.Sub(r)
		}
		if r, ok := s.KubeReserved[name]; ok {
			v.Sub(r)
		}
		if sig, ok := evictionReserved(name); ok {
			if t, ok := s.EvictionHard[sig]; ok {
				v.Sub(*resource.NewQuantity(t.Amount(c.Value()), resource.BinarySI))
			}
		}
		if v.Sign() < 0 {
			v = *resource.NewQuantity(0, c.Format)
		}
		out[name] = v
	}
	return out
}

// evictionReserved names the signal whose hard threshold is held back from
// a resource's allocatable.
func evictionReserved(name corev1.ResourceName) (Signal, bool) {
	switch name {
	case corev1.ResourceMemory:
		return SignalMemoryAvailable, true
	case corev1.ResourceEphemeralStorage:
		return SignalNodeFSAvailable, true
	}
	return "", false
}
