package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

const budgetMessage = "Cannot evict pod as it would violate the pod's disruption budget"

// TestDisruptionBudgets drains, with the real kubectl, a node holding two
// of a 3-replica Deployment's pods guarded by minAvailable: 2: drain evicts
// one, is told about the budget (429) and retries, and finishes only once
// the replacement is Ready elsewhere; at no moment are fewer than 2 pods
// ready. Then, over client-go: a pod matched by two budgets cannot be
// evicted (500), and a percentage budget counts the Deployment's scale.
func TestDisruptionBudgets(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{args: shortLifecycle})
	cs := s.client()
	kubectl := kubectlPath(t)
	nodes := []string{"pa", "pb", "pc"}
	for _, name := range nodes {
		startAgent(t, s, agentOptions{name: name, config: agentTestConfig})
	}
	eventually(t, 30*time.Second, "three schedulable nodes", func() error {
		for _, name := range nodes {
			n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if condition(n, corev1.NodeReady).Status != corev1.ConditionTrue || len(n.Spec.Taints) != 0 {
				return fmt.Errorf("%s not ready/untainted", name)
			}
		}
		return nil
	})

	// Two schedulable nodes for three replicas: one of them gets two.
	s.mustKubectl(t, kubectl, "cordon", "pc")
	web := `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: sleep, image: sleep, args: ["3600"]}]
`
	s.mustKubectl(t, kubectl, "apply", "-f", writeManifest(t, web))
	s.mustKubectl(t, kubectl, "rollout", "status", "deployment/web", "--timeout=90s")
	s.mustKubectl(t, kubectl, "uncordon", "pc")
	var crowded string
	for node, n := range spread(t, cs, "app=web") {
		if n == 2 {
			crowded = node
		}
	}
	if crowded == "" {
		t.Fatalf("no node holds two web pods: %v", spread(t, cs, "app=web"))
	}

	// What the README shows.
	s.mustKubectl(t, kubectl, "create", "poddisruptionbudget", "web", "--selector=app=web", "--min-available=2")
	eventually(t, 30*time.Second, "kubectl get pdb shows one allowed disruption", func() error {
		out, _, err := s.kubectl(t, kubectl, "get", "pdb", "web")
		if err != nil {
			return err
		}
		return pdbRow(out, "web 2 N/A 1")
	})
	out := s.mustKubectl(t, kubectl, "get", "pdb")
	assertColumns(t, out, "NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE")

	t.Run("drain waits for the budget and finishes once the replacement is ready", func(t *testing.T) {
		minReady := watchReady(t, cs, "app=web")
		pdbWatch := startKubectl(t, s, kubectl, "get", "pdb", "web", "--watch", "--no-headers")
		pdbWatch.waitLine(t, "N/A", 30*time.Second)
		start := time.Now()
		drain := startKubectl(t, s, kubectl, "drain", crowded, "--ignore-daemonsets", "--timeout=180s", "--grace-period=1")

		refusedAt := drain.waitLine(t, budgetMessage, 60*time.Second)
		refused := refusedAt.Sub(start)
		// While the drain waits, kubectl get pdb -w shows no allowed disruption.
		pdbWatch.waitFor(t, "a row with 0 allowed disruptions", func(l string) bool {
			f := strings.Fields(l)
			return len(f) >= 4 && f[0] == "web" && f[3] == "0"
		}, 60*time.Second)

		if err := drain.wait(180 * time.Second); err != nil {
			t.Fatalf("kubectl drain %s: %v\n%s", crowded, err, drain.output())
		}
		took := time.Since(start)
		t.Logf("drain of %s: first budget refusal after %v, finished after %v; kubectl said:\n%s", crowded, refused.Round(10*time.Millisecond), took.Round(10*time.Millisecond), drain.output())
		if !strings.Contains(drain.output(), "evicted") {
			t.Errorf("drain output reports no eviction:\n%s", drain.output())
		}
		got := spread(t, cs, "app=web")
		if got[crowded] != 0 || total(got) != 3 {
			t.Errorf("after the drain: web pods %v, want 3, none on %s", got, crowded)
		}
		if m := minReady(); m < 2 {
			t.Errorf("during the drain only %d web pods were ready; the budget wants 2", m)
		}
		eventually(t, 30*time.Second, "the budget allows one disruption again", func() error {
			out, _, err := s.kubectl(t, kubectl, "get", "pdb", "web")
			if err != nil {
				return err
			}
			return pdbRow(out, "web 2 N/A 1")
		})
		s.mustKubectl(t, kubectl, "uncordon", crowded)
	})

	t.Run("a pod matched by two budgets cannot be evicted", func(t *testing.T) {
		second := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "web-too", Namespace: "default"},
			Spec: policyv1.PodDisruptionBudgetSpec{
				MaxUnavailable: ptrTo(intstr.FromInt32(1)),
				Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			},
		}
		if _, err := cs.PolicyV1().PodDisruptionBudgets("default").Create(ctx, second, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := anyPod(t, cs, "app=web")
		err := cs.CoreV1().Pods("default").EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: "default"}})
		var st apierrors.APIStatus
		if err == nil || !asStatus(err, &st) || st.Status().Code != http.StatusInternalServerError ||
			st.Status().Message != "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support." {
			t.Fatalf("evicting %s under two budgets: got %v, want a 500 naming the budgets", pod, err)
		}
		if err := cs.PolicyV1().PodDisruptionBudgets("default").Delete(ctx, "web-too", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a percentage budget counts the Deployment's scale", func(t *testing.T) {
		if err := cs.PolicyV1().PodDisruptionBudgets("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		pct := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "web-pct", Namespace: "default"},
			Spec: policyv1.PodDisruptionBudgetSpec{
				MinAvailable: ptrTo(intstr.FromString("50%")),
				Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			},
		}
		if _, err := cs.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pct, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// 50% of 3, rounded up: 2 must stay; one may go.
		waitBudget(t, cs, "web-pct", policyv1.PodDisruptionBudgetStatus{ExpectedPods: 3, DesiredHealthy: 2, CurrentHealthy: 3, DisruptionsAllowed: 1})
		s.mustKubectl(t, kubectl, "scale", "deployment/web", "--replicas=5")
		s.mustKubectl(t, kubectl, "rollout", "status", "deployment/web", "--timeout=90s")
		// 50% of 5 rounded up is 3.
		waitBudget(t, cs, "web-pct", policyv1.PodDisruptionBudgetStatus{ExpectedPods: 5, DesiredHealthy: 3, CurrentHealthy: 5, DisruptionsAllowed: 2})

		pod := anyPod(t, cs, "app=web")
		if err := cs.CoreV1().Pods("default").EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: "default"}}); err != nil {
			t.Fatalf("evict %s with two disruptions allowed: %v", pod, err)
		}
		b, err := cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "web-pct", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, listed := b.Status.DisruptedPods[pod]; !listed && b.Status.DisruptionsAllowed == 2 {
			t.Errorf("after an eviction the budget neither lists %s nor took a disruption: %+v", pod, b.Status)
		}
	})
}

// pdbRow checks the first data row of `kubectl get pdb` up to the AGE column.
func pdbRow(out, want string) error {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 {
		return fmt.Errorf("no budget row in %q", out)
	}
	f := strings.Fields(lines[1])
	if len(f) < 5 {
		return fmt.Errorf("short row %q", lines[1])
	}
	if got := strings.Join(f[:4], " "); got != want {
		return fmt.Errorf("row %q, want %q", got, want)
	}
	return nil
}

func waitBudget(t *testing.T, cs kubernetes.Interface, name string, want policyv1.PodDisruptionBudgetStatus) {
	t.Helper()
	eventually(t, 60*time.Second, "budget "+name+" status", func() error {
		b, err := cs.PolicyV1().PodDisruptionBudgets("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := b.Status
		if st.ObservedGeneration != b.Generation || st.ExpectedPods != want.ExpectedPods || st.DesiredHealthy != want.DesiredHealthy ||
			st.CurrentHealthy != want.CurrentHealthy || st.DisruptionsAllowed != want.DisruptionsAllowed {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
}

func anyPod(t *testing.T, cs kubernetes.Interface, sel string) string {
	t.Helper()
	pods, err := cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			return p.Name
		}
	}
	t.Fatalf("no pod matches %s", sel)
	return ""
}

func asStatus(err error, st *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	if ok {
		*st = s
	}
	return ok
}

func ptrTo[T any](v T) *T { return &v }

// watchReady watches the pods matching sel and returns a function giving
// the fewest ready, non-terminating ones seen since the watch began.
func watchReady(t *testing.T, cs kubernetes.Interface, sel string) func() int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	list, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string]bool{}
	isReady := func(p *corev1.Pod) bool {
		if p.DeletionTimestamp != nil {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	}
	count := func() int {
		n := 0
		for _, r := range ready {
			if r {
				n++
			}
		}
		return n
	}
	for i := range list.Items {
		ready[list.Items[i].Name] = isReady(&list.Items[i])
	}
	var mu sync.Mutex
	least := count()
	w, err := cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			mu.Lock()
			if ev.Type == watch.Deleted {
				delete(ready, p.Name)
			} else {
				ready[p.Name] = isReady(p)
			}
			least = min(least, count())
			mu.Unlock()
		}
	}()
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return least
	}
}

// kubectlRun is a kubectl started in the background whose combined output
// is read line by line.
type kubectlRun struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	seen  chan struct{} // signalled on every new line
	done  chan error
}

func startKubectl(t *testing.T, s *serverProc, bin string, args ...string) *kubectlRun {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.kubeconfig(), "HOME="+t.TempDir())
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	k := &kubectlRun{cmd: cmd, seen: make(chan struct{}, 1), done: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			k.mu.Lock()
			k.lines = append(k.lines, time.Now().Format("15:04:05.000")+" "+sc.Text())
			k.mu.Unlock()
			select {
			case k.seen <- struct{}{}:
			default:
			}
		}
	}()
	go func() {
		err := cmd.Wait()
		pw.Close()
		k.done <- err
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	return k
}

func (k *kubectlRun) output() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return strings.Join(k.lines, "\n")
}

// waitLine waits for an output line containing substr and returns when it
// was seen first.
func (k *kubectlRun) waitLine(t *testing.T, substr string, timeout time.Duration) time.Time {
	t.Helper()
	return k.waitFor(t, "a line with "+strconv.Quote(substr), func(l string) bool { return strings.Contains(l, substr) }, timeout)
}

// waitFor waits for an output line (without its time stamp) for which
// match holds and returns when it was seen first.
func (k *kubectlRun) waitFor(t *testing.T, what string, match func(line string) bool, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.After(timeout)
	for {
		k.mu.Lock()
		for _, l := range k.lines {
			if match(l[13:]) {
				k.mu.Unlock()
				at, _ := time.ParseInLocation("15:04:05.000", l[:12], time.Local)
				now := time.Now()
				return time.Date(now.Year(), now.Month(), now.Day(), at.Hour(), at.Minute(), at.Second(), at.Nanosecond(), time.Local)
			}
		}
		k.mu.Unlock()
		select {
		case <-k.seen:
		case <-deadline:
			t.Fatalf("no %s within %v:\n%s", what, timeout, k.output())
		}
	}
}

func (k *kubectlRun) wait(timeout time.Duration) error {
	select {
	case err := <-k.done:
		return err
	case <-time.After(timeout):
		_ = k.cmd.Process.Kill()
		return fmt.Errorf("still running after %v", timeout)
	}
}
