package pvcprotection

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDecide(t *testing.T) {
	deleted := metav1.Now()
	claim := func(deleting bool, finalizers ...string) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data", Finalizers: finalizers}}
		if deleting {
			c.DeletionTimestamp = &deleted
		}
		return c
	}
	pod := func(namespace, node, claimName string, phase corev1.PodPhase) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "p"}, Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
		p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName}}}}
		return p
	}
	tests := []struct {
		name  string
		claim *corev1.PersistentVolumeClaim
		pods  []*corev1.Pod
		want  Action
	}{
		{"a live claim without the finalizer gets it", claim(false), nil, AddFinalizer},
		{"a live claim with the finalizer needs nothing", claim(false, Finalizer), nil, Nothing},
		{"a deleted claim no pod uses loses the finalizer", claim(true, Finalizer), nil, RemoveFinalizer},
		{"a deleted claim a scheduled pod uses keeps it", claim(true, Finalizer), []*corev1.Pod{pod("ns", "n1", "data", corev1.PodRunning)}, Nothing},
		{"a deleted claim a finished scheduled pod still names keeps it (as upstream)", claim(true, Finalizer), []*corev1.Pod{pod("ns", "n1", "data", corev1.PodSucceeded)}, Nothing},
		{"an unscheduled pod does not hold the claim", claim(true, Finalizer), []*corev1.Pod{pod("ns", "", "data", corev1.PodPending)}, RemoveFinalizer},
		{"a pod of another claim does not hold it", claim(true, Finalizer), []*corev1.Pod{pod("ns", "n1", "other", corev1.PodRunning)}, RemoveFinalizer},
		{"a pod of another namespace does not hold it", claim(true, Finalizer), []*corev1.Pod{pod("other", "n1", "data", corev1.PodRunning)}, RemoveFinalizer},
		{"a deleted claim without the finalizer needs nothing", claim(true, "x"), nil, Nothing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.claim, tt.pods); got != tt.want {
				t.Errorf("Decide = %v, want %v", got, tt.want)
			}
		})
	}
}
