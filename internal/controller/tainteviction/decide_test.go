package tainteviction_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/controller/tainteviction"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func secs(n int64) *int64 { return &n }

func noExec(key, value string) corev1.Taint {
	return corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffectNoExecute}
}

var (
	unreachable  = noExec(corev1.TaintNodeUnreachable, "")
	notReady     = noExec(corev1.TaintNodeNotReady, "")
	outOfService = noExec(corev1.TaintNodeOutOfService, "nodeshutdown")
	dedicated    = noExec("dedicated", "db")
)

func tolerate(key string, s *int64) corev1.Toleration {
	return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: s}
}

// defaultTolerations are what DefaultTolerationSeconds admission adds (DTS-1).
func defaultTolerations(s int64) []corev1.Toleration {
	return []corev1.Toleration{tolerate(corev1.TaintNodeNotReady, secs(s)), tolerate(corev1.TaintNodeUnreachable, secs(s))}
}

func podWith(tols ...corev1.Toleration) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web", CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Spec:       corev1.PodSpec{NodeName: "n1", Tolerations: tols},
	}
}

func since(at time.Time, taints ...corev1.Taint) []tainteviction.Taint {
	out := make([]tainteviction.Taint, len(taints))
	for i, t := range taints {
		out[i] = tainteviction.Taint{Taint: t, Since: at}
	}
	return out
}

func TestDecide(t *testing.T) {
	now := t0.Add(10 * time.Second)
	tests := []struct {
		name      string
		taints    []tainteviction.Taint
		pod       *corev1.Pod
		want      tainteviction.Verdict
		wantAt    time.Time
		wantTaint string
	}{
		{
			name: "a node without NoExecute taints keeps every pod",
			pod:  podWith(), want: tainteviction.Stay,
		},
		{
			name:   "a pod without tolerations is evicted at once",
			taints: since(t0, unreachable), pod: podWith(),
			want: tainteviction.EvictNow, wantAt: now, wantTaint: corev1.TaintNodeUnreachable,
		},
		{
			name:   "a pod tolerating one taint but not the other is evicted at once, naming the other",
			taints: since(t0, notReady, outOfService), pod: podWith(defaultTolerations(300)...),
			want: tainteviction.EvictNow, wantAt: now, wantTaint: corev1.TaintNodeOutOfService,
		},
		{
			name:   "a toleration with another value does not tolerate",
			taints: since(t0, dedicated),
			pod:    podWith(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "web", Effect: corev1.TaintEffectNoExecute}),
			want:   tainteviction.EvictNow, wantAt: now, wantTaint: "dedicated",
		},
		{
			name:   "a toleration with the same value tolerates for ever",
			taints: since(t0, dedicated),
			pod:    podWith(corev1.Toleration{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoExecute}),
			want:   tainteviction.Stay,
		},
		{
			name:   "a NoSchedule toleration does not tolerate a NoExecute taint",
			taints: since(t0, unreachable),
			pod:    podWith(corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}),
			want:   tainteviction.EvictNow, wantAt: now, wantTaint: corev1.TaintNodeUnreachable,
		},
		{
			name:   "a toleration with an empty effect tolerates NoExecute",
			taints: since(t0, unreachable),
			pod:    podWith(corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, TolerationSeconds: secs(30)}),
			want:   tainteviction.EvictAt, wantAt: t0.Add(30 * time.Second), wantTaint: corev1.TaintNodeUnreachable,
		},
		{
			name:   "an empty key with Exists tolerates every taint for ever",
			taints: since(t0, unreachable, outOfService, dedicated),
			pod:    podWith(corev1.Toleration{Operator: corev1.TolerationOpExists}),
			want:   tainteviction.Stay,
		},
		{
			name:   "the default tolerations evict 300 s after the taint was added",
			taints: since(t0, unreachable), pod: podWith(defaultTolerations(300)...),
			want: tainteviction.EvictAt, wantAt: t0.Add(300 * time.Second), wantTaint: corev1.TaintNodeUnreachable,
		},
		{
			name:   "the shortest tolerationSeconds over several taints wins",
			taints: since(t0, notReady, dedicated, unreachable),
			pod: podWith(tolerate(corev1.TaintNodeNotReady, secs(300)), tolerate("dedicated", secs(60)),
				tolerate(corev1.TaintNodeUnreachable, secs(120))),
			want: tainteviction.EvictAt, wantAt: t0.Add(60 * time.Second), wantTaint: "dedicated",
		},
		{
			name:   "a taint tolerated for ever does not shorten a finite toleration of another",
			taints: since(t0, dedicated, unreachable),
			pod:    podWith(tolerate("dedicated", nil), tolerate(corev1.TaintNodeUnreachable, secs(120))),
			want:   tainteviction.EvictAt, wantAt: t0.Add(120 * time.Second), wantTaint: corev1.TaintNodeUnreachable,
		},
		{
			name: "each taint counts from its own start, the earliest deadline wins",
			taints: []tainteviction.Taint{
				{Taint: notReady, Since: t0.Add(-250 * time.Second)},
				{Taint: dedicated, Since: t0},
			},
			pod:  podWith(tolerate(corev1.TaintNodeNotReady, secs(300)), tolerate("dedicated", secs(100))),
			want: tainteviction.EvictAt, wantAt: t0.Add(50 * time.Second), wantTaint: corev1.TaintNodeNotReady,
		},
		{
			name:   "only the first tolerating toleration counts, so an earlier one without seconds shadows a later one",
			taints: since(t0, unreachable),
			pod:    podWith(corev1.Toleration{Operator: corev1.TolerationOpExists}, tolerate(corev1.TaintNodeUnreachable, secs(10))),
			want:   tainteviction.Stay,
		},
		{
			name:   "zero tolerationSeconds is due when the taint was added",
			taints: since(t0, unreachable), pod: podWith(tolerate(corev1.TaintNodeUnreachable, secs(0))),
			want: tainteviction.EvictAt, wantAt: t0, wantTaint: corev1.TaintNodeUnreachable,
		},
		{
			name:   "negative tolerationSeconds counts as zero",
			taints: since(t0, unreachable), pod: podWith(tolerate(corev1.TaintNodeUnreachable, secs(-600))),
			want: tainteviction.EvictAt, wantAt: t0, wantTaint: corev1.TaintNodeUnreachable,
		},
		{
			name:   "a huge tolerationSeconds does not wrap around to the past",
			taints: since(t0, unreachable), pod: podWith(tolerate(corev1.TaintNodeUnreachable, secs(1<<62))),
			want: tainteviction.EvictAt, wantAt: t0.Add(time.Duration(1<<63 - 1).Truncate(time.Second)), wantTaint: corev1.TaintNodeUnreachable,
		},
		{
			name:   "a pod bound after the taint counts from its binding",
			taints: since(t0.Add(-time.Hour), dedicated),
			pod:    scheduledAt(podWith(tolerate("dedicated", secs(600))), t0),
			want:   tainteviction.EvictAt, wantAt: t0.Add(600 * time.Second), wantTaint: "dedicated",
		},
		{
			name:   "a pod created after the taint without a PodScheduled condition counts from its creation",
			taints: since(t0.Add(-time.Hour), dedicated),
			pod:    createdAt(podWith(tolerate("dedicated", secs(600))), t0.Add(-time.Minute)),
			want:   tainteviction.EvictAt, wantAt: t0.Add(9 * time.Minute), wantTaint: "dedicated",
		},
		{
			name:   "a clock start in the future (skew) counts from now",
			taints: since(t0, dedicated),
			pod:    scheduledAt(podWith(tolerate("dedicated", secs(60))), now.Add(time.Hour)),
			want:   tainteviction.EvictAt, wantAt: now.Add(60 * time.Second), wantTaint: "dedicated",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tainteviction.Decide(now, tt.taints, tt.pod)
			if got.Verdict != tt.want || !got.At.Equal(tt.wantAt) || got.Taint.Key != tt.wantTaint {
				t.Errorf("got %v at %v (taint %q), want %v at %v (taint %q)", got.Verdict, got.At, got.Taint.Key, tt.want, tt.wantAt, tt.wantTaint)
			}
		})
	}
}

func scheduledAt(pod *corev1.Pod, at time.Time) *corev1.Pod {
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at),
	})
	return pod
}

func createdAt(pod *corev1.Pod, at time.Time) *corev1.Pod {
	pod.CreationTimestamp = metav1.NewTime(at)
	return pod
}

func TestSetCondition(t *testing.T) {
	cond := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: tainteviction.ConditionReason, Message: tainteviction.ConditionMessage}
	t.Run("a new condition is added with the transition time", func(t *testing.T) {
		var st corev1.PodStatus
		if !tainteviction.SetCondition(&st, cond, t0) {
			t.Fatal("got unchanged, want changed")
		}
		if len(st.Conditions) != 1 || !st.Conditions[0].LastTransitionTime.Time.Equal(t0) || st.Conditions[0].Reason != "DeletionByTaintManager" {
			t.Errorf("got %+v", st.Conditions)
		}
	})
	t.Run("the same condition again changes nothing", func(t *testing.T) {
		var st corev1.PodStatus
		tainteviction.SetCondition(&st, cond, t0)
		if tainteviction.SetCondition(&st, cond, t0.Add(time.Minute)) {
			t.Error("got changed, want unchanged")
		}
		if !st.Conditions[0].LastTransitionTime.Time.Equal(t0) {
			t.Errorf("got transition %v, want %v", st.Conditions[0].LastTransitionTime, t0)
		}
	})
	t.Run("another reason with the same status keeps the transition time", func(t *testing.T) {
		st := corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "TerminationByKubelet", LastTransitionTime: metav1.NewTime(t0)}}}
		if !tainteviction.SetCondition(&st, cond, t0.Add(time.Minute)) {
			t.Fatal("got unchanged, want changed")
		}
		if st.Conditions[0].Reason != tainteviction.ConditionReason || !st.Conditions[0].LastTransitionTime.Time.Equal(t0) {
			t.Errorf("got %+v", st.Conditions[0])
		}
	})
	t.Run("a status change stamps a new transition time", func(t *testing.T) {
		st := corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0)}}}
		tainteviction.SetCondition(&st, cond, t0.Add(time.Minute))
		if !st.Conditions[0].LastTransitionTime.Time.Equal(t0.Add(time.Minute)) || st.Conditions[0].Status != corev1.ConditionTrue {
			t.Errorf("got %+v", st.Conditions[0])
		}
	})
}
