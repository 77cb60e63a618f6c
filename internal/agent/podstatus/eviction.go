package podstatus

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/podcondition"
)

// ReasonEvicted is the final status reason of a pod the node evicted under
// resource pressure (the kubelet's eviction manager).
const ReasonEvicted = "Evicted"

// Evicted turns the computed status s of a pod stopped by node-pressure
// eviction into its final one: phase Failed, reason Evicted with the
// eviction message, and the DisruptionTarget=True condition (reason
// TerminationByKubelet, the same message).
func Evicted(s corev1.PodStatus, message string, now metav1.Time) corev1.PodStatus {
	s = *s.DeepCopy()
	s.Phase = corev1.PodFailed
	s.Reason, s.Message = ReasonEvicted, message
	cond := corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: ReasonTerminationByKubelet, Message: message,
	}
	podcondition.Set(&s, cond, now.Time, podcondition.First(), podcondition.WithProbeTime())
	return s
}
