package config

import (
	"testing"
	"time"
)

func TestResolveSoftEviction(t *testing.T) {
	tests := []struct {
		name       string
		yaml       string
		wantFields []string
		check      func(t *testing.T, s Settings)
	}{
		{
			name: "soft thresholds, their grace periods, minimum reclaims and the max pod grace period are read",
			yaml: "evictionSoft: {memory.available: 500Mi, nodefs.available: 15%}\n" +
				"evictionSoftGracePeriod: {memory.available: 1m30s, nodefs.available: 2m}\n" +
				"evictionMinimumReclaim: {memory.available: 0.5Gi}\nevictionMaxPodGracePeriod: 60\n" +
				"evictionPressureTransitionPeriod: 30s\n",
			check: func(t *testing.T, s Settings) {
				if got := s.EvictionSoft[SignalMemoryAvailable].String(); got != "500Mi" {
					t.Errorf("evictionSoft[memory.available] = %s, want 500Mi", got)
				}
				if got := s.EvictionSoft[SignalNodeFSAvailable].Percent; got != 15 {
					t.Errorf("evictionSoft[nodefs.available] = %v%%, want 15%%", got)
				}
				if got := s.EvictionSoftGracePeriod[SignalMemoryAvailable]; got != 90*time.Second {
					t.Errorf("grace = %s, want 1m30s", got)
				}
				if got := s.EvictionMinimumReclaim[SignalMemoryAvailable].Amount(0); got != 512<<20 {
					t.Errorf("minimum reclaim = %d, want %d", got, 512<<20)
				}
				if s.EvictionMaxPodGracePeriod != 60 || s.EvictionPressureTransitionPeriod != 30*time.Second {
					t.Errorf("max pod grace %d, transition %s; want 60, 30s", s.EvictionMaxPodGracePeriod, s.EvictionPressureTransitionPeriod)
				}
				if s.EvictionMonitoringPeriod != 10*time.Second {
					t.Errorf("monitoring period = %s, want the kubelet's 10s", s.EvictionMonitoringPeriod)
				}
			},
		},
		{name: "an unparsable hard threshold names its field", yaml: "evictionHard: {memory.available: lots}\n", wantFields: []string{"evictionHard[memory.available]"}},
		{name: "a percentage over 100 names its field", yaml: "evictionSoft: {nodefs.available: 150%}\nevictionSoftGracePeriod: {nodefs.available: 1m}\n", wantFields: []string{"evictionSoft[nodefs.available]"}},
		{name: "a soft threshold without a grace period names it", yaml: "evictionSoft: {memory.available: 500Mi}\n", wantFields: []string{"evictionSoft[memory.available]"}},
		{name: "a negative grace period names it", yaml: "evictionSoft: {memory.available: 500Mi}\nevictionSoftGracePeriod: {memory.available: -1m}\n", wantFields: []string{"evictionSoftGracePeriod[memory.available]"}},
		{name: "an unparsable grace period names it", yaml: "evictionSoftGracePeriod: {memory.available: soon}\n", wantFields: []string{"evictionSoftGracePeriod[memory.available]"}},
		{name: "an unknown signal in the minimum reclaims names it", yaml: "evictionMinimumReclaim: {memory.free: 1Gi}\n", wantFields: []string{"evictionMinimumReclaim[memory.free]"}},
		{name: "a negative minimum reclaim names it", yaml: "evictionMinimumReclaim: {memory.available: -1Gi}\n", wantFields: []string{"evictionMinimumReclaim[memory.available]"}},
		{name: "a negative max pod grace period names it", yaml: "evictionMaxPodGracePeriod: -5\n", wantFields: []string{"evictionMaxPodGracePeriod"}},
		{name: "a negative transition period names it", yaml: "evictionPressureTransitionPeriod: -1s\n", wantFields: []string{"evictionPressureTransitionPeriod"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file, err := Decode([]byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n" + tt.yaml))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			s, err := Resolve(file)
			wantFields(t, err, tt.wantFields...)
			if tt.check != nil {
				tt.check(t, s)
			}
		})
	}
}
