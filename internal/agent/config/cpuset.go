package config

import (
	"fmt"
	"strconv"
	"strings"
)

const maxCPU = 1 << 16

// countCPUs counts the CPUs in a Linux CPU list such as "0-3,8,10-11"
// (reservedSystemCPUs). A CPU named twice is counted once.
//
// CPU numbers are bounded by maxCPU so a typo cannot make the count run for
// long.
func countCPUs(list string) (int, error) {
	seen := map[int]bool{}
	for part := range strings.SplitSeq(list, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.Atoi(lo)
		if err != nil || first < 0 {
			return 0, fmt.Errorf("%q: bad CPU %q", list, part)
		}
		last := first
		if isRange {
			if last, err = strconv.Atoi(hi); err != nil || last < first {
				return 0, fmt.Errorf("%q: bad CPU range %q", list, part)
			}
		}
		if last >= maxCPU {
			return 0, fmt.Errorf("%q: CPU %d is beyond %d", list, last, maxCPU-1)
		}
		for cpu := first; cpu <= last; cpu++ {
			seen[cpu] = true
		}
	}
	return len(seen), nil
}
