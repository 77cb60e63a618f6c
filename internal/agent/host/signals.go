package host

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Signal is one eviction-signal observation: how much is available and of
// how much, in the signal's unit. A Signal with Capacity 0 was not observed
// and must not be judged.
type Signal struct {
	Available int64
	Capacity  int64
}

// Observed reports whether the signal could be read.
func (s Signal) Observed() bool { return s.Capacity > 0 }

// Signals are the observations behind the eviction signals nodeplane
// evaluates.
type Signals struct {
	// Memory is memory.available, in bytes.
	Memory Signal
	// NodeFS is nodefs.available: bytes of the filesystem holding DataDir.
	NodeFS Signal
	// NodeFSInodes is nodefs.inodesFree: inodes of that filesystem.
	NodeFSInodes Signal
	// PID is pid.available: process IDs (tasks).
	PID Signal
}

// Signals observes the eviction signals:
//
//   - Memory: MemAvailable of MemTotal from /proc/meminfo. When the cgroup
//     has a memory limit, capacity is the smaller of the limit and MemTotal,
//     and available is the smaller of MemAvailable and limit − working set,
//     where working set = usage − inactive_file (memory.current and
//     memory.stat on cgroup v2; memory.usage_in_bytes and memory.stat's
//     total_inactive_file on v1).
//   - NodeFS and NodeFSInodes: statfs of DataDir (space available to
//     unprivileged users; free inodes).
//   - PID: capacity is the smaller of /proc/sys/kernel/pid_max,
//     /proc/sys/kernel/threads-max and the cgroup's pids.max; in use is the
//     machine's task count (the total in /proc/loadavg, which counts
//     threads, since each holds a PID; else the number of processes in
//     /proc), or the cgroup's pids.current when that is the tighter bound.
//
// A signal that cannot be read is left zero (unobserved) and the error says
// why; the others are still valid.
func (h *Host) Signals() (Signals, error) {
	var errs []error
	var s Signals
	cg, err := h.cgroup()
	if err != nil {
		errs = append(errs, fmt.Errorf("read cgroup: %w", err))
	}
	if s.Memory, err = h.memorySignal(cg); err != nil {
		errs = append(errs, fmt.Errorf("observe memory.available: %w", err))
	}
	if fs, err := h.dataFS(); err != nil {
		errs = append(errs, fmt.Errorf("observe nodefs: %w", err))
	} else {
		s.NodeFS = Signal{Available: fs.available, Capacity: fs.capacity}
		s.NodeFSInodes = Signal{Available: fs.inodesFree, Capacity: fs.inodes}
	}
	if s.PID, err = h.pidSignal(cg); err != nil {
		errs = append(errs, fmt.Errorf("observe pid.available: %w", err))
	}
	return s, errors.Join(errs...)
}

func (h *Host) memorySignal(cg cgroupStats) (Signal, error) {
	info, err := h.readKeyValues("/proc/meminfo")
	if err != nil {
		return Signal{}, err
	}
	total, okTotal := info["MemTotal"]
	available, okAvail := info["MemAvailable"]
	if !okTotal || !okAvail {
		return Signal{}, fmt.Errorf("no MemTotal or MemAvailable in %s", h.path("/proc/meminfo"))
	}
	sig := Signal{Available: available, Capacity: total}
	if cg.memoryLimit > 0 {
		sig.Capacity = min(sig.Capacity, cg.memoryLimit)
		workingSet := max(0, cg.memoryUsage-cg.inactiveFile)
		sig.Available = min(sig.Available, max(0, cg.memoryLimit-workingSet))
	}
	return sig, nil
}

func (h *Host) pidSignal(cg cgroupStats) (Signal, error) {
	pidMax, err := h.readInt("/proc/sys/kernel/pid_max")
	if err != nil {
		return Signal{}, err
	}
	capacity := pidMax
	if threads, err := h.readInt("/proc/sys/kernel/threads-max"); err == nil && threads > 0 {
		capacity = min(capacity, threads)
	}
	used, err := h.tasks()
	if err != nil {
		return Signal{}, err
	}
	available := max(0, capacity-used)
	if cg.pidsLimit > 0 {
		capacity = min(capacity, cg.pidsLimit)
		available = min(available, max(0, cg.pidsLimit-cg.pidsCurrent))
	}
	return Signal{Available: available, Capacity: capacity}, nil
}

// tasks counts the machine's tasks: the total in /proc/loadavg's fourth
// field ("running/total"), else the numeric directories of /proc.
func (h *Host) tasks() (int64, error) {
	if s, err := h.readString("/proc/loadavg"); err == nil {
		if fields := strings.Fields(s); len(fields) >= 4 {
			if _, total, ok := strings.Cut(fields[3], "/"); ok {
				if n, err := strconv.ParseInt(total, 10, 64); err == nil {
					return n, nil
				}
			}
		}
	}
	entries, err := os.ReadDir(h.path("/proc"))
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range entries {
		if _, err := strconv.ParseUint(e.Name(), 10, 64); err == nil && e.IsDir() {
			n++
		}
	}
	return n, nil
}
