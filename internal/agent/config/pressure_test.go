package config

import (
	"testing"

	"github.com/nodeplane/nodeplane/internal/agent/host"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

func TestPressure(t *testing.T) {
	const gi, mi = 1 << 30, 1 << 20
	healthy := host.Signals{
		Memory:       host.Signal{Available: 8 * gi, Capacity: 16 * gi},
		NodeFS:       host.Signal{Available: 50 * gi, Capacity: 100 * gi},
		NodeFSInodes: host.Signal{Available: 5_000_000, Capacity: 6_000_000},
		PID:          host.Signal{Available: 30_000, Capacity: 32_768},
	}
	with := func(change func(*host.Signals)) host.Signals {
		s := healthy
		change(&s)
		return s
	}
	tests := []struct {
		name                      string
		obs                       host.Signals
		file                      kubeletv1beta1.KubeletConfiguration
		wantMemory, wantDisk, pid bool
	}{
		{name: "a healthy node under default thresholds has no pressure", obs: healthy},
		{
			name:       "99Mi of memory available is below the default 100Mi",
			obs:        with(func(s *host.Signals) { s.Memory.Available = 99 * mi }),
			wantMemory: true,
		},
		{
			name: "exactly the threshold available is not pressure",
			obs:  with(func(s *host.Signals) { s.Memory.Available = 100 * mi }),
		},
		{
			name:       "a percentage memory threshold is taken of memory capacity",
			obs:        with(func(s *host.Signals) { s.Memory.Available = 1 * gi }),
			file:       kubeletv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "10%"}},
			wantMemory: true,
		},
		{
			name:     "9% of the node filesystem free is below nodefs.available 10%",
			obs:      with(func(s *host.Signals) { s.NodeFS.Available = 9 * gi }),
			wantDisk: true,
		},
		{
			name:     "12% free is below the default imagefs.available 15%, judged on the same filesystem",
			obs:      with(func(s *host.Signals) { s.NodeFS.Available = 12 * gi }),
			wantDisk: true,
		},
		{
			name: "12% free is no pressure when only nodefs.available 10% is set",
			obs:  with(func(s *host.Signals) { s.NodeFS.Available = 12 * gi }),
			file: kubeletv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"nodefs.available": "10%"}},
		},
		{
			name:     "4% of inodes free is below nodefs.inodesFree 5%",
			obs:      with(func(s *host.Signals) { s.NodeFSInodes.Available = 240_000 }),
			wantDisk: true,
		},
		{
			name: "few PIDs left is no pressure without a pid.available threshold",
			obs:  with(func(s *host.Signals) { s.PID.Available = 500 }),
		},
		{
			name: "fewer PIDs left than pid.available is pid pressure",
			obs:  with(func(s *host.Signals) { s.PID.Available = 500 }),
			file: kubeletv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"pid.available": "1000"}},
			pid:  true,
		},
		{
			name: "a percentage pid threshold is taken of pid capacity",
			obs:  with(func(s *host.Signals) { s.PID.Available = 3000 }),
			file: kubeletv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"pid.available": "10%"}},
			pid:  true,
		},
		{
			name: "unobserved signals are never under pressure",
			obs:  host.Signals{},
			file: kubeletv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"pid.available": "1000"}},
		},
		{
			name: "with hard eviction off nothing is under pressure",
			obs:  host.Signals{Memory: host.Signal{Available: 0, Capacity: gi}, NodeFS: host.Signal{Available: 0, Capacity: gi}},
			file: kubeletv1beta1.KubeletConfiguration{EvictionHard: map[string]string{}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			memory, disk, pid := Pressure(tt.obs, resolve(t, tt.file))
			if memory != tt.wantMemory || disk != tt.wantDisk || pid != tt.pid {
				t.Errorf("Pressure() = memory %v, disk %v, pid %v; want %v, %v, %v", memory, disk, pid, tt.wantMemory, tt.wantDisk, tt.pid)
			}
		})
	}
}
