package podstatus

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/agent/runtime"
)

var (
	t0  = metav1.NewTime(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	t1  = metav1.NewTime(t0.Add(time.Minute))
	now = metav1.NewTime(t0.Add(time.Hour))
)

func running() runtime.ContainerStatus {
	return runtime.ContainerStatus{Name: "c", ContainerID: "process://u/c/0", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t0}}}
}

func exited(code int32) runtime.ContainerStatus {
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	return runtime.ContainerStatus{Name: "c", ContainerID: "process://u/c/0", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: t0, FinishedAt: t1},
	}}
}

func backingOff(lastCode int32) runtime.ContainerStatus {
	c := exited(lastCode)
	c.LastTerminationState = c.State
	c.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s restarting failed container=c pod=p_default(u)"}}
	c.RestartCount = 1
	return c
}

func notCreated(name string) runtime.ContainerStatus {
	return runtime.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}}}
}

func named(c runtime.ContainerStatus, name string) runtime.ContainerStatus {
	c.Name = name
	return c
}

func policyPod(policy corev1.RestartPolicy) *corev1.Pod {
	return podWith("p", func(p *corev1.Pod) { p.Spec.RestartPolicy = policy })
}

func TestComputePhase(t *testing.T) {
	initPod := func(policy corev1.RestartPolicy) *corev1.Pod {
		p := policyPod(policy)
		p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "true"}}
		return p
	}
	tests := []struct {
		name   string
		pod    *corev1.Pod
		rs     runtime.PodStatus
		ok     bool
		want   corev1.PodPhase
		reason string // want Ready condition reason
	}{
		{name: "a pod the runtime does not know yet is Pending", pod: policyPod(corev1.RestartPolicyAlways), want: corev1.PodPending, reason: ReasonContainersNotReady},
		{name: "a running container makes the pod Running", pod: policyPod(corev1.RestartPolicyAlways), ok: true,
			rs: runtime.PodStatus{Containers: []runtime.ContainerStatus{running()}}, want: corev1.PodRunning},
		{name: "Always: a container that exited 0 is restarted so the pod stays Running", pod: policyPod(corev1.RestartPolicyAlways), ok: true,
			rs: runtime.PodStatus{Containers: []runtime.ContainerStatus{exited(0)}}, want: corev1.PodRunning, reason: ReasonContainersNotReady},
		{name: "Always: a crash-looping container keeps the pod Running", pod: policyPod(corev1.RestartPolicyAlways), ok: true,
			rs: runtime.PodStatus{Containers: []runtime.ContainerStatus{backingOff(1)}}, want: corev1.PodRunning, reason: ReasonContainersNotReady},
		{name: "OnFailure: exit 0 completes the pod", pod: policyPod(corev1.RestartPolicyOnFailure), ok: true,
			rs: runtime.PodStatus{Containers: []runtime.ContainerStatus{exited(0)}}, want: corev1.PodSucceeded, reason: ReasonPodCompleted},
		{name: "OnFailure: a failed container is retried so the pod stays Running", pod: policyPod(corev1.RestartPolicyOnFailure), ok: true,
			rs: runtime.PodStatus{Containers: []runtime.ContainerStatus{backingOff(2)}}, want: corev1.PodRunning, reason: ReasonContainersNotReady},
		{name: "Never: exit 0 completes the pod", pod: policyPod(corev1.RestartPolicyNever), ok: true,
			rs: runtime.PodStatus{Containers: []runtime.ContainerStatus{exited(0)}}, want: corev1.PodSucceeded, reason: ReasonPodCompleted},
		{name: "Never: a failed container fails the pod", pod: policyPod(corev1.RestartPolicyNever), ok: true,
			rs: runtime.PodStatus{Containers: []runtime.ContainerStatus{exited(1)}}, want: corev1.PodFailed, reason: ReasonContainersNotReady},
		{name: "Always: a killed pod whose container exited 0 Succeeded", pod: policyPod(corev1.RestartPolicyAlways), ok: true,
			rs: runtime.PodStatus{Killed: true, Containers: []runtime.ContainerStatus{exited(0)}}, want: corev1.PodSucceeded, reason: ReasonPodCompleted},
		{name: "Always: a killed pod whose container died of SIGKILL Failed", pod: policyPod(corev1.RestartPolicyAlways), ok: true,
			rs: runtime.PodStatus{Killed: true, Containers: []runtime.ContainerStatus{exited(137)}}, want: corev1.PodFailed, reason: ReasonContainersNotReady},
		{name: "a killed pod still running stays Running and is not ready", pod: policyPod(corev1.RestartPolicyAlways), ok: true,
			rs: runtime.PodStatus{Killed: true, Containers: []runtime.ContainerStatus{running()}}, want: corev1.PodRunning, reason: ReasonContainersNotReady},
		{name: "a running init container keeps the pod Pending", pod: initPod(corev1.RestartPolicyAlways), ok: true,
			rs:   runtime.PodStatus{InitContainers: []runtime.ContainerStatus{named(running(), "init")}, Containers: []runtime.ContainerStatus{notCreated("c")}},
			want: corev1.PodPending, reason: ReasonContainersNotReady},
		{name: "Never: a failed init container fails the pod", pod: initPod(corev1.RestartPolicyNever), ok: true,
			rs:   runtime.PodStatus{InitContainers: []runtime.ContainerStatus{named(exited(1), "init")}, Containers: []runtime.ContainerStatus{notCreated("c")}},
			want: corev1.PodFailed, reason: ReasonContainersNotReady},
		{name: "OnFailure: a failed init container being retried keeps the pod Pending", pod: initPod(corev1.RestartPolicyOnFailure), ok: true,
			rs:   runtime.PodStatus{InitContainers: []runtime.ContainerStatus{named(backingOff(1), "init")}, Containers: []runtime.ContainerStatus{notCreated("c")}},
			want: corev1.PodPending, reason: ReasonContainersNotReady},
		{name: "after the init containers the running container makes the pod Running", pod: initPod(corev1.RestartPolicyAlways), ok: true,
			rs:   runtime.PodStatus{InitContainers: []runtime.ContainerStatus{named(exited(0), "init")}, Containers: []runtime.ContainerStatus{running()}},
			want: corev1.PodRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Compute(tt.pod, tt.rs, tt.ok, now)
			if s.Phase != tt.want {
				t.Errorf("phase = %s, want %s", s.Phase, tt.want)
			}
			ready := findCondition(s.Conditions, corev1.PodReady)
			if ready == nil {
				t.Fatal("no Ready condition")
			}
			wantStatus := corev1.ConditionTrue
			if tt.reason != "" {
				wantStatus = corev1.ConditionFalse
			}
			if ready.Status != wantStatus || ready.Reason != tt.reason {
				t.Errorf("Ready = %s/%q (%q), want %s/%q", ready.Status, ready.Reason, ready.Message, wantStatus, tt.reason)
			}
		})
	}
}

func TestComputeConditions(t *testing.T) {
	pod := policyPod(corev1.RestartPolicyAlways)
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "true"}}
	pod.Spec.Containers = []corev1.Container{{Name: "web", Image: "web"}, {Name: "api", Image: "api"}}
	pod.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: t0},
		{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "Other", LastTransitionTime: t0},
	}

	// Initializing: nothing runs yet.
	s := Compute(pod, runtime.PodStatus{
		InitContainers: []runtime.ContainerStatus{named(running(), "init")},
		Containers:     []runtime.ContainerStatus{notCreated("web"), notCreated("api")},
	}, true, t1)
	wantConditions(t, "initializing", s.Conditions, []corev1.PodCondition{
		{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "Other", LastTransitionTime: t0},
		{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: t1},
		{Type: corev1.PodInitialized, Status: corev1.ConditionFalse, Reason: ReasonContainersNotInitialized, Message: "containers with incomplete status: [init]", LastTransitionTime: t1},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: ReasonContainersNotReady, Message: "containers with unready status: [web api]", LastTransitionTime: t1},
		{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: ReasonContainersNotReady, Message: "containers with unready status: [web api]", LastTransitionTime: t1},
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: t0},
	})
	if got := s.ContainerStatuses[0].State.Waiting; got == nil || got.Reason != ReasonPodInitializing {
		t.Errorf("waiting container state = %+v, want Waiting/PodInitializing", s.ContainerStatuses[0].State)
	}
	if s.ContainerStatuses[0].Name != "api" {
		t.Errorf("container statuses are not sorted by name: first is %q", s.ContainerStatuses[0].Name)
	}
	if s.StartTime == nil || !s.StartTime.Equal(&t1) {
		t.Errorf("startTime = %v, want %v", s.StartTime, t1)
	}

	// One container up: Initialized flips, readiness does not.
	pod.Status = s
	t2 := metav1.NewTime(t1.Add(time.Minute))
	s = Compute(pod, runtime.PodStatus{
		InitContainers: []runtime.ContainerStatus{named(exited(0), "init")},
		Containers:     []runtime.ContainerStatus{named(running(), "web"), notCreated("api")},
	}, true, t2)
	wantConditions(t, "half up", s.Conditions, []corev1.PodCondition{
		{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "Other", LastTransitionTime: t0},
		{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: t1},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: t2},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: ReasonContainersNotReady, Message: "containers with unready status: [api]", LastTransitionTime: t1},
		{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: ReasonContainersNotReady, Message: "containers with unready status: [api]", LastTransitionTime: t1},
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: t0},
	})
	if !s.InitContainerStatuses[0].Ready {
		t.Error("an init container that exited 0 is not ready")
	}
	if s.StartTime == nil || !s.StartTime.Equal(&t1) {
		t.Errorf("startTime changed to %v, want it kept at %v", s.StartTime, t1)
	}

	// All up.
	pod.Status = s
	t3 := metav1.NewTime(t2.Add(time.Minute))
	s = Compute(pod, runtime.PodStatus{
		InitContainers: []runtime.ContainerStatus{named(exited(0), "init")},
		Containers:     []runtime.ContainerStatus{named(running(), "web"), named(running(), "api")},
	}, true, t3)
	ready := findCondition(s.Conditions, corev1.PodReady)
	if ready.Status != corev1.ConditionTrue || !ready.LastTransitionTime.Equal(&t3) {
		t.Errorf("Ready = %+v, want True since %v", ready, t3)
	}
	for _, c := range s.ContainerStatuses {
		if !c.Ready || c.Started == nil || !*c.Started {
			t.Errorf("running container %q: ready=%v started=%v, want both true", c.Name, c.Ready, c.Started)
		}
	}
}

func wantConditions(t *testing.T, step string, got, want []corev1.PodCondition) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d conditions %+v, want %d", step, len(got), got, len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Type != w.Type || g.Status != w.Status || g.Reason != w.Reason || g.Message != w.Message || !g.LastTransitionTime.Equal(&w.LastTransitionTime) {
			t.Errorf("%s: condition %d = %s/%s/%q/%q since %v, want %s/%s/%q/%q since %v", step, i,
				g.Type, g.Status, g.Reason, g.Message, g.LastTransitionTime, w.Type, w.Status, w.Reason, w.Message, w.LastTransitionTime)
		}
	}
}

func TestComputeReadinessGates(t *testing.T) {
	pod := policyPod(corev1.RestartPolicyAlways)
	pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}}
	rs := runtime.PodStatus{Containers: []runtime.ContainerStatus{running()}}

	s := Compute(pod, rs, true, now)
	ready := findCondition(s.Conditions, corev1.PodReady)
	if ready.Status != corev1.ConditionFalse || ready.Reason != ReasonReadinessGatesNotReady ||
		ready.Message != `corresponding condition of pod readiness gate "example.com/lb" does not exist.` {
		t.Errorf("Ready with a missing gate = %+v", ready)
	}

	pod.Status.Conditions = []corev1.PodCondition{{Type: "example.com/lb", Status: corev1.ConditionTrue}}
	s = Compute(pod, rs, true, now)
	if ready := findCondition(s.Conditions, corev1.PodReady); ready.Status != corev1.ConditionTrue {
		t.Errorf("Ready with the gate True = %+v, want True", ready)
	}
	if findCondition(s.Conditions, "example.com/lb") == nil {
		t.Error("the readiness gate condition was dropped")
	}
}

func TestComputeKeepsTerminalPhaseAndReason(t *testing.T) {
	pod := policyPod(corev1.RestartPolicyAlways)
	pod.Status.Phase = corev1.PodFailed
	pod.Status.Reason = "Terminated"
	pod.Status.Message = "Pod was terminated in response to imminent node shutdown."
	s := Compute(pod, runtime.PodStatus{Containers: []runtime.ContainerStatus{running()}}, true, now)
	if s.Phase != corev1.PodFailed || s.Reason != "Terminated" || s.Message != pod.Status.Message {
		t.Errorf("phase/reason/message = %s/%q/%q, want the terminal ones kept", s.Phase, s.Reason, s.Message)
	}
}

func TestComputeClearsReasonWhenPhaseChanges(t *testing.T) {
	pod := policyPod(corev1.RestartPolicyAlways)
	pod.Status.Phase = corev1.PodPending
	pod.Status.Reason = "SomethingPending"
	s := Compute(pod, runtime.PodStatus{Containers: []runtime.ContainerStatus{running()}}, true, now)
	if s.Phase != corev1.PodRunning || s.Reason != "" {
		t.Errorf("phase/reason = %s/%q, want Running with no reason", s.Phase, s.Reason)
	}
}

func TestComputeUnknownPodKeepsOldContainerHistory(t *testing.T) {
	pod := policyPod(corev1.RestartPolicyAlways)
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "done", Image: "true"})
	last := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "c", RestartCount: 4, LastTerminationState: last, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		{Name: "done", RestartCount: 1, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}},
	}
	s := Compute(pod, runtime.PodStatus{}, false, now)
	c, _ := statusOf(s.ContainerStatuses, "c")
	if c.State.Waiting == nil || c.State.Waiting.Reason != ReasonContainerCreating || c.RestartCount != 4 || c.LastTerminationState.Terminated == nil {
		t.Errorf("container c = %+v, want Waiting/ContainerCreating with restartCount 4 and its last termination", c)
	}
	done, _ := statusOf(s.ContainerStatuses, "done")
	if done.State.Terminated == nil || done.RestartCount != 1 {
		t.Errorf("container done = %+v, want its old Terminated status kept", done)
	}
	if cond := findCondition(s.Conditions, corev1.PodReadyToStartContainers); cond.Status != corev1.ConditionFalse {
		t.Errorf("PodReadyToStartContainers = %s, want False for a pod the runtime does not know", cond.Status)
	}
}

func TestComputeCopiesRuntimeIdentity(t *testing.T) {
	pod := policyPod(corev1.RestartPolicyAlways)
	c := running()
	c.ImageID = "process:///usr/bin/sleep"
	c.ContainerID = "process://uid/c/3"
	c.RestartCount = 3
	s := Compute(pod, runtime.PodStatus{Containers: []runtime.ContainerStatus{c}}, true, now)
	got := s.ContainerStatuses[0]
	if got.ImageID != c.ImageID || got.ContainerID != c.ContainerID || got.RestartCount != 3 || got.Image != "sleep" {
		t.Errorf("status = %+v, want image/imageID/containerID/restartCount from the runtime", got)
	}
}

func TestRejected(t *testing.T) {
	pod := policyPod(corev1.RestartPolicyAlways)
	pod.Status.QOSClass = corev1.PodQOSBurstable
	pod.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: t0},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: t0},
	}
	s := Rejected(pod, ReasonOutOfCPU, "Node didn't have enough resource: cpu, requested: 2000, used: 500, capacity: 1000", now)
	if s.Phase != corev1.PodFailed || s.Reason != "OutOfcpu" ||
		s.Message != "Pod was rejected: Node didn't have enough resource: cpu, requested: 2000, used: 500, capacity: 1000" {
		t.Errorf("rejected status = %s/%q/%q", s.Phase, s.Reason, s.Message)
	}
	if s.QOSClass != corev1.PodQOSBurstable {
		t.Errorf("qosClass = %q, want it kept", s.QOSClass)
	}
	if len(s.Conditions) != 1 || s.Conditions[0].Type != corev1.PodScheduled {
		t.Errorf("conditions = %+v, want only PodScheduled kept", s.Conditions)
	}
	if s.StartTime == nil || !s.StartTime.Equal(&now) {
		t.Errorf("startTime = %v, want %v", s.StartTime, now)
	}
}
