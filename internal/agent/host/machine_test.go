package host

import (
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestMachine(t *testing.T) {
	tests := []struct {
		name       string
		files      map[string]string
		wantCPU    string
		wantMemory int64
		wantErr    bool
	}{
		{
			name:       "a machine without cgroup files reports its CPUs and MemTotal",
			files:      meminfo16G,
			wantCPU:    "4",
			wantMemory: 16 * gib,
		},
		{
			name: "a cgroup v2 quota of two CPUs wins over four",
			files: merge(meminfo16G, cgroupV2, map[string]string{
				"sys/fs/cgroup/cpu.max":    "200000 100000\n",
				"sys/fs/cgroup/memory.max": "max\n",
			}),
			wantCPU:    "2",
			wantMemory: 16 * gib,
		},
		{
			name: "a cgroup v2 quota of one and a half CPUs is 1500m",
			files: merge(meminfo16G, cgroupV2, map[string]string{
				"sys/fs/cgroup/cpu.max": "150000 100000\n",
			}),
			wantCPU:    "1500m",
			wantMemory: 16 * gib,
		},
		{
			name: "a cgroup v2 quota is rounded down to whole millicores",
			files: merge(meminfo16G, cgroupV2, map[string]string{
				"sys/fs/cgroup/cpu.max": "33333 100000\n",
			}),
			wantCPU:    "333m",
			wantMemory: 16 * gib,
		},
		{
			name: "a cgroup v2 quota above the CPU count does not raise it",
			files: merge(meminfo16G, cgroupV2, map[string]string{
				"sys/fs/cgroup/cpu.max": "800000 100000\n",
			}),
			wantCPU:    "4",
			wantMemory: 16 * gib,
		},
		{
			name: "a cgroup v2 cpu.max of max and a memory.max below MemTotal give all CPUs and the limit",
			files: merge(meminfo16G, cgroupV2, map[string]string{
				"sys/fs/cgroup/cpu.max":    "max 100000\n",
				"sys/fs/cgroup/memory.max": "2147483648\n",
			}),
			wantCPU:    "4",
			wantMemory: 2 * gib,
		},
		{
			name: "a cgroup v2 memory.max above MemTotal does not raise it",
			files: merge(meminfo16G, cgroupV2, map[string]string{
				"sys/fs/cgroup/memory.max": "68719476736\n",
			}),
			wantCPU:    "4",
			wantMemory: 16 * gib,
		},
		{
			name: "cgroup v1 CFS quota and memory limit win",
			files: merge(meminfo16G, map[string]string{
				"sys/fs/cgroup/cpu/cpu.cfs_quota_us":          "150000\n",
				"sys/fs/cgroup/cpu/cpu.cfs_period_us":         "100000\n",
				"sys/fs/cgroup/memory/memory.limit_in_bytes":  "1073741824\n",
				"sys/fs/cgroup/memory/memory.usage_in_bytes":  "1000\n",
				"sys/fs/cgroup/pids/pids.max":                 "max\n",
				"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us":  "-1\n",
				"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
			}),
			wantCPU:    "1500m",
			wantMemory: 1 * gib,
		},
		{
			name: "cgroup v1 cpu controller mounted as cpu,cpuacct is read",
			files: merge(meminfo16G, map[string]string{
				"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us":  "50000\n",
				"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
			}),
			wantCPU:    "500m",
			wantMemory: 16 * gib,
		},
		{
			name: "cgroup v1 without a quota and with the unlimited memory sentinel changes nothing",
			files: merge(meminfo16G, map[string]string{
				"sys/fs/cgroup/cpu/cpu.cfs_quota_us":         "-1\n",
				"sys/fs/cgroup/cpu/cpu.cfs_period_us":        "100000\n",
				"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
			}),
			wantCPU:    "4",
			wantMemory: 16 * gib,
		},
		{
			name:       "a missing /proc/meminfo gives memory 0 and an error",
			files:      map[string]string{},
			wantCPU:    "4",
			wantMemory: 0,
			wantErr:    true,
		},
		{
			name:       "a /proc/meminfo without MemTotal gives memory 0 and an error",
			files:      map[string]string{"proc/meminfo": "MemFree: 10 kB\n"},
			wantCPU:    "4",
			wantMemory: 0,
			wantErr:    true,
		},
		{
			name: "a malformed cpu.max is an error and leaves the CPU count",
			files: merge(meminfo16G, cgroupV2, map[string]string{
				"sys/fs/cgroup/cpu.max": "lots\n",
			}),
			wantCPU:    "4",
			wantMemory: 16 * gib,
			wantErr:    true,
		},
		{
			name: "a malformed memory limit is an error and leaves MemTotal",
			files: merge(meminfo16G, map[string]string{
				"sys/fs/cgroup/memory/memory.limit_in_bytes": "a lot\n",
			}),
			wantCPU:    "4",
			wantMemory: 16 * gib,
			wantErr:    true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fakeHost(t, tt.files).Machine()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Machine() error = %v, want error %v", err, tt.wantErr)
			}
			if cpu := got[corev1.ResourceCPU]; cpu.String() != tt.wantCPU {
				t.Errorf("cpu = %s, want %s", cpu.String(), tt.wantCPU)
			}
			if mem := got[corev1.ResourceMemory]; mem.Value() != tt.wantMemory {
				t.Errorf("memory = %d, want %d", mem.Value(), tt.wantMemory)
			}
			if eph, ok := got[corev1.ResourceEphemeralStorage]; !ok || eph.Value() <= 0 {
				t.Errorf("ephemeral-storage = %v (present %v), want > 0", eph.String(), ok)
			}
		})
	}
}

func TestMachineEphemeralStorage(t *testing.T) {
	dataDir := t.TempDir()
	want, err := statFS(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		dataDir string
		wantErr bool
	}{
		{"an existing data dir is measured", dataDir, false},
		{"a data dir not yet created is measured through its nearest ancestor", filepath.Join(dataDir, "agent", "state"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New(Config{Root: fakeRoot(t, meminfo16G), DataDir: tt.dataDir, NumCPU: func() int { return 1 }})
			got, err := h.Machine()
			if err != nil {
				t.Fatalf("Machine() error = %v", err)
			}
			if eph := got[corev1.ResourceEphemeralStorage]; eph.Value() != want.capacity {
				t.Errorf("ephemeral-storage = %d, want %d", eph.Value(), want.capacity)
			}
		})
	}
}
