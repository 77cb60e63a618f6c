package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// termRecorderSource is a pod's process for the shutdown tests: it records
// the wall-clock time (unix ns) of every SIGTERM in the file named by its
// argument (if any) and keeps running, so only the agent's SIGKILL at the
// end of the pod's grace ends it. The containerised agent's image holds nothing
// but static binaries, so it is built static (CGO off) by the test.
const termRecorderSource = `package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	var f *os.File
	if len(os.Args) > 1 {
		var err error
		if f, err = os.OpenFile(os.Args[1], os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			os.Exit(2)
		}
	}
	for range ch {
		if f != nil {
			fmt.Fprintf(f, "%d\n", time.Now().UnixNano())
			f.Sync()
		}
	}
}
`

// termRecorder builds the SIGTERM recorder once per test run.
func termRecorder() (string, error) { return testProgram("termrecorder", termRecorderSource) }

// firstTerm reads the first SIGTERM time a recorder wrote to path.
func firstTerm(path string) (time.Time, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, false
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	ns, err := strconv.ParseInt(line, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}

type shutdownPod struct {
	name     string
	priority int32
}

// createRecorderPods binds one recorder pod per entry to node, each with a
// terminationGracePeriodSeconds of 120 (longer than any group's budget),
// and waits for them to run and to have taken over SIGTERM: the recorder
// creates its mark file only after signal.Notify, so a pod that is Running
// but whose mark file is missing would still die at once of a SIGTERM.
// marks is the directory as the pods see it, hostMarks the same directory
// as the test sees it.
func createRecorderPods(t *testing.T, cs kubernetes.Interface, node, image, marks, hostMarks string, pods []shutdownPod) {
	t.Helper()
	for _, p := range pods {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name}, Spec: corev1.PodSpec{
			NodeName:                      node,
			Priority:                      &p.priority,
			TerminationGracePeriodSeconds: ptrInt64(120),
			Containers:                    []corev1.Container{{Name: "c", Image: image, Args: []string{filepath.Join(marks, p.name)}}},
		}}
		if _, err := cs.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s: %v", p.name, err)
		}
	}
	for _, p := range pods {
		waitPodPhase(t, cs, p.name, corev1.PodRunning)
		eventually(t, 30*time.Second, p.name+" handling SIGTERM", func() error {
			_, err := os.Stat(filepath.Join(hostMarks, p.name))
			return err
		})
	}
}

// watchNotReady records when the test first sees the node Ready=False
// with the shutdown message (and the condition itself).
func watchNotReady(t *testing.T, cs kubernetes.Interface, node string) (seen func() (time.Time, corev1.NodeCondition)) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", node).String()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var at time.Time
	var cond corev1.NodeCondition
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			c := condition(n, corev1.NodeReady)
			if c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "node is shutting down") {
				mu.Lock()
				if at.IsZero() {
					at, cond = time.Now(), c
				}
				mu.Unlock()
			}
		}
	}()
	return func() (time.Time, corev1.NodeCondition) { mu.Lock(); defer mu.Unlock(); return at, cond }
}

func checkShutdownStatus(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	p, err := cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pod %s: %v", name, err)
	}
	if p.Status.Phase != corev1.PodFailed || p.Status.Reason != "Terminated" ||
		p.Status.Message != "Pod was terminated in response to imminent node shutdown." {
		t.Errorf("pod %s final status %s/%s/%q, want Failed/Terminated with the shutdown message", name, p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
	found := false
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			found = c.Status == corev1.ConditionTrue && c.Reason == "TerminationByKubelet"
		}
	}
	if !found {
		t.Errorf("pod %s has no DisruptionTarget=True/TerminationByKubelet: %+v", name, p.Status.Conditions)
	}
}

// TestGracefulShutdownInContainer runs a real agent as the init (PID 1) of
// a Docker container with three pods in three priority groups of 3 s each,
// every pod's process ignoring SIGTERM and asking for 120 s of grace. `docker
// stop -t 60` is a node shutdown for it: the Node turns Ready=False "node is
// shutting down" before the first SIGTERM, the groups are signalled lowest
// priority first, each ended by SIGKILL at its 3 s budget, and every pod's
// final status (Failed/Terminated, DisruptionTarget) is in the API once the
// container is gone. A pod bound during the shutdown is rejected with
// reason NodeShutdown, and a Deployment's pods from the container are
// Running on a host agent's node well within the 40 s node grace.
func TestGracefulShutdownInContainer(t *testing.T) {
	needDocker(t)
	recorder, err := termRecorder()
	if err != nil {
		t.Fatal(err)
	}
	// The recorder also sits at its host path, so one Deployment's pods run
	// on the containerised node and on a host agent alike.
	image := agentImage(t, "shutdown", map[string]string{"/termrecorder": recorder, recorder: recorder})

	const hostName = "host.docker.internal"
	s := startServer(t, serverOptions{args: []string{"--tls-san", hostName}})
	s.stop()
	s.args = append(s.args, "--listen", fmt.Sprintf("0.0.0.0:%d", s.port))
	s.start()
	token, err := os.ReadFile(filepath.Join(s.dataDir, "node-token"))
	if err != nil {
		t.Fatal(err)
	}
	marks := t.TempDir()
	if err := os.Chmod(marks, 0o777); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("np-e2e-sd-%d", time.Now().UnixNano()%1e9)
	const node = "sd-docker"
	docker(t, "run", "-d", "--name", name, "--add-host", hostName+":host-gateway", "-v", marks+":/marks", image,
		"agent", "--server", fmt.Sprintf("https://%s:%d", hostName, s.port), "--token", strings.TrimSpace(string(token)),
		"--node-name", node, "--data-dir", "/agent", "--node-labels", "pool=sd",
		"--shutdown-grace-period-by-pod-priority=-100=3,100=3,2000000000=3")
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("docker", "logs", name).CombinedOutput()
			t.Logf("agent container logs:\n%s", out)
		}
		_ = exec.Command("docker", "rm", "-f", name).Run()
	})

	ctx := context.Background()
	cs := s.client()
	eventually(t, 60*time.Second, "containerised node Ready", func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := condition(n, corev1.NodeReady); c.Status != corev1.ConditionTrue {
			return fmt.Errorf("Ready = %+v", c)
		}
		return nil
	})
	// A Deployment whose pods all run on the containerised node (the only
	// pool=sd node when it is created); a host agent in the pool joins after.
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: func() *int32 { n := int32(2); return &n }(),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"pool": "sd"},
			TerminationGracePeriodSeconds: ptrInt64(120),
			Containers:                    []corev1.Container{{Name: "c", Image: recorder}},
		}},
	}}
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	webRunningOn := func(want string) error {
		list, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return err
		}
		n := 0
		for _, p := range list.Items {
			if p.Spec.NodeName == want && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				n++
			}
		}
		if n != 2 {
			return fmt.Errorf("%d web pods Running on %s, want 2", n, want)
		}
		return nil
	}
	eventually(t, 60*time.Second, "web running on the containerised node", func() error { return webRunningOn(node) })
	other := startAgent(t, s, agentOptions{name: "sd-other", args: []string{"--node-labels", "pool=sd"}})
	eventually(t, 30*time.Second, "the host node Ready", func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, other.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := condition(n, corev1.NodeReady); c.Status != corev1.ConditionTrue {
			return fmt.Errorf("Ready = %+v", c)
		}
		return nil
	})

	pods := []shutdownPod{{"crit", 2000001000}, {"mid", 500}, {"low", 0}}
	createRecorderPods(t, cs, node, "/termrecorder", "/marks", marks, pods)
	notReady := watchNotReady(t, cs, node)

	stopped := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		_ = exec.Command("docker", "stop", "-t", "60", name).Run()
		stopped <- time.Since(start)
	}()

	// A pod bound while the node shuts down is refused.
	eventually(t, 20*time.Second, "node NotReady for the shutdown", func() error {
		if at, _ := notReady(); at.IsZero() {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	late := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "late"}, Spec: corev1.PodSpec{
		NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "/termrecorder", Args: []string{"/marks/late"}}}}}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, late, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the late pod rejected with NodeShutdown", func() error {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "late", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodFailed || p.Status.Reason != "NodeShutdown" || p.Status.Message != "Pod was rejected as the node is shutting down." {
			return fmt.Errorf("late pod %s/%s/%q", p.Status.Phase, p.Status.Reason, p.Status.Message)
		}
		return nil
	})

	var took time.Duration
	select {
	case took = <-stopped:
	case <-time.After(90 * time.Second):
		t.Fatal("docker stop did not return")
	}
	if took >= 60*time.Second {
		t.Errorf("docker stop took %v: the agent did not exit by itself before docker's SIGKILL", took)
	}
	t.Logf("docker stop took %v", took)

	seenAt, cond := notReady()
	terms := map[string]time.Time{}
	for _, p := range pods {
		at, ok := firstTerm(filepath.Join(marks, p.name))
		if !ok {
			t.Fatalf("pod %s never got SIGTERM", p.name)
		}
		terms[p.name] = at
	}
	order := []string{"low", "mid", "crit"}
	sort.SliceStable(order, func(i, j int) bool { return terms[order[i]].Before(terms[order[j]]) })
	t.Logf("Ready=False seen by the test at %s (lastTransitionTime %s); SIGTERMs: low %s, mid %s, crit %s",
		seenAt.Format(time.StampMilli), cond.LastTransitionTime.Format(time.Stamp),
		terms["low"].Format(time.StampMilli), terms["mid"].Format(time.StampMilli), terms["crit"].Format(time.StampMilli))
	if strings.Join(order, ",") != "low,mid,crit" {
		t.Errorf("SIGTERM order %v, want lowest priority first: low,mid,crit", order)
	}
	// Ready=False was written before the first SIGTERM: its transition time
	// (whole seconds) is not after it. An agent that left it to the next
	// periodic status pass (10 s) would fail here.
	if cond.LastTransitionTime.Unix() > terms["low"].Unix() {
		t.Errorf("Ready=False since %s, after the first SIGTERM at %s", cond.LastTransitionTime, terms["low"])
	}
	if cond.Reason != "KubeletNotReady" {
		t.Errorf("Ready reason %q, want KubeletNotReady", cond.Reason)
	}
	// Each group waited out its 3 s budget (the pods ignore SIGTERM) and
	// no longer: the next group started within its budget plus slack.
	for _, gap := range []struct{ from, to string }{{"low", "mid"}, {"mid", "crit"}} {
		d := terms[gap.to].Sub(terms[gap.from])
		if d < 2900*time.Millisecond || d > 5*time.Second {
			t.Errorf("%s → %s SIGTERMs %v apart, want the 3 s group budget", gap.from, gap.to, d)
		}
	}
	// The final statuses are in the API now that the container is gone.
	for _, p := range pods {
		checkShutdownStatus(t, cs, p.name)
	}
	// The Deployment's replacements run on the host node well before the
	// 40 s node grace would have let the lifecycle controller act.
	eventually(t, 30*time.Second-time.Since(start), "web replaced on the host node", func() error { return webRunningOn(other.name) })
	t.Logf("web replaced on %s %v after docker stop began", other.name, time.Since(start).Round(100*time.Millisecond))
}

// TestGracefulShutdownByHandCancelled drives a real agent on this host with
// `nodeplane agent shutdown` over its control socket, and cancels the
// shutdown while the first (lowest priority) group is being stopped: the
// node returns to Ready and admits pods again, the pod already signalled
// stays dead with the shutdown's final status, and the higher-priority pod
// is never signalled.
func TestGracefulShutdownByHandCancelled(t *testing.T) {
	recorder, err := termRecorder()
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, serverOptions{})
	cs := s.client()
	ctx := context.Background()
	a := startAgent(t, s, agentOptions{name: "sd-hand", config: agentTestConfig,
		args: []string{"--shutdown-grace-period-by-pod-priority=0=6,1000=6"}})
	eventually(t, 30*time.Second, "node Ready", func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, "sd-hand", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := condition(n, corev1.NodeReady); c.Status != corev1.ConditionTrue {
			return fmt.Errorf("Ready = %+v", c)
		}
		return nil
	})
	marks := t.TempDir()
	createRecorderPods(t, cs, "sd-hand", recorder, marks, marks, []shutdownPod{{"high", 1000}, {"low", 0}})

	shut := exec.Command(binary, "agent", "shutdown", "--data-dir", a.dataDir)
	var shutOut strings.Builder
	shut.Stdout, shut.Stderr = &shutOut, &shutOut
	if err := shut.Start(); err != nil {
		t.Fatal(err)
	}
	shutDone := make(chan error, 1)
	go func() { shutDone <- shut.Wait() }()
	t.Cleanup(func() { _ = shut.Process.Kill() })

	eventually(t, 10*time.Second, "the low pod signalled", func() error {
		if _, ok := firstTerm(filepath.Join(marks, "low")); !ok {
			return fmt.Errorf("no SIGTERM yet")
		}
		return nil
	})
	n, err := cs.CoreV1().Nodes().Get(ctx, "sd-hand", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := condition(n, corev1.NodeReady); c.Status != corev1.ConditionFalse || !strings.Contains(c.Message, "node is shutting down") {
		t.Fatalf("Ready = %+v while the first group is stopped, want False \"node is shutting down\"", c)
	}
	out, err := exec.Command(binary, "agent", "shutdown", "--cancel", "--data-dir", a.dataDir).CombinedOutput()
	if err != nil {
		t.Fatalf("agent shutdown --cancel: %v\n%s", err, out)
	}
	select {
	case err := <-shutDone:
		if err == nil || !strings.Contains(shutOut.String(), "cancelled") {
			t.Errorf("the waiting `agent shutdown` ended with %v: %s; want it to report the cancellation", err, shutOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Error("the waiting `agent shutdown` did not return after the cancellation")
	}
	eventually(t, 20*time.Second, "node Ready again", func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, "sd-hand", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := condition(n, corev1.NodeReady); c.Status != corev1.ConditionTrue {
			return fmt.Errorf("Ready = %+v", c)
		}
		return nil
	})
	// The signalled pod stays dead (SIGKILL at its 6 s grace) with the
	// shutdown's final status; the high-priority one was never signalled.
	eventually(t, 20*time.Second, "the low pod ended", func() error {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "low", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("low is %s", p.Status.Phase)
		}
		return nil
	})
	checkShutdownStatus(t, cs, "low")
	if at, ok := firstTerm(filepath.Join(marks, "high")); ok {
		t.Errorf("the high-priority pod got SIGTERM at %s after the cancellation", at)
	}
	if p, err := cs.CoreV1().Pods("default").Get(ctx, "high", metav1.GetOptions{}); err != nil || p.Status.Phase != corev1.PodRunning {
		t.Errorf("high pod: %v, phase %v; want it still Running", err, p.Status.Phase)
	}
	// The node admits pods again.
	createRecorderPods(t, cs, "sd-hand", recorder, marks, marks, []shutdownPod{{"after", 0}})
	if err, gone := a.exited(0); gone {
		t.Errorf("the agent exited (%v) after a cancelled shutdown", err)
	}
}

// TestShutdownOnSigtermFlag: an agent on a host started with
// --shutdown-on-sigterm treats SIGTERM as the node going away (real signal
// to the real process): the pod is stopped within its 2 s budget with its
// final status posted before the agent exits, and the Lease is not renewed
// after. Without the flag the same SIGTERM leaves the pod running (an
// agent restart).
func TestShutdownOnSigtermFlag(t *testing.T) {
	recorder, err := termRecorder()
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, serverOptions{})
	cs := s.client()
	ctx := context.Background()
	marks := t.TempDir()
	for _, tc := range []struct {
		node string
		args []string
		down bool
	}{
		{node: "sd-restart", args: []string{"--shutdown-grace-period=4s", "--shutdown-grace-period-critical-pods=2s"}},
		{node: "sd-sigterm", args: []string{"--shutdown-on-sigterm", "--shutdown-grace-period=4s", "--shutdown-grace-period-critical-pods=2s"}, down: true},
	} {
		a := startAgent(t, s, agentOptions{name: tc.node, config: agentTestConfig, args: tc.args})
		createRecorderPods(t, cs, tc.node, recorder, marks, marks, []shutdownPod{{tc.node + "-pod", 0}})
		start := time.Now()
		a.stop() // SIGTERM, then wait for the exit
		took := time.Since(start)
		p, err := cs.CoreV1().Pods("default").Get(ctx, tc.node+"-pod", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !tc.down {
			if _, signalled := firstTerm(filepath.Join(marks, tc.node+"-pod")); signalled || p.Status.Phase != corev1.PodRunning {
				t.Errorf("%s: SIGTERM without --shutdown-on-sigterm signalled the pod (%v) or ended it (%s)", tc.node, signalled, p.Status.Phase)
			}
			continue
		}
		if took < 2*time.Second || took > 15*time.Second {
			t.Errorf("%s: the agent took %v to exit, want about the 2 s budget", tc.node, took)
		}
		checkShutdownStatus(t, cs, tc.node+"-pod")
		l1, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, tc.node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The lease renews every second (4 s duration); watch 3 s for a renewal.
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			l2, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, tc.node, metav1.GetOptions{})
			if err == nil && !l2.Spec.RenewTime.Equal(l1.Spec.RenewTime) {
				t.Fatalf("%s: lease renewed after the shutdown ended", tc.node)
			}
			time.Sleep(200 * time.Millisecond) // observation window for a renewal that must not happen
		}
	}
}
