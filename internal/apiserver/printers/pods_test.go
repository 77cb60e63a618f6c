package printers

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Container states and statuses, shortened for the tables below.
func running() corev1.ContainerState {
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
}

func waiting(reason string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
}

func terminated(reason string, exitCode, signal int32) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: exitCode, Signal: signal}}
}

func status(name string, state corev1.ContainerState, ready bool) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: state, Ready: ready}
}

func containers(names ...string) []corev1.Container {
	out := make([]corev1.Container, len(names))
	for i, n := range names {
		out[i] = corev1.Container{Name: n, Image: n + ":1"}
	}
	return out
}

func sidecar(name string) corev1.Container {
	return corev1.Container{Name: name, RestartPolicy: new(corev1.ContainerRestartPolicyAlways)}
}

func condition(typ corev1.PodConditionType, s corev1.ConditionStatus) corev1.PodCondition {
	return corev1.PodCondition{Type: typ, Status: s}
}

func TestPodReadyStatusRestarts(t *testing.T) {
	crashed := status("app", waiting("CrashLoopBackOff"), false)
	crashed.RestartCount = 3
	crashed.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: ago(5 * time.Minute)}}

	restartedNoRecord := status("app", running(), true)
	restartedNoRecord.RestartCount = 2

	startedSidecar := status("proxy", running(), true)
	startedSidecar.Started = new(true)
	startedSidecar.RestartCount = 1
	startedSidecar.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: ago(2 * time.Minute)}}

	failingInit := status("init", terminated("Error", 1, 0), false)
	failingInit.RestartCount = 4

	tests := []struct {
		name                   string
		spec                   corev1.PodSpec
		status                 corev1.PodStatus
		deleting               bool
		ready, state, restarts string
	}{
		{
			name:   "a pending pod without statuses shows its phase",
			spec:   corev1.PodSpec{Containers: containers("app")},
			status: corev1.PodStatus{Phase: corev1.PodPending},
			ready:  "0/1", state: "Pending", restarts: "0",
		},
		{
			name:   "a running pod with all containers ready shows Running",
			spec:   corev1.PodSpec{Containers: containers("a", "b")},
			status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{status("a", running(), true), status("b", running(), true)}},
			ready:  "2/2", state: "Running", restarts: "0",
		},
		{
			name:   "a running container that is not ready is not counted ready",
			spec:   corev1.PodSpec{Containers: containers("a", "b")},
			status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{status("a", running(), true), status("b", running(), false)}},
			ready:  "1/2", state: "Running", restarts: "0",
		},
		{
			name:   "a crashed container shows its restart count with age",
			spec:   corev1.PodSpec{Containers: containers("app")},
			status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{crashed}},
			ready:  "0/1", state: "CrashLoopBackOff", restarts: "3 (5m ago)",
		},
		{
			name:   "restarts without a recorded termination show only the count",
			spec:   corev1.PodSpec{Containers: containers("app")},
			status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{restartedNoRecord}},
			ready:  "1/1", state: "Running", restarts: "2",
		},
		{
			name:   "the first container's waiting reason wins",
			spec:   corev1.PodSpec{Containers: containers("a", "b")},
			status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{status("a", waiting("ErrImagePull"), false), status("b", waiting("ContainerCreating"), false)}},
			ready:  "0/2", state: "ErrImagePull", restarts: "0",
		},
		{
			name:   "a container killed by a signal without a reason shows Signal:N",
			spec:   corev1.PodSpec{Containers: containers("app")},
			status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{status("app", terminated("", 137, 9), false)}},
			ready:  "0/1", state: "Signal:9", restarts: "0",
		},
		{
			name:   "a container that exited without a reason shows ExitCode:N",
			spec:   corev1.PodSpec{Containers: containers("app")},
			status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{status("app", terminated("", 2, 0), false)}},
			ready:  "0/1", state: "ExitCode:2", restarts: "0",
		},
		{
			name:   "a pod whose containers finished shows Completed",
			spec:   corev1.PodSpec{Containers: containers("app")},
			status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{status("app", terminated("Completed", 0, 0), false)}},
			ready:  "0/1", state: "Completed", restarts: "0",
		},
		{
			name: "a completed container beside a running one shows Running when the pod is ready",
			spec: corev1.PodSpec{Containers: containers("job", "web")},
			status: corev1.PodStatus{
				Phase:             corev1.PodRunning,
				Conditions:        []corev1.PodCondition{condition(corev1.PodReady, corev1.ConditionTrue)},
				ContainerStatuses: []corev1.ContainerStatus{status("job", terminated("Completed", 0, 0), false), status("web", running(), true)},
			},
			ready: "1/2", state: "Running", restarts: "0",
		},
		{
			name: "a completed container beside a running one shows NotReady when the pod is not ready",
			spec: corev1.PodSpec{Containers: containers("job", "web")},
			status: corev1.PodStatus{
				Phase:             corev1.PodRunning,
				Conditions:        []corev1.PodCondition{condition(corev1.PodReady, corev1.ConditionFalse)},
				ContainerStatuses: []corev1.ContainerStatus{status("job", terminated("Completed", 0, 0), false), status("web", running(), true)},
			},
			ready: "1/2", state: "NotReady", restarts: "0",
		},
		{
			name:   "an init container running shows Init:0/1",
			spec:   corev1.PodSpec{InitContainers: containers("init"), Containers: containers("app")},
			status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{status("init", running(), false)}, ContainerStatuses: []corev1.ContainerStatus{status("app", waiting("PodInitializing"), false)}},
			ready:  "0/1", state: "Init:0/1", restarts: "0",
		},
		{
			name: "the second of two init containers running shows Init:1/2",
			spec: corev1.PodSpec{InitContainers: containers("one", "two"), Containers: containers("app")},
			status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{
				status("one", terminated("Completed", 0, 0), false), status("two", running(), false),
			}},
			ready: "0/1", state: "Init:1/2", restarts: "0",
		},
		{
			name:   "a failed init container shows Init:Error and its restarts",
			spec:   corev1.PodSpec{InitContainers: containers("init"), Containers: containers("app")},
			status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{failingInit}},
			ready:  "0/1", state: "Init:Error", restarts: "4",
		},
		{
			name:   "an init container killed by a signal shows Init:Signal:N",
			spec:   corev1.PodSpec{InitContainers: containers("init"), Containers: containers("app")},
			status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{status("init", terminated("", 137, 9), false)}},
			ready:  "0/1", state: "Init:Signal:9", restarts: "0",
		},
		{
			name:   "an init container exiting without a reason shows Init:ExitCode:N",
			spec:   corev1.PodSpec{InitContainers: containers("init"), Containers: containers("app")},
			status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{status("init", terminated("", 3, 0), false)}},
			ready:  "0/1", state: "Init:ExitCode:3", restarts: "0",
		},
		{
			name:   "a crash-looping init container shows Init:CrashLoopBackOff",
			spec:   corev1.PodSpec{InitContainers: containers("init"), Containers: containers("app")},
			status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{status("init", waiting("CrashLoopBackOff"), false)}},
			ready:  "0/1", state: "Init:CrashLoopBackOff", restarts: "0",
		},
		{
			name: "app containers waiting after init shows PodInitializing",
			spec: corev1.PodSpec{InitContainers: containers("init"), Containers: containers("app")},
			status: corev1.PodStatus{
				Phase:                 corev1.PodPending,
				Conditions:            []corev1.PodCondition{condition(corev1.PodInitialized, corev1.ConditionTrue)},
				InitContainerStatuses: []corev1.ContainerStatus{status("init", terminated("Completed", 0, 0), false)},
				ContainerStatuses:     []corev1.ContainerStatus{status("app", waiting("PodInitializing"), false)},
			},
			ready: "0/1", state: "PodInitializing", restarts: "0",
		},
		{
			name: "a started sidecar counts towards READY and its restarts are shown",
			spec: corev1.PodSpec{InitContainers: []corev1.Container{sidecar("proxy")}, Containers: containers("app")},
			status: corev1.PodStatus{
				Phase:                 corev1.PodRunning,
				InitContainerStatuses: []corev1.ContainerStatus{startedSidecar},
				ContainerStatuses:     []corev1.ContainerStatus{status("app", running(), true)},
			},
			ready: "2/2", state: "Running", restarts: "1 (2m ago)",
		},
		{
			name: "a sidecar that has not started holds the pod in Init",
			spec: corev1.PodSpec{InitContainers: []corev1.Container{sidecar("proxy")}, Containers: containers("app")},
			status: corev1.PodStatus{
				Phase:                 corev1.PodPending,
				InitContainerStatuses: []corev1.ContainerStatus{status("proxy", waiting("ContainerCreating"), false)},
			},
			ready: "0/2", state: "Init:ContainerCreating", restarts: "0",
		},
		{
			name:     "a terminating pod shows Terminating",
			spec:     corev1.PodSpec{Containers: containers("app")},
			status:   corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{status("app", running(), true)}},
			deleting: true,
			ready:    "1/1", state: "Terminating", restarts: "0",
		},
		{
			name:     "a deleted pod that already succeeded keeps its final status",
			spec:     corev1.PodSpec{Containers: containers("app")},
			status:   corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{status("app", terminated("Completed", 0, 0), false)}},
			deleting: true,
			ready:    "0/1", state: "Completed", restarts: "0",
		},
		{
			name:     "a deleting pod on a lost node shows Unknown",
			spec:     corev1.PodSpec{Containers: containers("app")},
			status:   corev1.PodStatus{Phase: corev1.PodRunning, Reason: "NodeLost", ContainerStatuses: []corev1.ContainerStatus{status("app", running(), true)}},
			deleting: true,
			ready:    "1/1", state: "Unknown", restarts: "0",
		},
		{
			name:   "an evicted pod shows the status reason",
			spec:   corev1.PodSpec{Containers: containers("app")},
			status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"},
			ready:  "0/1", state: "Evicted", restarts: "0",
		},
		{
			name:   "a pod held by scheduling gates shows SchedulingGated",
			spec:   corev1.PodSpec{Containers: containers("app")},
			status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated}}},
			ready:  "0/1", state: "SchedulingGated", restarts: "0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: tt.spec, Status: tt.status}
			if tt.deleting {
				pod.DeletionTimestamp = new(ago(time.Second))
			}
			p := Pods()
			got := []interface{}{cell(t, p, pod, "Ready"), cell(t, p, pod, "Status"), cell(t, p, pod, "Restarts")}
			want := []interface{}{tt.ready, tt.state, tt.restarts}
			if !slices.Equal(got, want) {
				t.Errorf("READY STATUS RESTARTS: got %q, want %q", got, want)
			}
		})
	}
}

func TestPodWideCells(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want []interface{}
	}{
		{
			name: "an unscheduled pod shows <none> for IP, node, nominated node and readiness gates",
			pod:  &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", CreationTimestamp: ago(90 * time.Second)}, Spec: corev1.PodSpec{Containers: containers("app")}, Status: corev1.PodStatus{Phase: corev1.PodPending}},
			want: []interface{}{"p", "0/1", "Pending", "0", "90s", "<none>", "<none>", "<none>", "<none>"},
		},
		{
			name: "a scheduled pod shows its first IP, node, nominated node and gates passed",
			pod: &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "p", CreationTimestamp: ago(10 * time.Minute)},
				Spec: corev1.PodSpec{
					NodeName:       "n1",
					Containers:     containers("app"),
					ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "example.com/a"}, {ConditionType: "example.com/b"}},
				},
				Status: corev1.PodStatus{
					Phase:             corev1.PodRunning,
					PodIP:             "10.1.0.5",
					PodIPs:            []corev1.PodIP{{IP: "10.1.0.5"}, {IP: "fd00::5"}},
					NominatedNodeName: "n2",
					Conditions:        []corev1.PodCondition{condition("example.com/a", corev1.ConditionTrue), condition("example.com/b", corev1.ConditionFalse)},
					ContainerStatuses: []corev1.ContainerStatus{status("app", running(), true)},
				},
			},
			want: []interface{}{"p", "1/1", "Running", "0", "10m", "10.1.0.5", "n1", "n2", "1/2"},
		},
		{
			name: "a pod with only the legacy podIP field shows it",
			pod:  &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{PodIP: "10.1.0.6"}},
			want: []interface{}{"p", "0/0", "", "0", "<unknown>", "10.1.0.6", "<none>", "<none>", "<none>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Pods().Cells(tt.pod, now)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}
