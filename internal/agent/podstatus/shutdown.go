package podstatus

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/podcondition"
)

// Graceful node shutdown (SPEC GNS-5, GNS-6): the reason and messages the
// kubelet writes.
const (
	// ReasonNodeShutdown rejects pods while the node shuts down.
	ReasonNodeShutdown = "NodeShutdown"
	// MessageNodeShutdown is the full message of that rejection (it is
	// not prefixed like the other rejections).
	MessageNodeShutdown = "Pod was rejected as the node is shutting down."
	// ReasonTerminated and MessageShutdownTerminated are the final status
	// of a pod stopped by a graceful node shutdown.
	ReasonTerminated          = "Terminated"
	MessageShutdownTerminated = "Pod was terminated in response to imminent node shutdown."
	// ReasonTerminationByKubelet is the DisruptionTarget condition's reason.
	ReasonTerminationByKubelet = "TerminationByKubelet"
)

// RejectedForShutdown is the status of a pod refused because the node is
// shutting down (GNS-6): like Rejected, with the kubelet's own message.
func RejectedForShutdown(pod *corev1.Pod, now metav1.Time) corev1.PodStatus {
	s := Rejected(pod, ReasonNodeShutdown, "", now)
	s.Message = MessageNodeShutdown
	return s
}

// ShutdownTerminated turns the computed status s of a pod stopped by a
// graceful node shutdown into its final one (GNS-5): phase Failed unless
// the pod had already Succeeded before (was, its phase in the API), reason
// Terminated with the kubelet's message, and the DisruptionTarget=True
// condition (reason TerminationByKubelet). Its transition time is kept
// when the condition was already True.
func ShutdownTerminated(was corev1.PodPhase, s corev1.PodStatus, now metav1.Time) corev1.PodStatus {
	s = *s.DeepCopy()
	s.Phase = corev1.PodFailed
	if was == corev1.PodSucceeded {
		s.Phase = corev1.PodSucceeded
	}
	s.Reason, s.Message = ReasonTerminated, MessageShutdownTerminated
	cond := corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: ReasonTerminationByKubelet, Message: MessageShutdownTerminated,
	}
	// A new one goes first, where Compute keeps the conditions it does
	// not own; a taken-over one loses its lastProbeTime.
	podcondition.Set(&s, cond, now.Time, podcondition.First(), podcondition.WithProbeTime())
	return s
}
