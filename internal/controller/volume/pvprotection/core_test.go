package pvprotection

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDecide(t *testing.T) {
	deleted := metav1.Now()
	volume := func(deleting bool, phase corev1.PersistentVolumePhase, finalizers ...string) *corev1.PersistentVolume {
		v := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", Finalizers: finalizers}, Status: corev1.PersistentVolumeStatus{Phase: phase}}
		if deleting {
			v.DeletionTimestamp = &deleted
		}
		return v
	}
	tests := []struct {
		name string
		pv   *corev1.PersistentVolume
		want Action
	}{
		{"a live volume without the finalizer gets it", volume(false, corev1.VolumeAvailable), AddFinalizer},
		{"a live bound volume with the finalizer needs nothing", volume(false, corev1.VolumeBound, Finalizer), Nothing},
		{"a deleted bound volume keeps the finalizer", volume(true, corev1.VolumeBound, Finalizer), Nothing},
		{"a deleted released volume loses it", volume(true, corev1.VolumeReleased, Finalizer), RemoveFinalizer},
		{"a deleted available volume loses it", volume(true, corev1.VolumeAvailable, Finalizer), RemoveFinalizer},
		{"a deleted volume with no phase yet loses it", volume(true, "", Finalizer), RemoveFinalizer},
		{"a deleted volume without the finalizer needs nothing", volume(true, corev1.VolumeReleased), Nothing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.pv); got != tt.want {
				t.Errorf("Decide = %v, want %v", got, tt.want)
			}
		})
	}
}
