package printers

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// nodeLostReason is the pod status reason the node lifecycle controller sets
// on pods of an unreachable node; such pods print as Unknown while deleting.
const nodeLostReason = "NodeLost"

// Pods prints pods: NAME READY STATUS RESTARTS AGE, and with -o wide IP NODE
// NOMINATED NODE READINESS GATES.
func Pods() Printer {
	status := corev1.PodStatus{}.SwaggerDoc()
	spec := corev1.PodSpec{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
			column("Status", "string", "The aggregate status of the containers in this pod."),
			column("Restarts", "string", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
			ageColumn(),
			wideColumn("IP", "string", status["podIP"]),
			wideColumn("Node", "string", spec["nodeName"]),
			wideColumn("Nominated Node", "string", status["nominatedNodeName"]),
			wideColumn("Readiness Gates", "string", spec["readinessGates"]),
		},
		Cells:      cellsOf(podCells),
		conditions: podRowConditions,
	}
}

func podCells(pod *corev1.Pod, now time.Time) []interface{} {
	s := summarizePod(pod)
	restarts := strconv.Itoa(s.restarts)
	if s.restarts != 0 && !s.lastRestart.IsZero() {
		restarts = fmt.Sprintf("%d (%s ago)", s.restarts, age(s.lastRestart, now))
	}
	return []interface{}{
		pod.Name,
		fmt.Sprintf("%d/%d", s.ready, s.total),
		s.reason,
		restarts,
		age(pod.CreationTimestamp, now),
		orNone(podIP(pod)),
		orNone(pod.Spec.NodeName),
		orNone(pod.Status.NominatedNodeName),
		readinessGates(pod),
	}
}

// podRowConditions marks a finished pod's row Completed, as Kubernetes does.
func podRowConditions(obj runtime.Object) []metav1.TableRowCondition {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		return []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodSucceeded), Message: "The pod has completed successfully."}}
	case corev1.PodFailed:
		return []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodFailed), Message: "The pod failed."}}
	}
	return nil
}

// podSummary is what kubectl shows about a pod's containers.
type podSummary struct {
	reason      string      // STATUS
	ready       int         // READY numerator
	total       int         // READY denominator: containers plus sidecars
	restarts    int         // RESTARTS count
	lastRestart metav1.Time // when the most recent counted restart ended
}

// restartTally sums restarts and remembers the latest termination.
type restartTally struct {
	count int
	last  metav1.Time
}

func (t *restartTally) add(cs corev1.ContainerStatus) {
	t.count += int(cs.RestartCount)
	if term := cs.LastTerminationState.Terminated; term != nil && t.last.Before(&term.FinishedAt) {
		t.last = term.FinishedAt
	}
}

// summarizePod reproduces kubectl's STATUS, READY and RESTARTS for a pod.
//
// STATUS starts as the phase (or status.reason), is replaced by the first init
// container still blocking start-up ("Init:1/3", "Init:CrashLoopBackOff",
// "Init:Error"...), otherwise by the most significant app container state
// (the first container's waiting or terminated reason wins), and finally by
// Terminating, or Unknown for a deleting pod on a lost node.
//
// RESTARTS counts the init containers seen while the pod is still
// initializing, otherwise the app containers plus sidecars (restartable init
// containers).
func summarizePod(pod *corev1.Pod) podSummary {
	s := podSummary{reason: string(pod.Status.Phase), total: len(pod.Spec.Containers)}
	if pod.Status.Reason != "" {
		s.reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			s.reason = corev1.PodReasonSchedulingGated
		}
	}

	sidecars := make(map[string]bool)
	for i := range pod.Spec.InitContainers {
		if isSidecar(&pod.Spec.InitContainers[i]) {
			sidecars[pod.Spec.InitContainers[i].Name] = true
			s.total++
		}
	}

	var initRestarts, sidecarRestarts restartTally
	initializing := false
	for i, cs := range pod.Status.InitContainerStatuses {
		initRestarts.add(cs)
		if sidecars[cs.Name] {
			sidecarRestarts.add(cs)
		}
		if term := cs.State.Terminated; term != nil && term.ExitCode == 0 {
			continue // finished its job
		}
		if sidecars[cs.Name] && cs.Started != nil && *cs.Started {
			if cs.Ready {
				s.ready++
			}
			continue // a started sidecar does not hold up the pod
		}
		s.reason = blockingInitReason(i, cs, len(pod.Spec.InitContainers))
		initializing = true
		break
	}

	if initializing && !podConditionTrue(pod, corev1.PodInitialized) {
		s.restarts, s.lastRestart = initRestarts.count, initRestarts.last
	} else {
		restarts := sidecarRestarts
		hasRunning := false
		// From the last container to the first, so the first one's state wins.
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			cs := pod.Status.ContainerStatuses[i]
			restarts.add(cs)
			switch {
			case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
				s.reason = cs.State.Waiting.Reason
			case cs.State.Terminated != nil && cs.State.Terminated.Reason != "":
				s.reason = cs.State.Terminated.Reason
			case cs.State.Terminated != nil:
				s.reason = exitReason("", cs.State.Terminated)
			case cs.Ready && cs.State.Running != nil:
				hasRunning = true
				s.ready++
			}
		}
		s.restarts, s.lastRestart = restarts.count, restarts.last
		// A pod with a completed container but others still running is running.
		if s.reason == "Completed" && hasRunning {
			s.reason = "NotReady"
			if podConditionTrue(pod, corev1.PodReady) {
				s.reason = "Running"
			}
		}
	}

	if pod.DeletionTimestamp != nil {
		switch {
		case pod.Status.Reason == nodeLostReason:
			s.reason = "Unknown"
		case pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed:
			s.reason = "Terminating"
		}
	}
	return s
}

// blockingInitReason is the STATUS shown while init container number i (of
// total) holds up the pod: how it failed, why it waits, or how far
// initialization got.
func blockingInitReason(i int, cs corev1.ContainerStatus, total int) string {
	switch {
	case cs.State.Terminated != nil:
		return exitReason("Init:", cs.State.Terminated)
	case cs.State.Waiting != nil && cs.State.Waiting.Reason != "" && cs.State.Waiting.Reason != "PodInitializing":
		return "Init:" + cs.State.Waiting.Reason
	default:
		return fmt.Sprintf("Init:%d/%d", i, total)
	}
}

// exitReason names a terminated container's state: its reason, else the signal
// that killed it, else its exit code.
func exitReason(prefix string, term *corev1.ContainerStateTerminated) string {
	switch {
	case term.Reason != "":
		return prefix + term.Reason
	case term.Signal != 0:
		return fmt.Sprintf("%sSignal:%d", prefix, term.Signal)
	default:
		return fmt.Sprintf("%sExitCode:%d", prefix, term.ExitCode)
	}
}

// isSidecar reports whether an init container keeps running beside the app
// containers (restartPolicy: Always).
func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

func podConditionTrue(pod *corev1.Pod, typ corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == typ {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podIP is the pod's primary IP.
func podIP(pod *corev1.Pod) string {
	if len(pod.Status.PodIPs) > 0 {
		return pod.Status.PodIPs[0].IP
	}
	return pod.Status.PodIP
}

// readinessGates is "<none>", or how many of the pod's readiness gates have a
// True condition out of how many there are.
func readinessGates(pod *corev1.Pod) string {
	if len(pod.Spec.ReadinessGates) == 0 {
		return "<none>"
	}
	ready := 0
	for _, gate := range pod.Spec.ReadinessGates {
		if podConditionTrue(pod, gate.ConditionType) {
			ready++
		}
	}
	return fmt.Sprintf("%d/%d", ready, len(pod.Spec.ReadinessGates))
}
