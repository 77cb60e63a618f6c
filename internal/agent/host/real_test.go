package host

import (
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestRealMachine reads the machine the test runs on.
func TestRealMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("host reads Linux machines")
	}
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	h := New(cfg)

	capacity, err := h.Machine()
	if err != nil {
		t.Fatalf("Machine() error = %v", err)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		if q := capacity[r]; q.Sign() <= 0 {
			t.Errorf("capacity %s = %s, want > 0", r, q.String())
		}
	}

	info, err := h.Info()
	if err != nil {
		t.Fatalf("Info() error = %v", err)
	}
	if info.BootID == "" || info.KernelVersion == "" || info.OSImage == "" {
		t.Errorf("Info() = %+v, want boot id, kernel version and OS image", info)
	}

	signals, err := h.Signals()
	if err != nil {
		t.Fatalf("Signals() error = %v", err)
	}
	for name, s := range map[string]Signal{"memory": signals.Memory, "nodefs": signals.NodeFS, "inodes": signals.NodeFSInodes, "pid": signals.PID} {
		if !s.Observed() || s.Available > s.Capacity {
			t.Errorf("%s signal = %+v, want observed with available <= capacity", name, s)
		}
	}

	if _, err := h.Addresses(nil, ""); err != nil {
		t.Errorf("Addresses() error = %v", err)
	}
}
