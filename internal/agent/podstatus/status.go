// Package podstatus computes what the node agent posts as a Pod's status,
// the way the kubelet does: phase, the kubelet-owned conditions, container
// statuses, and the status of a pod the node refused (Rejected), plus the
// node-side admission checks themselves (Admit).
//
// Everything here is a pure function of (pod, what the runtime observed,
// node, now): no clock, no I/O, no API calls. The package must not talk to
// the runtime or the API server; the agent feeds it and writes the result.
//
// Fields the package leaves as they are in pod.status (the caller owns
// them): hostIP/hostIPs, podIP/podIPs, qosClass, nominatedNodeName,
// resize/resource fields. Probes are not run by nodeplane: a running
// container counts as started and ready.
package podstatus

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/agent/runtime"
)

// Condition reasons written by the kubelet.
const (
	ReasonPodCompleted             = "PodCompleted"
	ReasonContainersNotInitialized = "ContainersNotInitialized"
	ReasonContainersNotReady       = "ContainersNotReady"
	ReasonReadinessGatesNotReady   = "ReadinessGatesNotReady"

	// Default waiting reasons of containers not created yet.
	ReasonContainerCreating = "ContainerCreating"
	ReasonPodInitializing   = "PodInitializing"
)

// Compute returns the status the agent should post for pod, given what the
// runtime observed (rs; ok=false when the runtime does not know the pod yet,
// e.g. right after admission) at time now.
//
// It keeps from pod.status: startTime (set to now if unset), the
// PodScheduled condition, conditions the kubelet does not own (e.g.
// DisruptionTarget), lastTransitionTime of conditions whose status did not
// change, a terminal phase (Succeeded/Failed never go back), and reason and
// message while the phase does not change.
func Compute(pod *corev1.Pod, rs runtime.PodStatus, ok bool, now metav1.Time) corev1.PodStatus {
	old := &pod.Status
	s := *old.DeepCopy()

	initDefault, mainDefault := ReasonPodInitializing, ReasonContainerCreating
	if len(pod.Spec.InitContainers) > 0 {
		mainDefault = ReasonPodInitializing
	}
	var obsInit, obsMain []runtime.ContainerStatus
	killed := false
	if ok {
		obsInit, obsMain, killed = rs.InitContainers, rs.Containers, rs.Killed
	}
	s.InitContainerStatuses = containerStatuses(pod.Spec.InitContainers, old.InitContainerStatuses, obsInit, initDefault, killed, true)
	s.ContainerStatuses = containerStatuses(pod.Spec.Containers, old.ContainerStatuses, obsMain, mainDefault, killed, false)
	sort.SliceStable(s.ContainerStatuses, func(i, j int) bool { return s.ContainerStatuses[i].Name < s.ContainerStatuses[j].Name })

	initialized := hasInitialized(s.ContainerStatuses)
	terminal := killed && !anyRunning(s.InitContainerStatuses) && !anyRunning(s.ContainerStatuses)
	phase := Phase(&pod.Spec, s.InitContainerStatuses, s.ContainerStatuses, terminal, initialized)
	if old.Phase == corev1.PodSucceeded || old.Phase == corev1.PodFailed {
		phase = old.Phase
	}
	if phase != old.Phase {
		s.Reason, s.Message = "", ""
	}
	s.Phase = phase

	sandbox := ok && !killed && phase != corev1.PodSucceeded && phase != corev1.PodFailed
	kubelet := []corev1.PodCondition{
		readyToStartCondition(sandbox),
		initializedCondition(&pod.Spec, s.InitContainerStatuses, phase, initialized),
	}
	containersReady := containersReadyCondition(&pod.Spec, s.InitContainerStatuses, s.ContainerStatuses, phase)
	kubelet = append(kubelet, podReadyCondition(&pod.Spec, old.Conditions, containersReady), containersReady)
	if sched := findCondition(old.Conditions, corev1.PodScheduled); sched != nil {
		kubelet = append(kubelet, *sched)
	} else {
		kubelet = append(kubelet, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue})
	}
	s.Conditions = mergeConditions(old.Conditions, kubelet, now)

	if pod.Generation > 0 {
		s.ObservedGeneration = pod.Generation
		for i := range s.Conditions {
			if kubeletOwned(s.Conditions[i].Type) {
				s.Conditions[i].ObservedGeneration = pod.Generation
			}
		}
	}
	if s.StartTime == nil {
		t := now
		s.StartTime = &t
	}
	return s
}

// Rejected is the status of a pod the node refused to run (see Admit):
// phase Failed, the given reason, and the message prefixed with
// "Pod was rejected: " as the kubelet writes it. Containers get no status;
// startTime, qosClass, host IPs, PodScheduled and conditions the kubelet
// does not own are kept.
func Rejected(pod *corev1.Pod, reason, message string, now metav1.Time) corev1.PodStatus {
	old := &pod.Status
	s := corev1.PodStatus{
		Phase:    corev1.PodFailed,
		Reason:   reason,
		Message:  "Pod was rejected: " + message,
		QOSClass: old.QOSClass,
		HostIP:   old.HostIP,
		HostIPs:  append([]corev1.HostIP(nil), old.HostIPs...),
	}
	for _, c := range old.Conditions {
		if !kubeletOwned(c.Type) || c.Type == corev1.PodScheduled {
			s.Conditions = append(s.Conditions, *c.DeepCopy())
		}
	}
	if old.StartTime != nil {
		s.StartTime = old.StartTime.DeepCopy()
	} else {
		t := now
		s.StartTime = &t
	}
	if pod.Generation > 0 {
		s.ObservedGeneration = pod.Generation
	}
	return s
}

// containerStatuses builds the API statuses of one list of containers (spec
// order). Observed instances win; a container the runtime has not created
// yet keeps an old Terminated status as is, or gets the default waiting
// reason with the old restart count and last termination.
func containerStatuses(specs []corev1.Container, old []corev1.ContainerStatus, observed []runtime.ContainerStatus, defaultReason string, killed, init bool) []corev1.ContainerStatus {
	if len(specs) == 0 {
		return nil
	}
	oldByName := make(map[string]*corev1.ContainerStatus, len(old))
	for i := range old {
		oldByName[old[i].Name] = &old[i]
	}
	obsByName := make(map[string]*runtime.ContainerStatus, len(observed))
	for i := range observed {
		obsByName[observed[i].Name] = &observed[i]
	}
	out := make([]corev1.ContainerStatus, 0, len(specs))
	for _, c := range specs {
		st := corev1.ContainerStatus{
			Name:    c.Name,
			Image:   c.Image,
			State:   corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: defaultReason}},
			Started: new(false),
		}
		o := oldByName[c.Name]
		obs := obsByName[c.Name]
		if obs != nil && created(obs) {
			st.State = *obs.State.DeepCopy()
			if st.State.Waiting != nil && st.State.Waiting.Reason == "" {
				st.State.Waiting.Reason = defaultReason
			}
			st.LastTerminationState = *obs.LastTerminationState.DeepCopy()
			st.RestartCount = obs.RestartCount
			if o != nil && o.RestartCount > st.RestartCount {
				st.RestartCount = o.RestartCount
			}
			if obs.Image != "" {
				st.Image = obs.Image
			}
			st.ImageID = obs.ImageID
			st.ContainerID = obs.ContainerID
		} else if o != nil {
			if o.State.Terminated != nil {
				st = *o.DeepCopy()
			} else {
				st.RestartCount = o.RestartCount
				st.LastTerminationState = *o.LastTerminationState.DeepCopy()
			}
		}
		running := st.State.Running != nil
		st.Started = new(running)
		switch {
		case running:
			st.Ready = !killed
		case init && !isSidecar(c):
			st.Ready = st.State.Terminated != nil && st.State.Terminated.ExitCode == 0
		default:
			st.Ready = false
		}
		out = append(out, st)
	}
	return out
}

// created tells whether the runtime has done anything with the container
// (a Waiting state with an empty reason means "not created yet").
func created(c *runtime.ContainerStatus) bool {
	if c.State.Running != nil || c.State.Terminated != nil {
		return true
	}
	return c.State.Waiting != nil && (c.State.Waiting.Reason != "" || c.ContainerID != "")
}

func anyRunning(cs []corev1.ContainerStatus) bool {
	for _, c := range cs {
		if c.State.Running != nil {
			return true
		}
	}
	return false
}

// hasInitialized tells whether a regular container ever started, which
// means initialization finished at some point.
func hasInitialized(cs []corev1.ContainerStatus) bool {
	for _, c := range cs {
		if c.State.Running != nil || c.State.Terminated != nil ||
			(c.State.Waiting != nil && c.LastTerminationState.Terminated != nil) {
			return true
		}
	}
	return false
}

func statusOf(cs []corev1.ContainerStatus, name string) (corev1.ContainerStatus, bool) {
	for _, c := range cs {
		if c.Name == name {
			return c, true
		}
	}
	return corev1.ContainerStatus{}, false
}

// Phase is the pod phase the kubelet derives from its container statuses.
// terminal means the pod was stopped for good and nothing runs any more;
// initialized means a regular container has started before.
func Phase(spec *corev1.PodSpec, initStatuses, statuses []corev1.ContainerStatus, terminal, initialized bool) corev1.PodPhase {
	pendingInit, pendingSidecars, failedInit := 0, 0, 0
	for _, c := range spec.InitContainers {
		st, found := statusOf(initStatuses, c.Name)
		if isSidecar(c) {
			switch {
			case !found:
				pendingSidecars++
			case st.State.Running != nil:
				if st.Started == nil || !*st.Started {
					pendingSidecars++
				}
			case st.State.Terminated != nil:
			case st.State.Waiting != nil:
				if st.LastTerminationState.Terminated == nil {
					pendingSidecars++
				}
			default:
				pendingSidecars++
			}
			continue
		}
		switch {
		case !found:
			pendingInit++
		case st.State.Running != nil:
			pendingInit++
		case st.State.Terminated != nil:
			if st.State.Terminated.ExitCode != 0 {
				failedInit++
			}
		case st.State.Waiting != nil:
			if last := st.LastTerminationState.Terminated; last != nil {
				if last.ExitCode != 0 {
					failedInit++
				}
			} else {
				pendingInit++
			}
		default:
			pendingInit++
		}
	}

	unknown, running, waiting, stopped, succeeded := 0, 0, 0, 0, 0
	for _, c := range spec.Containers {
		st, found := statusOf(statuses, c.Name)
		switch {
		case !found:
			unknown++
		case st.State.Running != nil:
			running++
		case st.State.Terminated != nil:
			stopped++
			if st.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case st.State.Waiting != nil:
			if st.LastTerminationState.Terminated != nil {
				stopped++
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}

	if failedInit > 0 && spec.RestartPolicy == corev1.RestartPolicyNever {
		return corev1.PodFailed
	}
	switch {
	case pendingInit > 0, pendingSidecars > 0 && !initialized:
		return corev1.PodPending
	case waiting > 0:
		return corev1.PodPending
	case running > 0 && unknown == 0:
		return corev1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if terminal {
			if stopped == succeeded {
				return corev1.PodSucceeded
			}
			return corev1.PodFailed
		}
		if spec.RestartPolicy == corev1.RestartPolicyAlways {
			// Containers are being restarted.
			return corev1.PodRunning
		}
		if stopped == succeeded {
			return corev1.PodSucceeded
		}
		if spec.RestartPolicy == corev1.RestartPolicyNever {
			return corev1.PodFailed
		}
		return corev1.PodRunning
	}
	return corev1.PodPending
}

func readyToStartCondition(sandbox bool) corev1.PodCondition {
	c := corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse}
	if sandbox {
		c.Status = corev1.ConditionTrue
	}
	return c
}

func initializedCondition(spec *corev1.PodSpec, statuses []corev1.ContainerStatus, phase corev1.PodPhase, initialized bool) corev1.PodCondition {
	ok := corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}
	if len(spec.InitContainers) == 0 {
		return ok
	}
	var unknown, incomplete []string
	for _, c := range spec.InitContainers {
		st, found := statusOf(statuses, c.Name)
		if isSidecar(c) {
			if !found || st.Started == nil || !*st.Started {
				incomplete = append(incomplete, c.Name)
			}
			continue
		}
		switch {
		case !found:
			unknown = append(unknown, c.Name)
		case st.State.Terminated == nil || st.State.Terminated.ExitCode != 0:
			incomplete = append(incomplete, c.Name)
		}
	}
	if phase == corev1.PodSucceeded && len(unknown) == 0 {
		ok.Reason = ReasonPodCompleted
		return ok
	}
	if initialized {
		return ok
	}
	if msg := joinProblems(unknown, "containers with unknown status: %s", incomplete, "containers with incomplete status: %s"); msg != "" {
		return corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionFalse, Reason: ReasonContainersNotInitialized, Message: msg}
	}
	return ok
}

func containersReadyCondition(spec *corev1.PodSpec, initStatuses, statuses []corev1.ContainerStatus, phase corev1.PodPhase) corev1.PodCondition {
	var unknown, unready []string
	for _, c := range spec.InitContainers {
		if !isSidecar(c) {
			continue
		}
		if st, found := statusOf(initStatuses, c.Name); !found {
			unknown = append(unknown, c.Name)
		} else if !st.Ready {
			unready = append(unready, c.Name)
		}
	}
	for _, c := range spec.Containers {
		if st, found := statusOf(statuses, c.Name); !found {
			unknown = append(unknown, c.Name)
		} else if !st.Ready {
			unready = append(unready, c.Name)
		}
	}
	if phase == corev1.PodSucceeded && len(unknown) == 0 {
		return corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: ReasonPodCompleted}
	}
	if msg := joinProblems(unknown, "containers with unknown status: %s", unready, "containers with unready status: %s"); msg != "" {
		return corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: ReasonContainersNotReady, Message: msg}
	}
	return corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}
}

// podReadyCondition is ContainersReady plus the pod's readiness gates
// (conditions other components set on the pod).
func podReadyCondition(spec *corev1.PodSpec, old []corev1.PodCondition, containersReady corev1.PodCondition) corev1.PodCondition {
	if containersReady.Status != corev1.ConditionTrue {
		return corev1.PodCondition{Type: corev1.PodReady, Status: containersReady.Status, Reason: containersReady.Reason, Message: containersReady.Message}
	}
	var msgs []string
	for _, g := range spec.ReadinessGates {
		c := findCondition(old, g.ConditionType)
		switch {
		case c == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", g.ConditionType))
		case c.Status != corev1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", g.ConditionType, c.Status))
		}
	}
	if len(msgs) > 0 {
		msg := msgs[0]
		for _, m := range msgs[1:] {
			msg += ", " + m
		}
		return corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: ReasonReadinessGatesNotReady, Message: msg}
	}
	return corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
}

// joinProblems formats the kubelet's "containers with … status: [a b]"
// messages, joined with ", ".
func joinProblems(first []string, firstFormat string, second []string, secondFormat string) string {
	var parts []string
	if len(first) > 0 {
		parts = append(parts, fmt.Sprintf(firstFormat, fmt.Sprint(first)))
	}
	if len(second) > 0 {
		parts = append(parts, fmt.Sprintf(secondFormat, fmt.Sprint(second)))
	}
	msg := ""
	for i, p := range parts {
		if i > 0 {
			msg += ", "
		}
		msg += p
	}
	return msg
}

func findCondition(cs []corev1.PodCondition, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// kubeletOwned are the condition types the kubelet (re)writes on every
// status update; other conditions on the pod are kept as they are.
func kubeletOwned(t corev1.PodConditionType) bool {
	switch t {
	case corev1.PodScheduled, corev1.PodReady, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReadyToStartContainers:
		return true
	}
	return false
}

// mergeConditions keeps old conditions the kubelet does not own (first, in
// their order), then appends the kubelet's, carrying lastTransitionTime over
// from the old condition of the same type when the status did not change.
func mergeConditions(old, kubelet []corev1.PodCondition, now metav1.Time) []corev1.PodCondition {
	out := make([]corev1.PodCondition, 0, len(old)+len(kubelet))
	for _, c := range old {
		if !kubeletOwned(c.Type) {
			out = append(out, *c.DeepCopy())
		}
	}
	for _, c := range kubelet {
		c = *c.DeepCopy()
		if prev := findCondition(old, c.Type); prev != nil && prev.Status == c.Status && !prev.LastTransitionTime.IsZero() {
			c.LastTransitionTime = prev.LastTransitionTime
		} else if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = now
		}
		out = append(out, c)
	}
	return out
}
