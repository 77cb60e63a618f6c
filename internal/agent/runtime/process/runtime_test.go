package process

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeplane/nodeplane/internal/agent/podstatus"
	"github.com/nodeplane/nodeplane/internal/agent/runtime"
)

// shimArg makes the test binary act as the shim (see TestMain).
const shimArg = "nodeplane-test-shim"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == shimArg {
		os.Exit(ShimMain(os.Args[2:]))
	}
	// Under -race a Go binary sleeps 1 s at exit; the shims need not.
	os.Setenv("GORACE", "atexit_sleep_ms=0")
	os.Exit(m.Run())
}

// realWait bounds how long a test waits for a real process to do something.
const realWait = 10 * time.Second

type harness struct {
	t   *testing.T
	clk *clocktesting.FakeClock
	dir string

	mu       sync.Mutex
	notified map[types.UID]int
}

func newHarness(t *testing.T) *harness {
	return &harness{
		t:        t,
		clk:      clocktesting.NewFakeClock(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)),
		dir:      t.TempDir(),
		notified: map[types.UID]int{},
	}
}

// runtime creates a Runtime on the harness's state dir; the test's cleanup
// kills what it runs and closes it.
func (h *harness) runtime() *Runtime {
	h.t.Helper()
	rt, err := New(Config{
		StateDir:     h.dir,
		ShimCommand:  []string{os.Args[0], shimArg},
		NodeName:     "node-1",
		NodeIP:       "10.0.0.9",
		Clock:        h.clk,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		PollInterval: time.Second,
		WaitInterval: 100 * time.Millisecond,
		Notify: func(uid types.UID) {
			h.mu.Lock()
			h.notified[uid]++
			h.mu.Unlock()
		},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		for _, p := range rt.Pods() {
			h.kill(rt, p.UID, 0)
		}
		rt.Close()
	})
	return rt
}

func (h *harness) notifications(uid types.UID) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.notified[uid]
}

// eventually polls the runtime (no fake time passes) until cond holds.
func (h *harness) eventually(rt *Runtime, what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(realWait)
	for {
		rt.pollAll()
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond) // poll interval: real OS processes, bounded by the deadline
	}
}

// whileStepping runs f and steps the fake clock until f returns; it
// returns how much fake time passed.
func (h *harness) whileStepping(f func()) time.Duration {
	h.t.Helper()
	start := h.clk.Now()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	deadline := time.Now().Add(realWait)
	for {
		select {
		case <-done:
			return h.clk.Since(start)
		default:
		}
		if time.Now().After(deadline) {
			h.t.Fatal("timed out stepping the clock")
		}
		if h.clk.HasWaiters() {
			h.clk.Step(100 * time.Millisecond)
		}
		time.Sleep(2 * time.Millisecond) // poll interval: f waits on real OS processes, bounded by the deadline
	}
}

func (h *harness) kill(rt *Runtime, uid types.UID, grace time.Duration) time.Duration {
	h.t.Helper()
	var err error
	elapsed := h.whileStepping(func() { err = rt.KillPod(context.Background(), uid, grace) })
	if err != nil {
		h.t.Fatal(err)
	}
	return elapsed
}

func testPod(name string, policy corev1.RestartPolicy, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid")},
		Spec:       corev1.PodSpec{NodeName: "node-1", RestartPolicy: policy, Containers: containers},
	}
}

func shell(name, script string, env ...corev1.EnvVar) corev1.Container {
	return corev1.Container{Name: name, Image: "sh", Args: []string{"-c", script}, Env: env}
}

func env(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

func status(t *testing.T, rt *Runtime, uid types.UID) runtime.PodStatus {
	t.Helper()
	s, ok := rt.PodStatus(uid)
	if !ok {
		t.Fatalf("pod %s unknown", uid)
	}
	return s
}

func containerOf(s runtime.PodStatus, name string) runtime.ContainerStatus {
	for _, c := range append(append([]runtime.ContainerStatus{}, s.InitContainers...), s.Containers...) {
		if c.Name == name {
			return c
		}
	}
	return runtime.ContainerStatus{}
}

func terminated(s runtime.PodStatus, name string) bool {
	return containerOf(s, name).State.Terminated != nil
}

func logs(t *testing.T, rt *Runtime, uid types.UID, name string, opts runtime.LogOptions) string {
	t.Helper()
	var b bytes.Buffer
	if err := rt.Logs(context.Background(), uid, name, opts, &b); err != nil {
		t.Fatalf("logs: %v", err)
	}
	return b.String()
}

func all() runtime.LogOptions { return runtime.LogOptions{TailLines: -1} }

func waitForFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(realWait)
	for !exists(path) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", path)
		}
		time.Sleep(5 * time.Millisecond) // poll interval: a real process writes the file
	}
}

func TestContainerRunsAndItsExitIsReported(t *testing.T) {
	h := newHarness(t)
	rt := h.runtime()
	pod := testPod("exit3", corev1.RestartPolicyNever, shell("c", "echo hello; exit 3"))
	if err := rt.SyncPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	c := containerOf(status(t, rt, pod.UID), "c")
	if c.State.Running == nil && c.State.Terminated == nil {
		t.Fatalf("after SyncPod the container is %+v, want started", c.State)
	}
	if c.ContainerID != "process://exit3-uid/c/0" || !strings.HasPrefix(c.ImageID, "process:///") || !strings.HasSuffix(c.ImageID, "/sh") {
		t.Errorf("containerID %q imageID %q", c.ContainerID, c.ImageID)
	}

	h.eventually(rt, "the container exited", func() bool { return terminated(status(t, rt, pod.UID), "c") })
	s := status(t, rt, pod.UID)
	term := containerOf(s, "c").State.Terminated
	if term.ExitCode != 3 || term.Reason != "Error" || term.StartedAt.IsZero() || term.FinishedAt.Before(&term.StartedAt) {
		t.Errorf("terminated = %+v, want exit 3 / Error with start and finish times", term)
	}
	if got := podstatus.Compute(pod, s, true, metav1.NewTime(h.clk.Now())); got.Phase != corev1.PodFailed {
		t.Errorf("phase = %s, want Failed", got.Phase)
	}
	if got := logs(t, rt, pod.UID, "c", all()); got != "hello\n" {
		t.Errorf("logs = %q, want %q", got, "hello\n")
	}
	if h.notifications(pod.UID) < 2 {
		t.Errorf("notified %d times, want at least start and exit", h.notifications(pod.UID))
	}
	rt.pollAll()
	if c := containerOf(status(t, rt, pod.UID), "c"); c.RestartCount != 0 || c.State.Terminated == nil {
		t.Errorf("restartPolicy Never restarted the container: %+v", c)
	}
}

func TestCommandArgsEnvAndWorkingDir(t *testing.T) {
	h := newHarness(t)
	rt := h.runtime()
	work := t.TempDir()
	fieldEnv := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	c := corev1.Container{
		Name:       "c",
		Image:      "not-run-because-command-is-set",
		Command:    []string{"sh", "-c"},
		Args:       []string{`echo "$(GREETING) $POD $NODE $IP" '$$(LITERAL) $(UNDEFINED)'; pwd; echo "${SECRET_OF_AGENT:-clean}"`},
		WorkingDir: work,
		Env: []corev1.EnvVar{
			env("NAME", "world"),
			env("GREETING", "hello-$(NAME)"),
			fieldEnv("POD", "metadata.name"),
			fieldEnv("NODE", "spec.nodeName"),
			fieldEnv("IP", "status.podIP"),
		},
	}
	t.Setenv("SECRET_OF_AGENT", "leaked")
	pod := testPod("env", corev1.RestartPolicyNever, c)
	if err := rt.SyncPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	h.eventually(rt, "the container exited", func() bool { return terminated(status(t, rt, pod.UID), "c") })
	want := "hello-world env node-1 10.0.0.9 $(LITERAL) $(UNDEFINED)\n" + work + "\nclean\n"
	if got := logs(t, rt, pod.UID, "c", all()); got != want {
		t.Errorf("output = %q, want %q", got, want)
	}
}

func TestMissingExecutable(t *testing.T) {
	const msg = `exec: "nosuch-nodeplane-binary": executable file not found in $PATH`
	h := newHarness(t)
	rt := h.runtime()

	never := testPod("missing-never", corev1.RestartPolicyNever, corev1.Container{Name: "c", Image: "nosuch-nodeplane-binary"})
	if err := rt.SyncPod(context.Background(), never); err != nil {
		t.Fatal(err)
	}
	term := containerOf(status(t, rt, never.UID), "c").State.Terminated
	if term == nil || term.Reason != "StartError" || term.ExitCode != 128 || term.Message != msg {
		t.Errorf("restartPolicy Never: state %+v, want Terminated StartError 128 %q", term, msg)
	}

	alwaysPod := testPod("missing-always", corev1.RestartPolicyAlways, corev1.Container{Name: "c", Image: "nosuch-nodeplane-binary"})
	if err := rt.SyncPod(context.Background(), alwaysPod); err != nil {
		t.Fatal(err)
	}
	c := containerOf(status(t, rt, alwaysPod.UID), "c")
	if c.State.Waiting == nil || c.State.Waiting.Reason != "CrashLoopBackOff" || c.RestartCount != 1 ||
		c.LastTerminationState.Terminated == nil || c.LastTerminationState.Terminated.Reason != "StartError" {
		t.Errorf("restartPolicy Always: %+v, want CrashLoopBackOff after one immediate retry, last state StartError", c)
	}
	if err := rt.Logs(context.Background(), alwaysPod.UID, "c", all(), io.Discard); err != nil {
		t.Errorf("logs of a container that never ran: %v, want empty output", err)
	}
}

func TestRestartBackOff(t *testing.T) {
	h := newHarness(t)
	rt := h.runtime()
	pod := testPod("crash", corev1.RestartPolicyAlways, shell("c", "echo run; exit 1"))
	if err := rt.SyncPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	crashLooping := func(restarts int32) func() bool {
		return func() bool {
			c := containerOf(status(t, rt, pod.UID), "c")
			return c.RestartCount == restarts && c.State.Waiting != nil && c.State.Waiting.Reason == "CrashLoopBackOff"
		}
	}
	// The first restart is immediate; the second exit starts a 10 s back-off.
	h.eventually(rt, "the first restart crashed too", crashLooping(1))
	c := containerOf(status(t, rt, pod.UID), "c")
	wantMsg := "back-off 10s restarting failed container=c pod=crash_ns(crash-uid)"
	if c.State.Waiting.Message != wantMsg {
		t.Errorf("message = %q, want %q", c.State.Waiting.Message, wantMsg)
	}
	if last := c.LastTerminationState.Terminated; last == nil || last.ExitCode != 1 || last.ContainerID != "process://crash-uid/c/1" {
		t.Errorf("last state = %+v, want exit 1 of instance 1", c.LastTerminationState)
	}

	h.clk.Step(9 * time.Second)
	rt.pollAll()
	if c := containerOf(status(t, rt, pod.UID), "c"); c.RestartCount != 1 {
		t.Fatalf("restarted after 9s of a 10s back-off (restartCount %d)", c.RestartCount)
	}
	h.clk.Step(time.Second)
	rt.pollAll()
	if c := containerOf(status(t, rt, pod.UID), "c"); c.RestartCount != 2 {
		t.Fatalf("restartCount = %d after the back-off, want 2", c.RestartCount)
	}
	h.eventually(rt, "the second restart crashed", crashLooping(2))
	if c := containerOf(status(t, rt, pod.UID), "c"); !strings.HasPrefix(c.State.Waiting.Message, "back-off 20s ") {
		t.Errorf("message = %q, want the back-off doubled to 20s", c.State.Waiting.Message)
	}
	if got := logs(t, rt, pod.UID, "c", runtime.LogOptions{TailLines: -1, Previous: true}); got != "run\n" {
		t.Errorf("previous logs = %q, want %q", got, "run\n")
	}
	// Only the current and the previous instance keep their files.
	if exists(instanceFile(filepath.Join(rt.podDir(pod.UID), "c"), 0, ".log")) {
		t.Error("the log of instance 0 was kept after instance 2 started")
	}
}

func TestRestartPolicies(t *testing.T) {
	tests := []struct {
		name        string
		policy      corev1.RestartPolicy
		script      string
		wantRestart bool
	}{
		{name: "OnFailure does not restart a container that succeeded", policy: corev1.RestartPolicyOnFailure, script: "exit 0"},
		{name: "OnFailure restarts a container that failed", policy: corev1.RestartPolicyOnFailure, script: "exit 2", wantRestart: true},
		{name: "Never does not restart a container that failed", policy: corev1.RestartPolicyNever, script: "exit 2"},
		{name: "Always restarts a container that succeeded", policy: corev1.RestartPolicyAlways, script: "exit 0", wantRestart: true},
	}
	h := newHarness(t)
	rt := h.runtime()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod("policy-"+string(rune('a'+i)), tt.policy, shell("c", tt.script))
			if err := rt.SyncPod(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			h.eventually(rt, "the container settled", func() bool {
				c := containerOf(status(t, rt, pod.UID), "c")
				return c.State.Terminated != nil || (c.State.Waiting != nil && c.RestartCount > 0)
			})
			c := containerOf(status(t, rt, pod.UID), "c")
			if restarted := c.RestartCount > 0; restarted != tt.wantRestart {
				t.Errorf("restarted = %v (%+v), want %v", restarted, c, tt.wantRestart)
			}
		})
	}
}

func TestInitContainersRunFirst(t *testing.T) {
	h := newHarness(t)
	rt := h.runtime()
	marker := filepath.Join(t.TempDir(), "init-done")
	release := filepath.Join(t.TempDir(), "release")
	pod := testPod("init", corev1.RestartPolicyAlways,
		shell("main", `test -e "$MARKER" && echo saw-init; exec sleep 30`, env("MARKER", marker)))
	pod.Spec.InitContainers = []corev1.Container{
		shell("first", `while [ ! -e "$RELEASE" ]; do sleep 0.02; done`, env("RELEASE", release)),
		shell("second", `touch "$MARKER"`, env("MARKER", marker)),
	}
	if err := rt.SyncPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	s := status(t, rt, pod.UID)
	if containerOf(s, "first").State.Running == nil || containerOf(s, "second").State.Waiting == nil || containerOf(s, "main").State.Waiting == nil {
		t.Fatalf("while the first init container runs: %+v", s)
	}
	if got := podstatus.Compute(pod, s, true, metav1.NewTime(h.clk.Now())); got.Phase != corev1.PodPending {
		t.Errorf("phase while initializing = %s, want Pending", got.Phase)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	h.eventually(rt, "the main container runs", func() bool { return containerOf(status(t, rt, pod.UID), "main").State.Running != nil })
	s = status(t, rt, pod.UID)
	for _, name := range []string{"first", "second"} {
		if term := containerOf(s, name).State.Terminated; term == nil || term.ExitCode != 0 || term.Reason != "Completed" {
			t.Errorf("init container %s = %+v, want Completed", name, containerOf(s, name).State)
		}
	}
	h.eventually(rt, "main printed", func() bool { return logs(t, rt, pod.UID, "main", all()) == "saw-init\n" })
	if got := podstatus.Compute(pod, s, true, metav1.NewTime(h.clk.Now())); got.Phase != corev1.PodRunning {
		t.Errorf("phase = %s, want Running", got.Phase)
	}
}

func TestFailedInitContainer(t *testing.T) {
	h := newHarness(t)
	rt := h.runtime()

	never := testPod("init-never", corev1.RestartPolicyNever, shell("main", "exit 0"))
	never.Spec.InitContainers = []corev1.Container{shell("init", "exit 5")}
	onFailure := testPod("init-onfailure", corev1.RestartPolicyOnFailure, shell("main", "exit 0"))
	onFailure.Spec.InitContainers = []corev1.Container{shell("init", "exit 5")}
	for _, p := range []*corev1.Pod{never, onFailure} {
		if err := rt.SyncPod(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}

	h.eventually(rt, "the init container failed", func() bool { return terminated(status(t, rt, never.UID), "init") })
	s := status(t, rt, never.UID)
	if main := containerOf(s, "main"); main.State.Waiting == nil || main.ContainerID != "" {
		t.Errorf("main container of a pod whose init failed = %+v, want never started", main)
	}
	if got := podstatus.Compute(never, s, true, metav1.NewTime(h.clk.Now())); got.Phase != corev1.PodFailed {
		t.Errorf("restartPolicy Never: phase = %s, want Failed", got.Phase)
	}

	h.eventually(rt, "the init container is retried with back-off", func() bool {
		c := containerOf(status(t, rt, onFailure.UID), "init")
		return c.State.Waiting != nil && c.State.Waiting.Reason == "CrashLoopBackOff"
	})
	s = status(t, rt, onFailure.UID)
	if got := podstatus.Compute(onFailure, s, true, metav1.NewTime(h.clk.Now())); got.Phase != corev1.PodPending {
		t.Errorf("restartPolicy OnFailure: phase = %s, want Pending", got.Phase)
	}
}

func TestKillPodSendsSIGTERMToTheProcessGroup(t *testing.T) {
	h := newHarness(t)
	rt := h.runtime()
	dir := t.TempDir()
	ready, got := filepath.Join(dir, "ready"), filepath.Join(dir, "got")
	// The trap runs in the shell; the background sleep is in the same group.
	pod := testPod("term", corev1.RestartPolicyAlways, shell("c",
		`trap 'echo got TERM > "$GOT"; exit 0' TERM; sleep 30 & touch "$READY"; wait`,
		env("READY", ready), env("GOT", got)))
	if err := rt.SyncPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	waitForFile(t, ready)

	// A grace period the stepping clock cannot reach while the shell exits.
	elapsed := h.kill(rt, pod.UID, time.Hour)
	if elapsed >= time.Hour {
		t.Errorf("KillPod took %v of the grace period for a container that exits on SIGTERM", elapsed)
	}
	b, err := os.ReadFile(got)
	if err != nil || string(b) != "got TERM\n" {
		t.Fatalf("the container did not record SIGTERM: %q, %v", b, err)
	}
	s := status(t, rt, pod.UID)
	term := containerOf(s, "c").State.Terminated
	if !s.Killed || term == nil || term.ExitCode != 0 || term.Reason != "Completed" {
		t.Fatalf("after KillPod: killed=%v state=%+v, want Terminated exit 0", s.Killed, containerOf(s, "c").State)
	}
	h.clk.Step(time.Minute)
	rt.pollAll()
	if c := containerOf(status(t, rt, pod.UID), "c"); c.RestartCount != 0 || c.State.Terminated == nil {
		t.Errorf("a killed pod was restarted: %+v", c)
	}
	if err := rt.RemovePod(pod.UID); err != nil {
		t.Fatal(err)
	}
	if _, ok := rt.PodStatus(pod.UID); ok || exists(rt.podDir(pod.UID)) {
		t.Error("RemovePod left the pod behind")
	}
}

func TestKillPodSIGKILLsAfterGrace(t *testing.T) {
	h := newHarness(t)
	rt := h.runtime()
	ready := filepath.Join(t.TempDir(), "ready")
	pod := testPod("stubborn", corev1.RestartPolicyAlways,
		shell("c", `trap '' TERM; touch "$READY"; while true; do sleep 1; done`, env("READY", ready)))
	if err := rt.SyncPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	waitForFile(t, ready)
	pid := containerOf(status(t, rt, pod.UID), "c").PID

	elapsed := h.kill(rt, pod.UID, 2*time.Second)
	if elapsed < 2*time.Second {
		t.Errorf("KillPod returned after %v, before the 2s grace period", elapsed)
	}
	term := containerOf(status(t, rt, pod.UID), "c").State.Terminated
	if term == nil || term.ExitCode != 137 || term.Signal != 9 || term.Reason != "Error" {
		t.Errorf("state = %+v, want Terminated 137 by signal 9", term)
	}
	if _, state, err := procIdentity(pid); err == nil && state != 'Z' {
		t.Errorf("process %d still exists after KillPod", pid)
	}
}

func TestLogs(t *testing.T) {
	h := newHarness(t)
	rt := h.runtime()
	pod := testPod("logs", corev1.RestartPolicyNever, shell("c", `for i in 1 2 3 4 5; do echo "line $i"; done; printf 'no newline'`))
	if err := rt.SyncPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	h.eventually(rt, "the container exited", func() bool { return terminated(status(t, rt, pod.UID), "c") })
	finished := containerOf(status(t, rt, pod.UID), "c").State.Terminated.FinishedAt

	stamped := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z line 1$`)
	tests := []struct {
		name  string
		opts  runtime.LogOptions
		want  string
		check func(string) bool
	}{
		{name: "all lines without the CRI prefix", opts: all(), want: "line 1\nline 2\nline 3\nline 4\nline 5\nno newline\n"},
		{name: "the last two lines", opts: runtime.LogOptions{TailLines: 2}, want: "line 5\nno newline\n"},
		{name: "no lines", opts: runtime.LogOptions{TailLines: 0}, want: ""},
		{name: "a byte limit cuts the output", opts: runtime.LogOptions{TailLines: -1, LimitBytes: 8}, want: "line 1\nl"},
		{name: "since after the end shows nothing", opts: runtime.LogOptions{TailLines: -1, Since: finished.Add(time.Second)}, want: ""},
		{name: "an unterminated last line counts as a line", opts: runtime.LogOptions{TailLines: 1}, want: "no newline\n"},
		{name: "timestamps use the kubelet's format", opts: runtime.LogOptions{TailLines: -1, Timestamps: true},
			check: func(s string) bool { return stamped.MatchString(strings.SplitN(s, "\n", 2)[0]) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := logs(t, rt, pod.UID, "c", tt.opts)
			if tt.check != nil {
				if !tt.check(got) {
					t.Errorf("logs = %q", got)
				}
				return
			}
			if got != tt.want {
				t.Errorf("logs = %q, want %q", got, tt.want)
			}
		})
	}

	previous := runtime.LogOptions{TailLines: -1, Previous: true}
	if err := rt.Logs(context.Background(), pod.UID, "c", previous, io.Discard); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("previous of a container that never restarted: err = %v, want ErrNotFound", err)
	}
	if err := rt.Logs(context.Background(), pod.UID, "nope", all(), io.Discard); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("unknown container: err = %v, want ErrNotFound", err)
	}
	if err := rt.Logs(context.Background(), "nope", "c", all(), io.Discard); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("unknown pod: err = %v, want ErrNotFound", err)
	}
}

// syncBuffer is a bytes.Buffer safe to read while Logs writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestLogsFollow(t *testing.T) {
	h := newHarness(t)
	rt := h.runtime()
	goFile := filepath.Join(t.TempDir(), "go")
	pod := testPod("follow", corev1.RestartPolicyNever, shell("c",
		`echo first; while [ ! -e "$GO" ]; do sleep 0.02; done; echo second`, env("GO", goFile)))
	if err := rt.SyncPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	var err error
	h.whileStepping(func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			err = rt.Logs(context.Background(), pod.UID, "c", runtime.LogOptions{TailLines: -1, Follow: true}, &out)
		}()
		deadline := time.Now().Add(realWait)
		for out.String() != "first\n" && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond) // poll interval: a real process writes the log
		}
		if werr := os.WriteFile(goFile, nil, 0o600); werr != nil {
			t.Error(werr)
		}
		<-done
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "first\nsecond\n" {
		t.Errorf("followed logs = %q, want %q", got, "first\nsecond\n")
	}
}

func TestLogsFollowEndsWithContext(t *testing.T) {
	h := newHarness(t)
	rt := h.runtime()
	pod := testPod("follow-ctx", corev1.RestartPolicyNever, shell("c", `echo up; exec sleep 30`))
	if err := rt.SyncPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	var err error
	h.whileStepping(func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			err = rt.Logs(ctx, pod.UID, "c", runtime.LogOptions{TailLines: -1, Follow: true}, &out)
		}()
		deadline := time.Now().Add(realWait)
		for out.String() != "up\n" && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond) // poll interval: a real process writes the log
		}
		cancel()
		<-done
	})
	if err != nil || out.String() != "up\n" {
		t.Errorf("logs = %q, %v; want %q and no error", out.String(), err, "up\n")
	}
}

func TestAdoptionAfterAgentRestart(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	ready, stop := filepath.Join(dir, "ready"), filepath.Join(dir, "stop")

	a := h.runtime()
	running := testPod("survivor", corev1.RestartPolicyNever, shell("c",
		`touch "$READY"; while [ ! -e "$STOP" ]; do sleep 0.02; done; exit 7`, env("READY", ready), env("STOP", stop)))
	finished := testPod("finished-meanwhile", corev1.RestartPolicyNever, shell("c", "exit 4"))
	killed := testPod("killed", corev1.RestartPolicyAlways, shell("c", "exit 0"))
	for _, p := range []*corev1.Pod{running, finished, killed} {
		if err := a.SyncPod(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	waitForFile(t, ready)
	pid := containerOf(status(t, a, running.UID), "c").PID
	h.kill(a, killed.UID, time.Second)
	// The agent "crashes": polling stops, processes keep running.
	a.Close()
	waitForFile(t, instanceFile(filepath.Join(a.podDir(finished.UID), "c"), 0, ".exit"))

	b := h.runtime()
	if n := len(b.Pods()); n != 3 {
		t.Fatalf("adopted %d pods, want 3", n)
	}
	c := containerOf(status(t, b, running.UID), "c")
	if c.State.Running == nil || c.PID != pid || c.RestartCount != 0 {
		t.Fatalf("adopted container = %+v (pid %d), want Running with pid %d", c.State, c.PID, pid)
	}
	if exists(instanceFile(filepath.Join(b.podDir(running.UID), "c"), 1, ".spec.json")) {
		t.Fatal("the adopted container was started a second time")
	}
	if term := containerOf(status(t, b, finished.UID), "c").State.Terminated; term == nil || term.ExitCode != 4 {
		t.Errorf("container that exited while no runtime watched = %+v, want Terminated exit 4", term)
	}
	if s := status(t, b, killed.UID); !s.Killed {
		t.Error("the killed marker was not adopted")
	}

	if err := os.WriteFile(stop, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	h.eventually(b, "the adopted container's exit is observed", func() bool { return terminated(status(t, b, running.UID), "c") })
	if term := containerOf(status(t, b, running.UID), "c").State.Terminated; term.ExitCode != 7 {
		t.Errorf("exit code = %d, want 7 (from the shim)", term.ExitCode)
	}
	b.pollAll()
	if c := containerOf(status(t, b, killed.UID), "c"); c.RestartCount != 0 {
		t.Errorf("the adopted killed pod was restarted (restartCount %d)", c.RestartCount)
	}
}

func TestSyncPodIsIdempotent(t *testing.T) {
	h := newHarness(t)
	rt := h.runtime()
	pod := testPod("idem", corev1.RestartPolicyAlways, corev1.Container{Name: "c", Image: "sleep", Args: []string{"30"}})
	for range 3 {
		if err := rt.SyncPod(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}
	c := containerOf(status(t, rt, pod.UID), "c")
	if c.State.Running == nil || c.RestartCount != 0 || c.PID == 0 {
		t.Fatalf("container = %+v", c)
	}
	if exists(instanceFile(filepath.Join(rt.podDir(pod.UID), "c"), 1, ".spec.json")) {
		t.Error("a second SyncPod started another instance")
	}
	if err := rt.RemovePod(pod.UID); err == nil {
		t.Error("RemovePod of a running pod succeeded")
	}
}

func TestUnsupportedEnvSourceWaits(t *testing.T) {
	h := newHarness(t)
	rt := h.runtime()
	c := corev1.Container{Name: "c", Image: "true", Env: []corev1.EnvVar{{
		Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password",
		}},
	}}}
	pod := testPod("secret", corev1.RestartPolicyAlways, c)
	if err := rt.SyncPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	got := containerOf(status(t, rt, pod.UID), "c")
	if got.State.Waiting == nil || got.State.Waiting.Reason != "CreateContainerConfigError" || got.RestartCount != 0 {
		t.Errorf("container = %+v, want Waiting/CreateContainerConfigError", got)
	}
}

func TestSidecarRunsAlongsideAndStopsWhenTheMainContainerIsDone(t *testing.T) {
	h := newHarness(t)
	rt := h.runtime()
	pod := testPod("sidecar", corev1.RestartPolicyNever, shell("main", "exit 0"))
	sidecar := shell("proxy", "exec sleep 30")
	always := corev1.ContainerRestartPolicyAlways
	sidecar.RestartPolicy = &always
	pod.Spec.InitContainers = []corev1.Container{sidecar}
	if err := rt.SyncPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	s := status(t, rt, pod.UID)
	if containerOf(s, "proxy").State.Running == nil || containerOf(s, "main").ContainerID == "" {
		t.Fatalf("sidecar %+v / main %+v: want the sidecar running and main started", containerOf(s, "proxy").State, containerOf(s, "main").State)
	}
	h.eventually(rt, "the sidecar was stopped after main finished", func() bool { return terminated(status(t, rt, pod.UID), "proxy") })
	s = status(t, rt, pod.UID)
	if term := containerOf(s, "proxy").State.Terminated; term.ExitCode != 143 || containerOf(s, "proxy").RestartCount != 0 {
		t.Errorf("sidecar = %+v, want stopped by SIGTERM (143) and not restarted", containerOf(s, "proxy"))
	}
	if got := podstatus.Compute(pod, s, true, metav1.NewTime(h.clk.Now())); got.Phase != corev1.PodSucceeded {
		t.Errorf("phase = %s, want Succeeded", got.Phase)
	}
}
