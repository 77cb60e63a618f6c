// Package podcondition upserts a pod condition by type, the one way the
// API server, the controllers, the scheduler and the node agent set pod
// conditions, so it sits below all of them and imports only k8s.io/api
// and k8s.io/apimachinery.
package podcondition

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Option changes how Set writes a condition.
type Option func(*options)

type options struct {
	probeTime bool
	first     bool
}

// WithProbeTime writes c.LastProbeTime as given instead of keeping the
// old condition's: the scheduler stamps each attempt, the node agent
// clears it when it takes a condition over.
func WithProbeTime() Option { return func(o *options) { o.probeTime = true } }

// First puts a new condition before the existing ones instead of after
// them (an existing one is updated in place either way).
func First() Option { return func(o *options) { o.first = true } }

// Set adds c to status or updates the condition of the same type,
// keeping its lastTransitionTime when the status does not change and,
// unless WithProbeTime, its lastProbeTime, and reports whether anything
// changed (so an unchanged pod needs no patch). now stamps a transition;
// c.ObservedGeneration is the caller's to set.
func Set(status *corev1.PodStatus, c corev1.PodCondition, now time.Time, opts ...Option) bool {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
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
		if !o.probeTime {
			c.LastProbeTime = old.LastProbeTime
		}
		if old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message &&
			old.ObservedGeneration == c.ObservedGeneration && old.LastProbeTime.Equal(&c.LastProbeTime) {
			return false
		}
		*old = c
		return true
	}
	c.LastTransitionTime = metav1.NewTime(now)
	if o.first {
		status.Conditions = append([]corev1.PodCondition{c}, status.Conditions...)
	} else {
		status.Conditions = append(status.Conditions, c)
	}
	return true
}
