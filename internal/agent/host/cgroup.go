package host

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// cgroupUnlimited is the value at or above which a cgroup v1 limit means
// "no limit": the kernel reports an unset memory limit as the largest
// page-aligned int64 (9223372036854771712), not as a keyword.
const cgroupUnlimited = 1 << 62

// cgroupStats is what the cgroup mounted at /sys/fs/cgroup allows and uses.
// Only the top of the mount is read: inside a container it is the
// container's own cgroup; on a machine it is the root cgroup, which has no
// limits, so the machine's totals apply. A zero limit means unlimited.
type cgroupStats struct {
	cpuMilli     int64 // CPU quota in millicores (quota/period×1000, rounded down)
	memoryLimit  int64 // bytes
	memoryUsage  int64 // bytes charged to the cgroup
	inactiveFile int64 // bytes of reclaimable page cache in memoryUsage
	pidsLimit    int64 // tasks
	pidsCurrent  int64 // tasks
}

// cgroup reads the limits of the cgroup at /sys/fs/cgroup. A controller
// whose files are missing is treated as unlimited, without error; a file
// that exists but does not parse is an error.
func (h *Host) cgroup() (cgroupStats, error) {
	if _, err := os.Stat(h.path("/sys/fs/cgroup/cgroup.controllers")); err == nil {
		return h.cgroupV2()
	}
	return h.cgroupV1()
}

func (h *Host) cgroupV2() (cgroupStats, error) {
	const dir = "/sys/fs/cgroup/"
	var cg cgroupStats
	var errs []error
	if s, err := h.readString(dir + "cpu.max"); err == nil {
		milli, err := parseCPUMax(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("parse %s: %w", h.path(dir+"cpu.max"), err))
		}
		cg.cpuMilli = milli
	}
	var err error
	if cg.memoryLimit, err = h.readLimit(dir + "memory.max"); err != nil {
		errs = append(errs, err)
	}
	if cg.memoryUsage, err = h.readOptionalInt(dir + "memory.current"); err != nil {
		errs = append(errs, err)
	}
	if stat, err := h.readKeyValues(dir + "memory.stat"); err == nil {
		cg.inactiveFile = stat["inactive_file"]
	}
	if cg.pidsLimit, err = h.readLimit(dir + "pids.max"); err != nil {
		errs = append(errs, err)
	}
	if cg.pidsCurrent, err = h.readOptionalInt(dir + "pids.current"); err != nil {
		errs = append(errs, err)
	}
	return cg, errors.Join(errs...)
}

func (h *Host) cgroupV1() (cgroupStats, error) {
	var cg cgroupStats
	var errs []error
	var err error
	if cg.cpuMilli, err = h.cpuQuotaV1(); err != nil {
		errs = append(errs, err)
	}
	const mem = "/sys/fs/cgroup/memory/"
	if cg.memoryLimit, err = h.readLimit(mem + "memory.limit_in_bytes"); err != nil {
		errs = append(errs, err)
	}
	if cg.memoryUsage, err = h.readOptionalInt(mem + "memory.usage_in_bytes"); err != nil {
		errs = append(errs, err)
	}
	if stat, err := h.readKeyValues(mem + "memory.stat"); err == nil {
		// total_inactive_file includes child cgroups; older kernels or
		// non-hierarchical setups only have inactive_file.
		if v, ok := stat["total_inactive_file"]; ok {
			cg.inactiveFile = v
		} else {
			cg.inactiveFile = stat["inactive_file"]
		}
	}
	if cg.pidsLimit, err = h.readLimit("/sys/fs/cgroup/pids/pids.max"); err != nil {
		errs = append(errs, err)
	}
	if cg.pidsCurrent, err = h.readOptionalInt("/sys/fs/cgroup/pids/pids.current"); err != nil {
		errs = append(errs, err)
	}
	return cg, errors.Join(errs...)
}

// cpuQuotaV1 reads the cgroup v1 CFS quota in millicores; 0 means
// unlimited. The cpu controller is mounted as "cpu" or "cpu,cpuacct".
func (h *Host) cpuQuotaV1() (int64, error) {
	for _, dir := range []string{"/sys/fs/cgroup/cpu/", "/sys/fs/cgroup/cpu,cpuacct/"} {
		quota, err := h.readInt(dir + "cpu.cfs_quota_us")
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		period, err := h.readInt(dir + "cpu.cfs_period_us")
		if err != nil {
			return 0, err
		}
		if quota <= 0 || period <= 0 {
			return 0, nil
		}
		return quota * 1000 / period, nil
	}
	return 0, nil
}

// parseCPUMax parses cgroup v2 cpu.max ("max 100000" or "200000 100000")
// into millicores; 0 means unlimited.
func parseCPUMax(s string) (int64, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 || len(fields) > 2 {
		return 0, fmt.Errorf("want \"<quota|max> [period]\", got %q", s)
	}
	if fields[0] == "max" {
		return 0, nil
	}
	quota, err := strconv.ParseInt(fields[0], 10, 64)
	if err != nil {
		return 0, err
	}
	period := int64(100000) // the kernel's default period, in µs
	if len(fields) == 2 {
		if period, err = strconv.ParseInt(fields[1], 10, 64); err != nil {
			return 0, err
		}
	}
	if quota <= 0 || period <= 0 {
		return 0, nil
	}
	return quota * 1000 / period, nil
}

// readLimit reads a cgroup limit file: "max", -1, or a value at or above
// cgroupUnlimited mean unlimited (0); a missing file also means unlimited.
func (h *Host) readLimit(p string) (int64, error) {
	s, err := h.readString(p)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if s == "max" {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", h.path(p), err)
	}
	if v < 0 || v >= cgroupUnlimited {
		return 0, nil
	}
	return v, nil
}

// readOptionalInt reads an integer file; a missing file gives 0 without
// error.
func (h *Host) readOptionalInt(p string) (int64, error) {
	v, err := h.readInt(p)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	return v, err
}
