package host

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Machine returns the node's raw capacity: cpu (the CPUs this process may
// use, capped by the cgroup CPU quota, in whole millicores rounded down),
// memory (MemTotal from /proc/meminfo, capped by the cgroup memory limit,
// bytes) and ephemeral-storage (the size of the filesystem holding DataDir,
// bytes). pods is not a machine fact; package config adds it.
//
// All three resources are always present. One that could not be read is 0
// (as upstream reports cpu=0, memory=0 when machine info is unavailable) and
// the error says why; the others are still valid.
func (h *Host) Machine() (corev1.ResourceList, error) {
	var errs []error
	cg, err := h.cgroup()
	if err != nil {
		errs = append(errs, fmt.Errorf("read cgroup limits: %w", err))
	}

	milli := int64(h.cfg.NumCPU()) * 1000
	if cg.cpuMilli > 0 && cg.cpuMilli < milli {
		milli = cg.cpuMilli
	}

	memory, err := h.memTotal()
	if err != nil {
		errs = append(errs, fmt.Errorf("read memory total: %w", err))
	}
	if cg.memoryLimit > 0 && (memory == 0 || cg.memoryLimit < memory) {
		memory = cg.memoryLimit
	}

	fs, err := h.dataFS()
	if err != nil {
		errs = append(errs, fmt.Errorf("read ephemeral-storage capacity: %w", err))
	}

	return corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewMilliQuantity(milli, resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(memory, resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(fs.capacity, resource.BinarySI),
	}, errors.Join(errs...)
}

// memTotal returns MemTotal from /proc/meminfo in bytes.
func (h *Host) memTotal() (int64, error) {
	info, err := h.readKeyValues("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	total, ok := info["MemTotal"]
	if !ok {
		return 0, fmt.Errorf("no MemTotal in %s", h.path("/proc/meminfo"))
	}
	return total, nil
}
