package podstatus

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestShutdownTerminated(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC))
	earlier := metav1.NewTime(now.Add(-5 * time.Second))
	for _, tc := range []struct {
		name      string
		was       corev1.PodPhase
		in        corev1.PodStatus
		wantPhase corev1.PodPhase
		wantSince metav1.Time
	}{
		{name: "a running pod ends Failed", was: corev1.PodRunning, in: corev1.PodStatus{Phase: corev1.PodRunning}, wantPhase: corev1.PodFailed, wantSince: now},
		{name: "a running pod whose processes exited 0 on SIGTERM ends Failed", was: corev1.PodRunning, in: corev1.PodStatus{Phase: corev1.PodSucceeded}, wantPhase: corev1.PodFailed, wantSince: now},
		{name: "a pod that had succeeded before stays Succeeded", was: corev1.PodSucceeded, in: corev1.PodStatus{Phase: corev1.PodSucceeded}, wantPhase: corev1.PodSucceeded, wantSince: now},
		{name: "a DisruptionTarget already True keeps its transition time",
			in:        corev1.PodStatus{Phase: corev1.PodFailed, Conditions: []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, LastTransitionTime: earlier}}},
			wantPhase: corev1.PodFailed, wantSince: earlier},
		{name: "a DisruptionTarget False turns True now",
			in:        corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionFalse, LastTransitionTime: earlier}}},
			wantPhase: corev1.PodFailed, wantSince: now},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ShutdownTerminated(tc.was, tc.in, now)
			if got.Phase != tc.wantPhase || got.Reason != "Terminated" || got.Message != "Pod was terminated in response to imminent node shutdown." {
				t.Errorf("phase/reason/message = %s/%s/%q", got.Phase, got.Reason, got.Message)
			}
			c := findCondition(got.Conditions, corev1.DisruptionTarget)
			if c == nil || c.Status != corev1.ConditionTrue || c.Reason != "TerminationByKubelet" || !c.LastTransitionTime.Equal(&tc.wantSince) {
				t.Errorf("DisruptionTarget = %+v, want True/TerminationByKubelet since %v", c, tc.wantSince)
			}
			if n := len(got.Conditions); n != max(1, len(tc.in.Conditions)) {
				t.Errorf("%d conditions, want no duplicate DisruptionTarget", n)
			}
		})
	}
}

func TestRejectedForShutdown(t *testing.T) {
	got := RejectedForShutdown(&corev1.Pod{}, metav1.Now())
	if got.Phase != corev1.PodFailed || got.Reason != "NodeShutdown" || got.Message != "Pod was rejected as the node is shutting down." {
		t.Errorf("status %s/%s/%q", got.Phase, got.Reason, got.Message)
	}
}
