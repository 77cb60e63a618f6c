package replicaset

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodActive reports whether pod counts toward a controller's replicas: it
// is neither terminal (Succeeded, Failed) nor terminating (deletionTimestamp
// set). A terminating pod is replaced at once.
func PodActive(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && !podTerminal(pod)
}

// PodTerminating reports whether pod is being deleted and still running:
// it shows in status.terminatingReplicas.
func PodTerminating(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp != nil && !podTerminal(pod)
}

func podTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// readyCondition returns pod's Ready condition, or nil.
func readyCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// PodReady reports whether pod's Ready condition is True.
func PodReady(pod *corev1.Pod) bool {
	c := readyCondition(pod)
	return c != nil && c.Status == corev1.ConditionTrue
}

// PodAvailable reports whether pod is available at now: ready, and with
// minReadySeconds > 0 ready for more than that long (its Ready condition's
// lastTransitionTime is more than minReadySeconds before now).
func PodAvailable(pod *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	wait, ok := UntilAvailable(pod, minReadySeconds, now)
	return ok && wait == 0
}

// UntilAvailable returns how long a ready pod still needs to become
// available (0 if it is), and false if the pod is not ready. A ready pod
// whose condition has no lastTransitionTime never becomes available when
// minReadySeconds > 0, as upstream; it reports false.
func UntilAvailable(pod *corev1.Pod, minReadySeconds int32, now time.Time) (time.Duration, bool) {
	c := readyCondition(pod)
	if c == nil || c.Status != corev1.ConditionTrue {
		return 0, false
	}
	if minReadySeconds <= 0 {
		return 0, true
	}
	if c.LastTransitionTime.IsZero() {
		return 0, false
	}
	at := c.LastTransitionTime.Add(time.Duration(minReadySeconds) * time.Second)
	if at.Before(now) {
		return 0, true
	}
	// Available strictly after `at`: ask to be woken just past it.
	return at.Sub(now) + time.Millisecond, true
}

// PodFromTemplate is the pod a controller creates from template in
// namespace: the template's labels, annotations, finalizers and spec,
// generateName, and owner as controller reference. The template is not
// modified.
func PodFromTemplate(template *corev1.PodTemplateSpec, namespace, generateName string, owner metav1.OwnerReference) *corev1.Pod {
	t := template.DeepCopy()
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       namespace,
			GenerateName:    generateName,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: t.Spec,
	}
}
