package podcondition

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSet(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	other := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
	old := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "a",
		LastTransitionTime: metav1.NewTime(t0), LastProbeTime: metav1.NewTime(t0)}
	tests := []struct {
		name    string
		conds   []corev1.PodCondition
		c       corev1.PodCondition
		opts    []Option
		want    []corev1.PodCondition
		changed bool
	}{{
		name:  "a new condition is appended with lastTransitionTime now",
		conds: []corev1.PodCondition{other},
		c:     corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		want: []corev1.PodCondition{other, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now)}},
		changed: true,
	}, {
		name:  "a new condition goes first with First",
		conds: []corev1.PodCondition{other},
		c:     corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		opts:  []Option{First()},
		want: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now)}, other},
		changed: true,
	}, {
		name:  "a same-status update keeps both times",
		conds: []corev1.PodCondition{old},
		c:     corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "b"},
		want: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "b",
			LastTransitionTime: metav1.NewTime(t0), LastProbeTime: metav1.NewTime(t0)}},
		changed: true,
	}, {
		name:    "an identical condition changes nothing",
		conds:   []corev1.PodCondition{old},
		c:       corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "a"},
		want:    []corev1.PodCondition{old},
		changed: false,
	}, {
		name:  "a status change moves lastTransitionTime to now",
		conds: []corev1.PodCondition{old},
		c:     corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		want: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now), LastProbeTime: metav1.NewTime(t0)}},
		changed: true,
	}, {
		name:  "WithProbeTime writes the given lastProbeTime",
		conds: []corev1.PodCondition{old},
		c: corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "a",
			LastProbeTime: metav1.NewTime(now)},
		opts: []Option{WithProbeTime()},
		want: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "a",
			LastTransitionTime: metav1.NewTime(t0), LastProbeTime: metav1.NewTime(now)}},
		changed: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := corev1.PodStatus{Conditions: append([]corev1.PodCondition(nil), tt.conds...)}
			if got := Set(&s, tt.c, now, tt.opts...); got != tt.changed {
				t.Errorf("changed = %v, want %v", got, tt.changed)
			}
			if len(s.Conditions) != len(tt.want) {
				t.Fatalf("conditions = %+v, want %+v", s.Conditions, tt.want)
			}
			for i := range tt.want {
				g, w := s.Conditions[i], tt.want[i]
				if g.Type != w.Type || g.Status != w.Status || g.Reason != w.Reason ||
					!g.LastTransitionTime.Equal(&w.LastTransitionTime) || !g.LastProbeTime.Equal(&w.LastProbeTime) {
					t.Errorf("condition %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}
