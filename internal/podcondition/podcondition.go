// Package podcondition upserts a pod condition by type, the one way the
// controllers and the scheduler set pod conditions: the node agent, the
// taint eviction and pod garbage collectors and the disruption controller
// all need it, so it sits below all of them and imports only k8s.io/api.
package podcondition

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Set adds c to status or updates the condition of the same type,
// keeping its lastTransitionTime when the status does not change, and
// reports whether anything changed (so an unchanged pod needs no patch).
// now stamps a transition; c.ObservedGeneration is the caller's to set.
func Set(status *corev1.PodStatus, c corev1.PodCondition, now time.Time) bool {
	for i := range status.Conditions {
		old := &status.Conditions[i]
		if old.Type != c.Type {
			continue
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		} else {
			c.LastTransitionTime = metav1.NewTime(now)
		}
		c.LastProbeTime = old.LastProbeTime
		if old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message && old.ObservedGeneration == c.ObservedGeneration {
			return false
		}
		*old = c
		return true
	}
	c.LastTransitionTime = metav1.NewTime(now)
	status.Conditions = append(status.Conditions, c)
	return true
}
