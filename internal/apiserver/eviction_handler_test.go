package apiserver

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const (
	pdbsPath = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
	podsPath = "/api/v1/namespaces/default/pods"
)

// readyPod creates a running, ready pod labelled app=web.
func readyPod(t *testing.T, h http.Handler, name string, phase corev1.PodPhase) {
	t.Helper()
	p := testPod(name, "n1", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web"} })
	mustDo(t, h, admin, "POST", podsPath, p, http.StatusCreated)
	cur := decode[corev1.Pod](t, mustDo(t, h, admin, "GET", podsPath+"/"+name, nil, http.StatusOK))
	cur.Status.Phase = phase
	cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	mustDo(t, h, admin, "PUT", podsPath+"/"+name+"/status", cur, http.StatusOK)
}

func evictBody(name string, dryRun bool) *policyv1.Eviction {
	ev := &policyv1.Eviction{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"}, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	if dryRun {
		ev.DeleteOptions = &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
	}
	return ev
}

// setBudgetStatus writes a budget's status as the disruption controller would.
func setBudgetStatus(t *testing.T, h http.Handler, name string, st policyv1.PodDisruptionBudgetStatus) *policyv1.PodDisruptionBudget {
	t.Helper()
	cur := decode[policyv1.PodDisruptionBudget](t, mustDo(t, h, admin, "GET", pdbsPath+"/"+name, nil, http.StatusOK))
	st.ObservedGeneration = cur.Generation
	cur.Status = st
	return decode[policyv1.PodDisruptionBudget](t, mustDo(t, h, admin, "PUT", pdbsPath+"/"+name+"/status", cur, http.StatusOK))
}

func checkRefusal(t *testing.T, r response, code int, cause string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("got %d %s, want %d", r.code, r.body, code)
	}
	st := r.status(t)
	if code == http.StatusTooManyRequests {
		if st.Reason != metav1.StatusReasonTooManyRequests || st.Message != budgetViolationMessage {
			t.Errorf("status: got %s %q, want TooManyRequests %q", st.Reason, st.Message, budgetViolationMessage)
		}
		if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != policyv1.DisruptionBudgetCause || st.Details.Causes[0].Message != cause {
			t.Errorf("causes: got %+v, want DisruptionBudget %q", st.Details, cause)
		}
	}
}

func TestEvictionHonoursDisruptionBudgets(t *testing.T) {
	_, h := newTestServer(t, Config{})
	for _, name := range []string{"web-a", "web-b", "web-c"} {
		readyPod(t, h, name, corev1.PodRunning)
	}
	readyPod(t, h, "web-done", corev1.PodSucceeded)
	two := intstr.FromInt32(2)
	pdb := &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &two, Selector: webSelector},
	}
	created := decode[policyv1.PodDisruptionBudget](t, mustDo(t, h, admin, "POST", pdbsPath, pdb, http.StatusCreated))
	if created.Generation != 1 {
		t.Fatalf("a new budget: got generation %d, want 1", created.Generation)
	}

	t.Run("a budget the controller has not observed refuses with 429", func(t *testing.T) {
		r := do(t, h, admin, "POST", podsPath+"/web-a/eviction", evictBody("web-a", false))
		checkRefusal(t, r, http.StatusTooManyRequests, "The disruption budget web is still being processed by the server.")
	})

	setBudgetStatus(t, h, "web", policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 3, DesiredHealthy: 2, ExpectedPods: 3, DisruptionsAllowed: 1})

	t.Run("a dry run is allowed and changes nothing", func(t *testing.T) {
		mustDo(t, h, admin, "POST", podsPath+"/web-a/eviction", evictBody("web-a", true), http.StatusCreated)
		pod := decode[corev1.Pod](t, mustDo(t, h, admin, "GET", podsPath+"/web-a", nil, http.StatusOK))
		if pod.DeletionTimestamp != nil || len(pod.Status.Conditions) != 1 {
			t.Errorf("a dry run touched the pod: deletion %v, conditions %+v", pod.DeletionTimestamp, pod.Status.Conditions)
		}
		b := decode[policyv1.PodDisruptionBudget](t, mustDo(t, h, admin, "GET", pdbsPath+"/web", nil, http.StatusOK))
		if b.Status.DisruptionsAllowed != 1 || len(b.Status.DisruptedPods) != 0 {
			t.Errorf("a dry run touched the budget: %+v", b.Status)
		}
	})

	t.Run("an allowed eviction takes the disruption, marks the pod and deletes it", func(t *testing.T) {
		mustDo(t, h, admin, "POST", podsPath+"/web-a/eviction", evictBody("web-a", false), http.StatusCreated)
		pod := decode[corev1.Pod](t, mustDo(t, h, admin, "GET", podsPath+"/web-a", nil, http.StatusOK))
		if pod.DeletionTimestamp == nil {
			t.Error("the evicted pod is not being deleted")
		}
		var marked bool
		for _, c := range pod.Status.Conditions {
			marked = marked || (c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "EvictionByEvictionAPI")
		}
		if !marked {
			t.Errorf("conditions: got %+v, want DisruptionTarget=True (EvictionByEvictionAPI)", pod.Status.Conditions)
		}
		b := decode[policyv1.PodDisruptionBudget](t, mustDo(t, h, admin, "GET", pdbsPath+"/web", nil, http.StatusOK))
		if b.Status.DisruptionsAllowed != 0 {
			t.Errorf("disruptionsAllowed: got %d, want 0", b.Status.DisruptionsAllowed)
		}
		if _, ok := b.Status.DisruptedPods["web-a"]; !ok {
			t.Errorf("disruptedPods: got %v, want web-a", b.Status.DisruptedPods)
		}
		if c := apimeta.FindStatusCondition(b.Status.Conditions, policyv1.DisruptionAllowedCondition); c == nil || c.Status != metav1.ConditionFalse || c.Reason != policyv1.InsufficientPodsReason {
			t.Errorf("DisruptionAllowed: got %+v, want False InsufficientPods", c)
		}
	})

	t.Run("with no disruption left the next eviction is a 429 naming the budget", func(t *testing.T) {
		r := do(t, h, admin, "POST", podsPath+"/web-b/eviction", evictBody("web-b", false))
		checkRefusal(t, r, http.StatusTooManyRequests, "The disruption budget web needs 2 healthy pods and has 3 currently")
		pod := decode[corev1.Pod](t, mustDo(t, h, admin, "GET", podsPath+"/web-b", nil, http.StatusOK))
		if pod.DeletionTimestamp != nil || len(pod.Status.Conditions) != 1 {
			t.Errorf("a refused eviction touched the pod: deletion %v, conditions %+v", pod.DeletionTimestamp, pod.Status.Conditions)
		}
	})

	t.Run("a finished pod is evicted without a budget check", func(t *testing.T) {
		mustDo(t, h, admin, "POST", podsPath+"/web-done/eviction", evictBody("web-done", false), http.StatusCreated)
	})

	t.Run("a pod matched by two budgets is a 500", func(t *testing.T) {
		second := pdb.DeepCopy()
		second.Name = "web-too"
		mustDo(t, h, admin, "POST", pdbsPath, second, http.StatusCreated)
		r := do(t, h, admin, "POST", podsPath+"/web-c/eviction", evictBody("web-c", false))
		if r.code != http.StatusInternalServerError || r.status(t).Message != severalBudgetsMessage {
			t.Fatalf("got %d %s, want 500 %q", r.code, r.body, severalBudgetsMessage)
		}
		mustDo(t, h, admin, "DELETE", pdbsPath+"/web-too", nil, http.StatusOK)
	})

	t.Run("a spec change bumps the generation and refuses until observed", func(t *testing.T) {
		setBudgetStatus(t, h, "web", policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 2, DesiredHealthy: 1, ExpectedPods: 2, DisruptionsAllowed: 1})
		cur := decode[policyv1.PodDisruptionBudget](t, mustDo(t, h, admin, "GET", pdbsPath+"/web", nil, http.StatusOK))
		one := intstr.FromInt32(1)
		cur.Spec.MinAvailable = &one
		updated := decode[policyv1.PodDisruptionBudget](t, mustDo(t, h, admin, "PUT", pdbsPath+"/web", cur, http.StatusOK))
		if updated.Generation != cur.Generation+1 || updated.Status.DisruptionsAllowed != 1 {
			t.Fatalf("after a spec change: generation %d (was %d), status %+v; want a bump and the status kept", updated.Generation, cur.Generation, updated.Status)
		}
		r := do(t, h, admin, "POST", podsPath+"/web-b/eviction", evictBody("web-b", false))
		checkRefusal(t, r, http.StatusTooManyRequests, "The disruption budget web is still being processed by the server.")
	})

	t.Run("the status subresource may not change the spec", func(t *testing.T) {
		cur := decode[policyv1.PodDisruptionBudget](t, mustDo(t, h, admin, "GET", pdbsPath+"/web", nil, http.StatusOK))
		cur.Spec.MinAvailable = nil
		cur.Status.ExpectedPods = 7
		got := decode[policyv1.PodDisruptionBudget](t, mustDo(t, h, admin, "PUT", pdbsPath+"/web/status", cur, http.StatusOK))
		if got.Spec.MinAvailable == nil || got.Status.ExpectedPods != 7 || got.Generation != cur.Generation {
			t.Errorf("status write: spec %+v, status %+v, generation %d; want the spec and generation kept", got.Spec, got.Status, got.Generation)
		}
	})

	t.Run("an invalid budget is refused with 422", func(t *testing.T) {
		bad := pdb.DeepCopy()
		bad.Name = "bad"
		half := intstr.FromString("150%")
		bad.Spec.MaxUnavailable = &half
		r := do(t, h, admin, "POST", pdbsPath, bad)
		if r.code != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "minAvailable and maxUnavailable cannot be both set") {
			t.Errorf("got %d %s, want 422 naming both bounds", r.code, r.body)
		}
	})
}

// TestConcurrentEvictionsShareOneDisruption: five evictions racing for a
// budget that allows one disruption — the compare-and-swap on the budget's
// status lets exactly one through; the others get 429.
func TestConcurrentEvictionsShareOneDisruption(t *testing.T) {
	_, h := newTestServer(t, Config{})
	names := []string{"web-1", "web-2", "web-3", "web-4", "web-5"}
	for _, name := range names {
		readyPod(t, h, name, corev1.PodRunning)
	}
	four := intstr.FromInt32(4)
	mustDo(t, h, admin, "POST", pdbsPath, &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &four, Selector: webSelector},
	}, http.StatusCreated)
	setBudgetStatus(t, h, "web", policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 5, DesiredHealthy: 4, ExpectedPods: 5, DisruptionsAllowed: 1})

	codes := make(chan int, len(names))
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- do(t, h, admin, "POST", podsPath+"/"+name+"/eviction", evictBody(name, false)).code
		}()
	}
	wg.Wait()
	close(codes)
	got := map[int]int{}
	for c := range codes {
		got[c]++
	}
	if got[http.StatusCreated] != 1 || got[http.StatusTooManyRequests] != len(names)-1 {
		t.Errorf("answers: got %v, want one 201 and %d 429", got, len(names)-1)
	}
	b := decode[policyv1.PodDisruptionBudget](t, mustDo(t, h, admin, "GET", pdbsPath+"/web", nil, http.StatusOK))
	if b.Status.DisruptionsAllowed != 0 || len(b.Status.DisruptedPods) != 1 {
		t.Errorf("budget after the race: %+v, want 0 allowed and one disrupted pod", b.Status)
	}
}
