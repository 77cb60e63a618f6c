package config

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

func TestDefaults(t *testing.T) {
	s := Defaults()
	want := Settings{
		NodeLeaseDurationSeconds:         40,
		NodeStatusUpdateFrequency:        10 * time.Second,
		NodeStatusReportFrequency:        5 * time.Minute,
		RegisterNode:                     true,
		MaxPods:                          110,
		EvictionHard:                     DefaultEvictionHard(),
		EvictionMonitoringPeriod:         10 * time.Second,
		EvictionPressureTransitionPeriod: 5 * time.Minute,
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("Defaults() = %+v\nwant %+v", s, want)
	}
	fromEmpty, err := Resolve(&kubeletv1beta1.KubeletConfiguration{})
	if err != nil || !reflect.DeepEqual(fromEmpty, want) {
		t.Errorf("Resolve(empty) = %+v, %v; want the defaults", fromEmpty, err)
	}
}

func duration(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

func TestResolveStatusFrequencies(t *testing.T) {
	tests := []struct {
		name               string
		update, report     time.Duration
		wantUpdate, wantRF time.Duration
	}{
		{"neither set gives 10s and 5m", 0, 0, 10 * time.Second, 5 * time.Minute},
		{"an update frequency set alone is also the report frequency", 20 * time.Second, 0, 20 * time.Second, 20 * time.Second},
		{"both set are kept", 20 * time.Second, time.Minute, 20 * time.Second, time.Minute},
		{"a report frequency set alone keeps the default update frequency", 0, time.Minute, 10 * time.Second, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Resolve(&kubeletv1beta1.KubeletConfiguration{
				NodeStatusUpdateFrequency: duration(tt.update),
				NodeStatusReportFrequency: duration(tt.report),
			})
			if err != nil {
				t.Fatal(err)
			}
			if s.NodeStatusUpdateFrequency != tt.wantUpdate || s.NodeStatusReportFrequency != tt.wantRF {
				t.Errorf("update %s report %s, want %s %s", s.NodeStatusUpdateFrequency, s.NodeStatusReportFrequency, tt.wantUpdate, tt.wantRF)
			}
		})
	}
}

func TestResolveScalars(t *testing.T) {
	no := false
	tests := []struct {
		name       string
		file       kubeletv1beta1.KubeletConfiguration
		check      func(Settings) bool
		wantFields []string
	}{
		{
			name:  "a lease duration is kept",
			file:  kubeletv1beta1.KubeletConfiguration{NodeLeaseDurationSeconds: 15},
			check: func(s Settings) bool { return s.NodeLeaseDurationSeconds == 15 },
		},
		{
			name:       "a negative lease duration is refused",
			file:       kubeletv1beta1.KubeletConfiguration{NodeLeaseDurationSeconds: -1},
			wantFields: []string{"nodeLeaseDurationSeconds"},
		},
		{
			name:       "a negative update frequency is refused",
			file:       kubeletv1beta1.KubeletConfiguration{NodeStatusUpdateFrequency: duration(-time.Second)},
			wantFields: []string{"nodeStatusUpdateFrequency", "nodeStatusReportFrequency"},
		},
		{
			name:  "registerNode false is honoured",
			file:  kubeletv1beta1.KubeletConfiguration{RegisterNode: &no},
			check: func(s Settings) bool { return !s.RegisterNode },
		},
		{
			name:  "maxPods and podsPerCore are kept",
			file:  kubeletv1beta1.KubeletConfiguration{MaxPods: 250, PodsPerCore: 10},
			check: func(s Settings) bool { return s.MaxPods == 250 && s.PodsPerCore == 10 },
		},
		{
			name:       "negative maxPods and podsPerCore are refused",
			file:       kubeletv1beta1.KubeletConfiguration{MaxPods: -1, PodsPerCore: -1},
			wantFields: []string{"maxPods", "podsPerCore"},
		},
		{
			name: "a valid taint is kept",
			file: kubeletv1beta1.KubeletConfiguration{RegisterWithTaints: []corev1.Taint{{Key: "example.com/gpu", Value: "yes", Effect: corev1.TaintEffectNoExecute}}},
			check: func(s Settings) bool {
				return len(s.RegisterWithTaints) == 1 && s.RegisterWithTaints[0].Key == "example.com/gpu"
			},
		},
		{
			name: "taints with a bad effect or key are refused by index",
			file: kubeletv1beta1.KubeletConfiguration{RegisterWithTaints: []corev1.Taint{
				{Key: "ok", Effect: corev1.TaintEffectNoSchedule},
				{Key: "ok", Effect: "Sometimes"},
				{Key: "not ok", Effect: corev1.TaintEffectNoSchedule},
			}},
			wantFields: []string{"registerWithTaints[1]", "registerWithTaints[2]"},
		},
		{
			name:  "a provider ID is kept",
			file:  kubeletv1beta1.KubeletConfiguration{ProviderID: "aws:///eu-west-1a/i-0abc"},
			check: func(s Settings) bool { return s.ProviderID == "aws:///eu-west-1a/i-0abc" },
		},
		{
			name:  "an eviction pressure transition period is kept",
			file:  kubeletv1beta1.KubeletConfiguration{EvictionPressureTransitionPeriod: duration(30 * time.Second)},
			check: func(s Settings) bool { return s.EvictionPressureTransitionPeriod == 30*time.Second },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Resolve(&tt.file)
			wantFields(t, err, tt.wantFields...)
			if err == nil && !tt.check(s) {
				t.Errorf("Resolve() = %+v", s)
			}
		})
	}
}

func TestResolveEvictionHard(t *testing.T) {
	yes, no := true, false
	q := resource.MustParse
	tests := []struct {
		name       string
		hard       map[string]string
		merge      *bool
		want       map[Signal]Threshold
		wantFields []string
	}{
		{
			name: "no evictionHard gives the defaults",
			want: DefaultEvictionHard(),
		},
		{
			name: "one signal without merging turns the unspecified defaults off",
			hard: map[string]string{"memory.available": "200Mi"},
			want: map[Signal]Threshold{SignalMemoryAvailable: {Quantity: q("200Mi")}},
		},
		{
			name:  "merge false is the same as unset",
			hard:  map[string]string{"nodefs.available": "20%"},
			merge: &no,
			want:  map[Signal]Threshold{SignalNodeFSAvailable: {Percent: 20}},
		},
		{
			name:  "merging keeps the defaults for unspecified signals and the file's values for the rest",
			hard:  map[string]string{"memory.available": "200Mi", "pid.available": "1000"},
			merge: &yes,
			want: map[Signal]Threshold{
				SignalMemoryAvailable:   {Quantity: q("200Mi")},
				SignalPIDAvailable:      {Quantity: q("1000")},
				SignalNodeFSAvailable:   {Percent: 10},
				SignalNodeFSInodesFree:  {Percent: 5},
				SignalImageFSAvailable:  {Percent: 15},
				SignalImageFSInodesFree: {Percent: 5},
			},
		},
		{
			name:  "a zero threshold turns a merged default off",
			hard:  map[string]string{"imagefs.available": "0%", "imagefs.inodesFree": "0"},
			merge: &yes,
			want: map[Signal]Threshold{
				SignalMemoryAvailable:  {Quantity: q("100Mi")},
				SignalNodeFSAvailable:  {Percent: 10},
				SignalNodeFSInodesFree: {Percent: 5},
			},
		},
		{
			name: "an empty evictionHard turns hard eviction off",
			hard: map[string]string{},
			want: map[Signal]Threshold{},
		},
		{
			name: "a fractional percentage is kept",
			hard: map[string]string{"nodefs.available": "7.5%"},
			want: map[Signal]Threshold{SignalNodeFSAvailable: {Percent: 7.5}},
		},
		{
			name:       "an unknown signal is named",
			hard:       map[string]string{"memory.free": "1Gi"},
			wantFields: []string{"evictionHard[memory.free]"},
		},
		{
			name: "malformed, negative and out-of-range values are each named",
			hard: map[string]string{
				"memory.available":   "lots",
				"nodefs.available":   "150%",
				"nodefs.inodesFree":  "-5",
				"imagefs.available":  "ten%",
				"imagefs.inodesFree": "5%",
			},
			wantFields: []string{"evictionHard[imagefs.available]", "evictionHard[memory.available]", "evictionHard[nodefs.available]", "evictionHard[nodefs.inodesFree]"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Resolve(&kubeletv1beta1.KubeletConfiguration{EvictionHard: tt.hard, MergeDefaultEvictionSettings: tt.merge})
			wantFields(t, err, tt.wantFields...)
			if err != nil {
				return
			}
			if len(s.EvictionHard) != len(tt.want) {
				t.Fatalf("EvictionHard = %v, want %v", s.EvictionHard, tt.want)
			}
			for sig, w := range tt.want {
				g, ok := s.EvictionHard[sig]
				if !ok || g.Percent != w.Percent || g.Quantity.Cmp(w.Quantity) != 0 {
					t.Errorf("EvictionHard[%s] = %v (present %v), want %v", sig, g, ok, w)
				}
			}
		})
	}
}

func TestResolveReserved(t *testing.T) {
	tests := []struct {
		name       string
		file       kubeletv1beta1.KubeletConfiguration
		wantSystem map[corev1.ResourceName]string
		wantKube   map[corev1.ResourceName]string
		wantFields []string
	}{
		{
			name: "quantities for cpu, memory, ephemeral-storage and pid are parsed",
			file: kubeletv1beta1.KubeletConfiguration{
				SystemReserved: map[string]string{"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "10Gi", "pid": "1000"},
				KubeReserved:   map[string]string{"cpu": "250m"},
			},
			wantSystem: map[corev1.ResourceName]string{"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "10Gi", "pid": "1k"},
			wantKube:   map[corev1.ResourceName]string{"cpu": "250m"},
		},
		{
			name: "reservedSystemCPUs replaces the system cpu reservation with its count and drops the kube one",
			file: kubeletv1beta1.KubeletConfiguration{
				ReservedSystemCPUs: "0-1,3",
				SystemReserved:     map[string]string{"cpu": "500m", "memory": "1Gi"},
				KubeReserved:       map[string]string{"cpu": "250m", "memory": "512Mi"},
			},
			wantSystem: map[corev1.ResourceName]string{"cpu": "3", "memory": "1Gi"},
			wantKube:   map[corev1.ResourceName]string{"memory": "512Mi"},
		},
		{
			name:       "an unsupported resource is named",
			file:       kubeletv1beta1.KubeletConfiguration{SystemReserved: map[string]string{"nvidia.com/gpu": "1"}},
			wantFields: []string{"systemReserved[nvidia.com/gpu]"},
		},
		{
			name:       "malformed and negative quantities are named",
			file:       kubeletv1beta1.KubeletConfiguration{KubeReserved: map[string]string{"memory": "a lot", "cpu": "-1"}},
			wantFields: []string{"kubeReserved[memory]", "kubeReserved[cpu]"},
		},
		{
			name:       "a malformed CPU list is named",
			file:       kubeletv1beta1.KubeletConfiguration{ReservedSystemCPUs: "3-1"},
			wantFields: []string{"reservedSystemCPUs"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Resolve(&tt.file)
			wantFields(t, err, tt.wantFields...)
			if err != nil {
				return
			}
			for label, pair := range map[string]struct {
				got  corev1.ResourceList
				want map[corev1.ResourceName]string
			}{"systemReserved": {s.SystemReserved, tt.wantSystem}, "kubeReserved": {s.KubeReserved, tt.wantKube}} {
				if len(pair.got) != len(pair.want) {
					t.Errorf("%s = %v, want %v", label, pair.got, pair.want)
				}
				for name, w := range pair.want {
					if g := pair.got[name]; g.Cmp(resource.MustParse(w)) != 0 {
						t.Errorf("%s[%s] = %s, want %s", label, name, g.String(), w)
					}
				}
			}
		})
	}
}

func TestResolveShutdown(t *testing.T) {
	tests := []struct {
		name       string
		file       kubeletv1beta1.KubeletConfiguration
		wantFields []string
		want       []PriorityGracePeriod
	}{
		{
			name: "a grace period with a shorter critical part is accepted",
			file: kubeletv1beta1.KubeletConfiguration{ShutdownGracePeriod: duration(30 * time.Second), ShutdownGracePeriodCriticalPods: duration(10 * time.Second)},
		},
		{
			name: "a critical part equal to the whole is accepted",
			file: kubeletv1beta1.KubeletConfiguration{ShutdownGracePeriod: duration(30 * time.Second), ShutdownGracePeriodCriticalPods: duration(30 * time.Second)},
		},
		{
			name:       "a critical part longer than the whole is refused",
			file:       kubeletv1beta1.KubeletConfiguration{ShutdownGracePeriod: duration(10 * time.Second), ShutdownGracePeriodCriticalPods: duration(30 * time.Second)},
			wantFields: []string{"shutdownGracePeriodCriticalPods"},
		},
		{
			name:       "a negative grace period is refused",
			file:       kubeletv1beta1.KubeletConfiguration{ShutdownGracePeriod: duration(-time.Second)},
			wantFields: []string{"shutdownGracePeriod"},
		},
		{
			name: "grace periods by pod priority are converted to durations",
			file: kubeletv1beta1.KubeletConfiguration{ShutdownGracePeriodByPodPriority: []kubeletv1beta1.ShutdownGracePeriodByPodPriority{
				{Priority: 0, ShutdownGracePeriodSeconds: 60},
				{Priority: 2000000000, ShutdownGracePeriodSeconds: 10},
			}},
			want: []PriorityGracePeriod{{Priority: 0, GracePeriod: time.Minute}, {Priority: 2000000000, GracePeriod: 10 * time.Second}},
		},
		{
			name: "grace periods by pod priority alongside shutdownGracePeriod are refused",
			file: kubeletv1beta1.KubeletConfiguration{
				ShutdownGracePeriod:              duration(30 * time.Second),
				ShutdownGracePeriodByPodPriority: []kubeletv1beta1.ShutdownGracePeriodByPodPriority{{Priority: 0, ShutdownGracePeriodSeconds: 60}},
			},
			wantFields: []string{"shutdownGracePeriodByPodPriority"},
		},
		{
			name: "grace periods by pod priority alongside only the critical part are refused",
			file: kubeletv1beta1.KubeletConfiguration{
				ShutdownGracePeriodCriticalPods:  duration(10 * time.Second),
				ShutdownGracePeriodByPodPriority: []kubeletv1beta1.ShutdownGracePeriodByPodPriority{{Priority: 0, ShutdownGracePeriodSeconds: 60}},
			},
			wantFields: []string{"shutdownGracePeriodCriticalPods", "shutdownGracePeriodByPodPriority"},
		},
		{
			name: "a negative grace period for a priority is refused by index",
			file: kubeletv1beta1.KubeletConfiguration{ShutdownGracePeriodByPodPriority: []kubeletv1beta1.ShutdownGracePeriodByPodPriority{
				{Priority: 0, ShutdownGracePeriodSeconds: 60},
				{Priority: 1000, ShutdownGracePeriodSeconds: -1},
			}},
			wantFields: []string{"shutdownGracePeriodByPodPriority[1].shutdownGracePeriodSeconds"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Resolve(&tt.file)
			wantFields(t, err, tt.wantFields...)
			if err == nil && !reflect.DeepEqual(s.ShutdownGracePeriodByPodPriority, tt.want) {
				t.Errorf("ShutdownGracePeriodByPodPriority = %v, want %v", s.ShutdownGracePeriodByPodPriority, tt.want)
			}
		})
	}
}

func TestValidateAfterFlagOverrides(t *testing.T) {
	tests := []struct {
		name       string
		override   func(*Settings)
		wantFields []string
	}{
		{"an untouched default is valid", func(*Settings) {}, nil},
		{"a flag-set maxPods is valid", func(s *Settings) { s.MaxPods = 20 }, nil},
		{"a zero lease duration from a flag is refused", func(s *Settings) { s.NodeLeaseDurationSeconds = 0 }, []string{"nodeLeaseDurationSeconds"}},
		{"a flag-set taint with a bad effect is refused", func(s *Settings) {
			s.RegisterWithTaints = []corev1.Taint{{Key: "a", Effect: "Never"}}
		}, []string{"registerWithTaints[0]"}},
		{"a threshold with both a quantity and a percentage is refused", func(s *Settings) {
			s.EvictionHard[SignalMemoryAvailable] = Threshold{Quantity: resource.MustParse("1Gi"), Percent: 5}
		}, []string{"evictionHard[memory.available]"}},
		{"a threshold for an unknown signal is refused", func(s *Settings) {
			s.EvictionHard["swap.available"] = Threshold{Percent: 5}
		}, []string{"evictionHard[swap.available]"}},
		{"a reservation of an unsupported resource is refused", func(s *Settings) {
			s.KubeReserved = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}
		}, []string{"kubeReserved[pods]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Defaults()
			tt.override(&s)
			wantFields(t, s.Validate(), tt.wantFields...)
		})
	}
}

func TestCountCPUs(t *testing.T) {
	tests := []struct {
		name    string
		list    string
		want    int
		wantErr bool
	}{
		{"a single CPU counts one", "3", 1, false},
		{"ranges and singles add up", "0-3,8,10-11", 7, false},
		{"a CPU named twice counts once", "0-2,1", 3, false},
		{"spaces around items are allowed", "0, 2", 2, false},
		{"a backwards range is refused", "3-1", 0, true},
		{"a word is refused", "all", 0, true},
		{"an empty item is refused", "1,,2", 0, true},
		{"an absurd CPU number is refused", "0-100000000", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := countCPUs(tt.list)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("countCPUs(%q) = %d, %v; want %d, error %v", tt.list, got, err, tt.want, tt.wantErr)
			}
		})
	}
}
