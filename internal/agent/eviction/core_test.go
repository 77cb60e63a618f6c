package eviction

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeplane/nodeplane/internal/agent/config"
	"github.com/nodeplane/nodeplane/internal/agent/host"
)

const mi = 1 << 20

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func hard(sig config.Signal, v string) Threshold {
	th, err := config.ParseThreshold(v)
	if err != nil {
		panic(err)
	}
	return Threshold{Signal: sig, Value: th, Hard: true}
}

func soft(sig config.Signal, v string, grace time.Duration) Threshold {
	t := hard(sig, v)
	t.Hard, t.GracePeriod = false, grace
	return t
}

func memObs(availableMi int64) Observations {
	return Observations{config.SignalMemoryAvailable: host.Signal{Available: availableMi * mi, Capacity: 1024 * mi}}
}

type podOpt func(*corev1.Pod)

func withPriority(p int32) podOpt { return func(pod *corev1.Pod) { pod.Spec.Priority = &p } }

func withMemory(request string) podOpt {
	return func(pod *corev1.Pod) {
		q := resource.MustParse(request)
		pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: q, corev1.ResourceCPU: resource.MustParse("100m")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: q, corev1.ResourceCPU: resource.MustParse("100m")},
		}
	}
}

func withToleration(key string) podOpt {
	return func(pod *corev1.Pod) {
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
}

func mkPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func using(p *corev1.Pod, memMi int64) Pod {
	return Pod{Pod: p, Usage: Usage{Memory: memMi * mi, Containers: []ContainerUsage{{Name: "c", Memory: memMi * mi}}}}
}

func names(pods []Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Pod.Name)
	}
	return strings.Join(out, ",")
}

func TestRank(t *testing.T) {
	tests := []struct {
		name   string
		signal config.Signal
		pods   []Pod
		want   string
	}{
		{
			name:   "memory: a pod above its requests goes before a Guaranteed pod within them",
			signal: config.SignalMemoryAvailable,
			pods:   []Pod{using(mkPod("guaranteed", withMemory("64Mi")), 10), using(mkPod("besteffort"), 5)},
			want:   "besteffort,guaranteed",
		},
		{
			name:   "memory: among pods above requests the lower priority goes first",
			signal: config.SignalMemoryAvailable,
			pods:   []Pod{using(mkPod("low-big", withPriority(0)), 500), using(mkPod("neg-small", withPriority(-10)), 1)},
			want:   "neg-small,low-big",
		},
		{
			name:   "memory: at equal priority the larger usage over requests goes first",
			signal: config.SignalMemoryAvailable,
			pods:   []Pod{using(mkPod("small"), 10), using(mkPod("big"), 300), using(mkPod("mid"), 50)},
			want:   "big,mid,small",
		},
		{
			name:   "pid: lower priority first, then most processes",
			signal: config.SignalPIDAvailable,
			pods: []Pod{
				{Pod: mkPod("few", withPriority(5)), Usage: Usage{Processes: 1}},
				{Pod: mkPod("many", withPriority(5)), Usage: Usage{Processes: 90}},
				{Pod: mkPod("high", withPriority(100)), Usage: Usage{Processes: 500}},
			},
			want: "many,few,high",
		},
		{
			name:   "nodefs: disk use above the ephemeral-storage request first",
			signal: config.SignalNodeFSAvailable,
			pods: []Pod{
				{Pod: mkPod("quiet"), Usage: Usage{Disk: 0}},
				{Pod: mkPod("writer"), Usage: Usage{Disk: 100 * mi}},
			},
			want: "writer,quiet",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			Rank(tt.signal, tt.pods)
			if got := names(tt.pods); got != tt.want {
				t.Fatalf("Rank = %s, want %s", got, tt.want)
			}
		})
	}
}

// step is one observation in a Decide scenario.
type step struct {
	at        time.Duration
	available int64 // memory.available in Mi
	// want
	conditions string // "MemoryPressure" or ""
	evict      string // pod name or ""
}

func TestDecide(t *testing.T) {
	pods := []Pod{using(mkPod("guaranteed", withMemory("64Mi")), 10), using(mkPod("besteffort"), 5)}
	tests := []struct {
		name   string
		policy Policy
		pods   []Pod
		steps  []step
	}{
		{
			name:   "a hard threshold evicts at once and pressure clears only after the transition period",
			policy: Policy{Thresholds: []Threshold{hard(config.SignalMemoryAvailable, "100Mi")}, TransitionPeriod: time.Minute},
			pods:   pods,
			steps: []step{
				{at: 0, available: 500},
				{at: 10 * time.Second, available: 50, conditions: "MemoryPressure", evict: "besteffort"},
				{at: 20 * time.Second, available: 500, conditions: "MemoryPressure"},
				{at: 69 * time.Second, available: 500, conditions: "MemoryPressure"},
				{at: 70 * time.Second, available: 500},
			},
		},
		{
			name:   "a soft threshold sets the condition at once but evicts only after its grace period",
			policy: Policy{Thresholds: []Threshold{soft(config.SignalMemoryAvailable, "200Mi", 30*time.Second)}, TransitionPeriod: time.Minute},
			pods:   pods,
			steps: []step{
				{at: 0, available: 150, conditions: "MemoryPressure"},
				{at: 20 * time.Second, available: 150, conditions: "MemoryPressure"},
				{at: 30 * time.Second, available: 150, conditions: "MemoryPressure", evict: "besteffort"},
			},
		},
		{
			name:   "a soft threshold that recovers within its grace period evicts nothing and its clock restarts",
			policy: Policy{Thresholds: []Threshold{soft(config.SignalMemoryAvailable, "200Mi", 30*time.Second)}},
			pods:   pods,
			steps: []step{
				{at: 0, available: 150, conditions: "MemoryPressure"},
				{at: 20 * time.Second, available: 300},
				{at: 40 * time.Second, available: 150, conditions: "MemoryPressure"},
				{at: 69 * time.Second, available: 150, conditions: "MemoryPressure"},
				{at: 70 * time.Second, available: 150, conditions: "MemoryPressure", evict: "besteffort"},
			},
		},
		{
			name: "minimum reclaim keeps evicting until the signal is past the threshold by the reclaim",
			policy: Policy{Thresholds: []Threshold{func() Threshold {
				t := hard(config.SignalMemoryAvailable, "100Mi")
				t.MinReclaim, _ = config.ParseThreshold("200Mi")
				return t
			}()}},
			pods: pods,
			steps: []step{
				{at: 0, available: 50, conditions: "MemoryPressure", evict: "besteffort"},
				{at: 10 * time.Second, available: 250, conditions: "MemoryPressure", evict: "besteffort"},
				{at: 20 * time.Second, available: 301},
			},
		},
		{
			name:   "without minimum reclaim recovering past the threshold ends eviction",
			policy: Policy{Thresholds: []Threshold{hard(config.SignalMemoryAvailable, "100Mi")}},
			pods:   pods,
			steps: []step{
				{at: 0, available: 50, conditions: "MemoryPressure", evict: "besteffort"},
				{at: 10 * time.Second, available: 250},
			},
		},
		{
			name:   "a percentage threshold is of the signal's capacity",
			policy: Policy{Thresholds: []Threshold{hard(config.SignalMemoryAvailable, "10%")}},
			pods:   pods,
			steps: []step{
				{at: 0, available: 103},
				{at: time.Second, available: 102, conditions: "MemoryPressure", evict: "besteffort"},
			},
		},
		{
			name:   "critical pods are never evicted",
			policy: Policy{Thresholds: []Threshold{hard(config.SignalMemoryAvailable, "100Mi")}},
			pods:   []Pod{using(mkPod("critical", withPriority(SystemCriticalPriority)), 900)},
			steps:  []step{{at: 0, available: 50, conditions: "MemoryPressure"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st State
			for i, s := range tt.steps {
				d := Decide(tt.policy, &st, memObs(s.available), tt.pods, t0.Add(s.at))
				var conds []string
				for _, c := range d.Conditions {
					conds = append(conds, string(c))
				}
				evict := ""
				if d.Evict != nil {
					evict = d.Evict.Pod.Name
				}
				if got := strings.Join(conds, ","); got != s.conditions || evict != s.evict {
					t.Fatalf("step %d (t+%s, %dMi available): conditions %q, evict %q; want %q, %q", i, s.at, s.available, got, evict, s.conditions, s.evict)
				}
			}
		})
	}
}

func TestEvictionMessageAndGrace(t *testing.T) {
	grace := int64(120)
	pod := mkPod("web")
	pod.Spec.TerminationGracePeriodSeconds = &grace
	pods := []Pod{using(pod, 300)}
	tests := []struct {
		name      string
		policy    Policy
		wantMsg   string
		wantGrace time.Duration
	}{
		{
			name:      "a hard eviction names the resource, the threshold, what was available and the offending container, with 1 s of grace",
			policy:    Policy{Thresholds: []Threshold{hard(config.SignalMemoryAvailable, "100Mi")}},
			wantMsg:   "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. Container c was using 300Mi, request is 0, has larger consumption of memory. ",
			wantGrace: time.Second,
		},
		{
			name:      "a soft eviction gives the pod its grace capped at evictionMaxPodGracePeriod",
			policy:    Policy{Thresholds: []Threshold{soft(config.SignalMemoryAvailable, "100Mi", 0)}, MaxPodGracePeriod: 30 * time.Second},
			wantMsg:   "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. Container c was using 300Mi, request is 0, has larger consumption of memory. ",
			wantGrace: 30 * time.Second,
		},
		{
			name:      "a soft eviction without a cap gives the pod its own grace",
			policy:    Policy{Thresholds: []Threshold{soft(config.SignalMemoryAvailable, "100Mi", 0)}},
			wantMsg:   "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. Container c was using 300Mi, request is 0, has larger consumption of memory. ",
			wantGrace: 120 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.policy, &State{}, memObs(50), pods, t0)
			if d.Evict == nil {
				t.Fatal("no eviction")
			}
			if d.Evict.Message != tt.wantMsg || d.Evict.GracePeriod != tt.wantGrace {
				t.Fatalf("eviction = %q, grace %s; want %q, %s", d.Evict.Message, d.Evict.GracePeriod, tt.wantMsg, tt.wantGrace)
			}
		})
	}
}

func TestAdmit(t *testing.T) {
	mem := []corev1.NodeConditionType{corev1.NodeMemoryPressure}
	disk := []corev1.NodeConditionType{corev1.NodeDiskPressure}
	tests := []struct {
		name       string
		pod        *corev1.Pod
		conditions []corev1.NodeConditionType
		wantOK     bool
		wantMsg    string
	}{
		{name: "without pressure a BestEffort pod is admitted", pod: mkPod("be"), wantOK: true},
		{name: "under memory pressure a BestEffort pod is refused", pod: mkPod("be"), conditions: mem, wantMsg: "The node had condition: [MemoryPressure]. "},
		{name: "under memory pressure a Guaranteed pod is admitted", pod: mkPod("g", withMemory("64Mi")), conditions: mem, wantOK: true},
		{name: "under memory pressure a BestEffort pod tolerating the memory-pressure taint is admitted", pod: mkPod("be", withToleration(corev1.TaintNodeMemoryPressure)), conditions: mem, wantOK: true},
		{name: "under disk pressure a Guaranteed pod is refused", pod: mkPod("g", withMemory("64Mi")), conditions: disk, wantMsg: "The node had condition: [DiskPressure]. "},
		{name: "under PID pressure a Guaranteed pod is refused", pod: mkPod("g", withMemory("64Mi")), conditions: []corev1.NodeConditionType{corev1.NodePIDPressure}, wantMsg: "The node had condition: [PIDPressure]. "},
		{name: "under memory and disk pressure a Burstable pod is admitted, as the kubelet does", pod: mkPod("g", withMemory("64Mi")), conditions: []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure}, wantOK: true},
		{name: "a critical pod is admitted under disk pressure", pod: mkPod("c", withPriority(SystemCriticalPriority)), conditions: disk, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, reason, msg := Admit(tt.pod, tt.conditions)
			if ok != tt.wantOK {
				t.Fatalf("Admit = %v, %q, %q; want ok=%v", ok, reason, msg, tt.wantOK)
			}
			if !ok && (reason != "Evicted" || msg != tt.wantMsg) {
				t.Fatalf("Admit refused with %q, %q; want Evicted, %q", reason, msg, tt.wantMsg)
			}
		})
	}
}

func TestParseStat(t *testing.T) {
	line := "1234 (my (odd) prog) S 1 1230 1230 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 3 0 12345 10000000 256 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0"
	pgrp, threads, rss, ok := parseStat(line)
	if !ok || pgrp != 1230 || threads != 3 || rss != 256 {
		t.Fatalf("parseStat = %d, %d, %d, %v; want 1230, 3, 256, true", pgrp, threads, rss, ok)
	}
}
