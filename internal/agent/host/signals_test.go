package host

import (
	"testing"
)

func TestSignals(t *testing.T) {
	const mib = 1 << 20
	pids := map[string]string{
		"proc/sys/kernel/pid_max":     "32768\n",
		"proc/sys/kernel/threads-max": "100000\n",
		"proc/loadavg":                "0.10 0.20 0.30 2/500 12345\n",
	}
	tests := []struct {
		name       string
		files      map[string]string
		wantMemory Signal
		wantPID    Signal
		wantErr    bool
	}{
		{
			name:       "without a cgroup memory is MemAvailable of MemTotal and pids are pid_max less the task count",
			files:      merge(meminfo16G, pids),
			wantMemory: Signal{Available: 8 * gib, Capacity: 16 * gib},
			wantPID:    Signal{Available: 32768 - 500, Capacity: 32768},
		},
		{
			name: "a cgroup v2 memory limit gives limit minus working set, and pids.max bounds pids",
			files: merge(meminfo16G, pids, cgroupV2, map[string]string{
				"sys/fs/cgroup/memory.max":     "536870912\n", // 512Mi
				"sys/fs/cgroup/memory.current": "314572800\n", // 300Mi
				"sys/fs/cgroup/memory.stat":    "anon 209715200\ninactive_file 104857600\nactive_file 1\n",
				"sys/fs/cgroup/pids.max":       "1000\n",
				"sys/fs/cgroup/pids.current":   "100\n",
			}),
			wantMemory: Signal{Available: 512*mib - 200*mib, Capacity: 512 * mib},
			wantPID:    Signal{Available: 900, Capacity: 1000},
		},
		{
			name: "a cgroup v2 without limits changes nothing",
			files: merge(meminfo16G, pids, cgroupV2, map[string]string{
				"sys/fs/cgroup/memory.max":     "max\n",
				"sys/fs/cgroup/memory.current": "314572800\n",
				"sys/fs/cgroup/pids.max":       "max\n",
				"sys/fs/cgroup/pids.current":   "100\n",
			}),
			wantMemory: Signal{Available: 8 * gib, Capacity: 16 * gib},
			wantPID:    Signal{Available: 32768 - 500, Capacity: 32768},
		},
		{
			name: "a memory limit looser than the machine's availability leaves the machine's, and pids.max caps pids",
			files: merge(meminfo16G, pids, cgroupV2, map[string]string{
				"sys/fs/cgroup/memory.max":     "12884901888\n", // 12Gi
				"sys/fs/cgroup/memory.current": "1073741824\n",  // 1Gi
				"sys/fs/cgroup/pids.max":       "32000\n",
				"sys/fs/cgroup/pids.current":   "10\n",
			}),
			wantMemory: Signal{Available: 8 * gib, Capacity: 12 * gib},
			wantPID:    Signal{Available: 32000 - 10, Capacity: 32000},
		},
		{
			name: "a cgroup v1 memory limit uses usage_in_bytes less total_inactive_file",
			files: merge(meminfo16G, pids, map[string]string{
				"sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824\n", // 1Gi
				"sys/fs/cgroup/memory/memory.usage_in_bytes": "943718400\n",  // 900Mi
				"sys/fs/cgroup/memory/memory.stat":           "cache 1\ninactive_file 1\ntotal_inactive_file 314572800\n",
				"sys/fs/cgroup/pids/pids.max":                "200\n",
				"sys/fs/cgroup/pids/pids.current":            "150\n",
			}),
			wantMemory: Signal{Available: 1024*mib - 600*mib, Capacity: 1024 * mib},
			wantPID:    Signal{Available: 50, Capacity: 200},
		},
		{
			name: "a working set above the limit floors availability at zero",
			files: merge(meminfo16G, pids, cgroupV2, map[string]string{
				"sys/fs/cgroup/memory.max":     "104857600\n",
				"sys/fs/cgroup/memory.current": "209715200\n",
			}),
			wantMemory: Signal{Available: 0, Capacity: 100 * mib},
			wantPID:    Signal{Available: 32768 - 500, Capacity: 32768},
		},
		{
			name: "threads-max below pid_max bounds pid capacity, and without loadavg the processes in /proc are counted",
			files: merge(meminfo16G, map[string]string{
				"proc/sys/kernel/pid_max":     "4194304\n",
				"proc/sys/kernel/threads-max": "1000\n",
				"proc/1/stat":                 "",
				"proc/42/stat":                "",
				"proc/sys/x":                  "",
			}),
			wantMemory: Signal{Available: 8 * gib, Capacity: 16 * gib},
			wantPID:    Signal{Available: 998, Capacity: 1000},
		},
		{
			name:    "a missing /proc/meminfo leaves memory unobserved and is an error",
			files:   pids,
			wantPID: Signal{Available: 32768 - 500, Capacity: 32768},
			wantErr: true,
		},
		{
			name:       "a missing pid_max leaves pid unobserved and is an error",
			files:      meminfo16G,
			wantMemory: Signal{Available: 8 * gib, Capacity: 16 * gib},
			wantErr:    true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fakeHost(t, tt.files).Signals()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Signals() error = %v, want error %v", err, tt.wantErr)
			}
			if got.Memory != tt.wantMemory {
				t.Errorf("Memory = %+v, want %+v", got.Memory, tt.wantMemory)
			}
			if got.PID != tt.wantPID {
				t.Errorf("PID = %+v, want %+v", got.PID, tt.wantPID)
			}
			if !got.NodeFS.Observed() || got.NodeFS.Available > got.NodeFS.Capacity {
				t.Errorf("NodeFS = %+v, want observed with available <= capacity", got.NodeFS)
			}
			if !got.NodeFSInodes.Observed() || got.NodeFSInodes.Available > got.NodeFSInodes.Capacity {
				t.Errorf("NodeFSInodes = %+v, want observed with available <= capacity", got.NodeFSInodes)
			}
		})
	}
}
