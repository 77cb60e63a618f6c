package apiserver

import (
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var evictNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func evictionPod(phase corev1.PodPhase, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Status:     corev1.PodStatus{Phase: phase, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

func budget(name string, sel *metav1.LabelSelector, st policyv1.PodDisruptionBudgetStatus) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Generation: 1},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: sel},
		Status:     st,
	}
}

var webSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}

func TestSkipsBudgets(t *testing.T) {
	deleting := evictionPod(corev1.PodRunning, true)
	deleting.DeletionTimestamp = &metav1.Time{Time: evictNow}
	tests := []struct {
		name       string
		pod        *corev1.Pod
		skips      bool
		guardsVers bool
	}{
		{"a running pod is guarded by its budget", evictionPod(corev1.PodRunning, true), false, true},
		{"a succeeded pod is evicted without a budget check", evictionPod(corev1.PodSucceeded, false), true, false},
		{"a failed pod is evicted without a budget check", evictionPod(corev1.PodFailed, false), true, false},
		{"a pending pod skips the budget but only at the version seen", evictionPod(corev1.PodPending, false), true, true},
		{"a pod being deleted skips the budget", deleting, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := skipsBudgets(tt.pod); got != tt.skips {
				t.Errorf("skipsBudgets: got %v, want %v", got, tt.skips)
			}
			if got := guardsVersion(tt.pod); got != tt.guardsVers {
				t.Errorf("guardsVersion: got %v, want %v", got, tt.guardsVers)
			}
		})
	}
}

func TestBudgetsFor(t *testing.T) {
	other := budget("other-ns", webSelector, policyv1.PodDisruptionBudgetStatus{})
	other.Namespace = "kube-system"
	tests := []struct {
		name    string
		budgets []*policyv1.PodDisruptionBudget
		want    []string
	}{
		{"a budget whose selector matches the pod guards it", []*policyv1.PodDisruptionBudget{budget("web", webSelector, policyv1.PodDisruptionBudgetStatus{})}, []string{"web"}},
		{"a budget selecting other labels does not", []*policyv1.PodDisruptionBudget{
			budget("api", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}, policyv1.PodDisruptionBudgetStatus{})}, nil},
		{"an empty selector matches nothing in the eviction handler, as upstream", []*policyv1.PodDisruptionBudget{
			budget("all", &metav1.LabelSelector{}, policyv1.PodDisruptionBudgetStatus{})}, nil},
		{"a missing selector matches nothing", []*policyv1.PodDisruptionBudget{budget("none", nil, policyv1.PodDisruptionBudgetStatus{})}, nil},
		{"a budget of another namespace does not guard the pod", []*policyv1.PodDisruptionBudget{other}, nil},
		{"every matching budget is returned", []*policyv1.PodDisruptionBudget{
			budget("a", webSelector, policyv1.PodDisruptionBudgetStatus{}),
			budget("b", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}}}, policyv1.PodDisruptionBudgetStatus{}),
		}, []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := budgetsFor(evictionPod(corev1.PodRunning, true), tt.budgets)
			var names []string
			for _, b := range got {
				names = append(names, b.Name)
			}
			if len(names) != len(tt.want) {
				t.Fatalf("got %v, want %v", names, tt.want)
			}
			for i := range names {
				if names[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", names, tt.want)
				}
			}
		})
	}
}

func TestDecideEviction(t *testing.T) {
	always, ifHealthy := policyv1.AlwaysAllow, policyv1.IfHealthyBudget
	healthyBudget := policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, CurrentHealthy: 3, DesiredHealthy: 2, DisruptionsAllowed: 1}
	shortBudget := policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, CurrentHealthy: 1, DesiredHealthy: 2}
	withPolicy := func(b *policyv1.PodDisruptionBudget, p *policyv1.UnhealthyPodEvictionPolicyType) *policyv1.PodDisruptionBudget {
		b.Spec.UnhealthyPodEvictionPolicy = p
		return b
	}
	tests := []struct {
		name     string
		ready    bool
		matching []*policyv1.PodDisruptionBudget
		want     evictionPath
		wantCode int32
	}{
		{"a pod without a budget is deleted freely", true, nil, deleteFreely, 0},
		{"a ready pod with one budget charges it", true, []*policyv1.PodDisruptionBudget{budget("web", webSelector, healthyBudget)}, chargeBudget, 0},
		{"a pod matched by two budgets is a 500", true, []*policyv1.PodDisruptionBudget{
			budget("a", webSelector, healthyBudget), budget("b", webSelector, healthyBudget)}, 0, http.StatusInternalServerError},
		{"an unready pod goes uncharged while the budget is met (IfHealthyBudget by default)", false,
			[]*policyv1.PodDisruptionBudget{budget("web", webSelector, healthyBudget)}, deleteIfUnchanged, 0},
		{"an unready pod goes uncharged under an explicit IfHealthyBudget while the budget is met", false,
			[]*policyv1.PodDisruptionBudget{withPolicy(budget("web", webSelector, healthyBudget), &ifHealthy)}, deleteIfUnchanged, 0},
		{"an unready pod is charged when the budget is not met (IfHealthyBudget)", false,
			[]*policyv1.PodDisruptionBudget{budget("web", webSelector, shortBudget)}, chargeBudget, 0},
		{"an unready pod is charged when the budget wants no healthy pods (IfHealthyBudget)", false,
			[]*policyv1.PodDisruptionBudget{budget("web", webSelector, policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1})}, chargeBudget, 0},
		{"an unready pod always goes uncharged under AlwaysAllow", false,
			[]*policyv1.PodDisruptionBudget{withPolicy(budget("web", webSelector, shortBudget), &always)}, deleteIfUnchanged, 0},
		{"a ready pod is charged under AlwaysAllow too", true,
			[]*policyv1.PodDisruptionBudget{withPolicy(budget("web", webSelector, shortBudget), &always)}, chargeBudget, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, _, err := decideEviction(evictionPod(corev1.PodRunning, tt.ready), tt.matching)
			if tt.wantCode != 0 {
				st, ok := err.(apierrors.APIStatus)
				if !ok || st.Status().Code != tt.wantCode || st.Status().Message != severalBudgetsMessage {
					t.Fatalf("got %v, want a %d with %q", err, tt.wantCode, severalBudgetsMessage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if path != tt.want {
				t.Errorf("path: got %d, want %d", path, tt.want)
			}
		})
	}
}

func TestCharge(t *testing.T) {
	tests := []struct {
		name        string
		generation  int64
		status      policyv1.PodDisruptionBudgetStatus
		dryRun      bool
		wantCode    int32
		wantCause   string
		wantAllowed int32
		wantCond    metav1.ConditionStatus
	}{
		{"an allowed disruption is taken and the pod listed as disrupted", 1,
			policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: 2, CurrentHealthy: 4, DesiredHealthy: 2}, false, 0, "", 1, ""},
		{"taking the last disruption turns DisruptionAllowed False (InsufficientPods)", 1,
			policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: 1, CurrentHealthy: 3, DesiredHealthy: 2}, false, 0, "", 0, metav1.ConditionFalse},
		{"no allowed disruption is a 429 naming the budget's needs", 1,
			policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, CurrentHealthy: 2, DesiredHealthy: 2}, false,
			http.StatusTooManyRequests, "The disruption budget web needs 2 healthy pods and has 2 currently", 0, ""},
		{"a budget whose spec the controller has not observed is a 429", 2,
			policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: 5}, false,
			http.StatusTooManyRequests, "The disruption budget web is still being processed by the server.", 0, ""},
		{"a new budget with no status yet is a 429", 1, policyv1.PodDisruptionBudgetStatus{}, false,
			http.StatusTooManyRequests, "The disruption budget web is still being processed by the server.", 0, ""},
		{"a negative allowance is forbidden", 1, policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: -1}, false,
			http.StatusForbidden, "", 0, ""},
		{"a dry run checks but writes nothing", 1,
			policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: 1}, true, 0, "", 0, ""},
		{"a dry run is refused like the real thing", 1,
			policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, CurrentHealthy: 1, DesiredHealthy: 2}, true,
			http.StatusTooManyRequests, "The disruption budget web needs 2 healthy pods and has 1 currently", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := budget("web", webSelector, tt.status)
			b.Generation = tt.generation
			before := b.DeepCopy()
			got, err := charge(b, "web-1", tt.dryRun, evictNow)
			if tt.wantCode != 0 {
				st, ok := err.(apierrors.APIStatus)
				if !ok || st.Status().Code != tt.wantCode {
					t.Fatalf("got %v, want a %d", err, tt.wantCode)
				}
				if tt.wantCode == http.StatusTooManyRequests {
					s := st.Status()
					if s.Message != budgetViolationMessage {
						t.Errorf("message: got %q, want %q", s.Message, budgetViolationMessage)
					}
					if s.Details == nil || len(s.Details.Causes) != 1 || s.Details.Causes[0].Type != policyv1.DisruptionBudgetCause || s.Details.Causes[0].Message != tt.wantCause {
						t.Errorf("causes: got %+v, want one DisruptionBudget cause %q", s.Details, tt.wantCause)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.dryRun {
				if got != nil {
					t.Errorf("a dry run returned a status to write: %+v", got.Status)
				}
				return
			}
			if got.Status.DisruptionsAllowed != tt.wantAllowed {
				t.Errorf("disruptionsAllowed: got %d, want %d", got.Status.DisruptionsAllowed, tt.wantAllowed)
			}
			if at, ok := got.Status.DisruptedPods["web-1"]; !ok || !at.Time.Equal(evictNow) {
				t.Errorf("disruptedPods: got %v, want web-1 at %v", got.Status.DisruptedPods, evictNow)
			}
			c := apimeta.FindStatusCondition(got.Status.Conditions, policyv1.DisruptionAllowedCondition)
			switch {
			case tt.wantCond == "" && c != nil:
				t.Errorf("condition: got %+v, want none", c)
			case tt.wantCond != "" && (c == nil || c.Status != tt.wantCond || c.Reason != policyv1.InsufficientPodsReason):
				t.Errorf("condition: got %+v, want %s %s", c, tt.wantCond, policyv1.InsufficientPodsReason)
			}
			if before.Status.DisruptionsAllowed != b.Status.DisruptionsAllowed || len(b.Status.DisruptedPods) != 0 {
				t.Errorf("charge changed its input: %+v", b.Status)
			}
		})
	}
}
