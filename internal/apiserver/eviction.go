package apiserver

import (
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// This file is the pure part of pods/eviction: which disruption budgets
// guard a pod and whether one of them lets it go. It reads no clock and
// makes no storage call; pods.go does the reads and writes. The rules are
// kube-apiserver's (pkg/registry/core/pod/storage/eviction.go), including
// its messages, which `kubectl drain` prints.

const (
	// maxDisruptedPods: a budget whose status already lists more evictions
	// the disruption controller has not yet seen refuses further ones.
	maxDisruptedPods = 2000
	// evictionAttempts bounds the retries of an eviction on conflicting
	// writes (of the pod or of the budget's status), as upstream's 20 steps.
	evictionAttempts = 20

	budgetViolationMessage = "Cannot evict pod as it would violate the pod's disruption budget."
	severalBudgetsMessage  = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
)

var pdbsResource = policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets")

// skipsBudgets reports whether a pod is evicted without consulting any
// budget: it has finished (Succeeded, Failed), has not started (Pending), or
// is already being deleted — its disruption has already happened or
// cannot.
func skipsBudgets(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed, corev1.PodPending:
		return true
	}
	return pod.DeletionTimestamp != nil
}

// guardsVersion reports whether a budget-free eviction must delete the pod
// only at the version it was decided on: a Pending pod could start and
// become Ready (and so guarded) in between.
func guardsVersion(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return false
	}
	return pod.DeletionTimestamp == nil
}

// budgetsFor returns the budgets (of the pod's namespace) whose selector
// matches the pod. As upstream's eviction handler, a missing, empty or
// invalid selector matches nothing here.
func budgetsFor(pod *corev1.Pod, budgets []*policyv1.PodDisruptionBudget) []*policyv1.PodDisruptionBudget {
	var out []*policyv1.PodDisruptionBudget
	for _, b := range budgets {
		if b.Namespace != pod.Namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, b)
	}
	return out
}

// evictionPath is how an eviction of a pod that does not skip budgets
// proceeds.
type evictionPath int

const (
	// deleteFreely: no budget guards the pod.
	deleteFreely evictionPath = iota
	// deleteIfUnchanged: the pod is not ready and its budget lets unready
	// pods go; delete it only at the version decided on (a pod that became
	// ready meanwhile is guarded again: 429).
	deleteIfUnchanged
	// chargeBudget: take one of the budget's allowed disruptions first.
	chargeBudget
)

// decideEviction picks the path for a pod that does not skip budgets,
// given the budgets that match it. Several budgets are refused with a 500,
// as upstream.
func decideEviction(pod *corev1.Pod, matching []*policyv1.PodDisruptionBudget) (evictionPath, *policyv1.PodDisruptionBudget, error) {
	switch len(matching) {
	case 0:
		return deleteFreely, nil, nil
	case 1:
	default:
		return 0, nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: severalBudgetsMessage,
		}}
	}
	b := matching[0]
	if !podReady(pod) {
		if p := b.Spec.UnhealthyPodEvictionPolicy; p != nil && *p == policyv1.AlwaysAllow {
			return deleteIfUnchanged, b, nil
		}
		// IfHealthyBudget (the default): an unready pod may go while the
		// application is not disrupted; otherwise it costs a disruption
		// like any other.
		if b.Status.CurrentHealthy >= b.Status.DesiredHealthy && b.Status.DesiredHealthy > 0 {
			return deleteIfUnchanged, b, nil
		}
	}
	return chargeBudget, b, nil
}

// charge takes one disruption from the budget for podName: it returns the
// budget with its new status (one fewer allowed disruption, the pod listed
// in disruptedPods at now so the controller does not count it healthy) or
// the refusal. A dry run returns the checks' verdict and no new status.
func charge(b *policyv1.PodDisruptionBudget, podName string, dryRun bool, now time.Time) (*policyv1.PodDisruptionBudget, error) {
	gr := pdbsResource.GroupResource()
	if b.Status.ObservedGeneration < b.Generation {
		return nil, budgetInProgress(b.Name)
	}
	if b.Status.DisruptionsAllowed < 0 {
		return nil, apierrors.NewForbidden(gr, b.Name, fmt.Errorf("pdb disruptions allowed is negative"))
	}
	if len(b.Status.DisruptedPods) > maxDisruptedPods {
		return nil, apierrors.NewForbidden(gr, b.Name, fmt.Errorf("DisruptedPods map too big - too many evictions not confirmed by PDB controller"))
	}
	if b.Status.DisruptionsAllowed == 0 {
		err := apierrors.NewTooManyRequests(budgetViolationMessage, 0)
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
			Type:    policyv1.DisruptionBudgetCause,
			Message: fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", b.Name, b.Status.DesiredHealthy, b.Status.CurrentHealthy),
		})
		return nil, err
	}
	if dryRun {
		return nil, nil
	}
	out := b.DeepCopy()
	out.Status.DisruptionsAllowed--
	if out.Status.DisruptionsAllowed == 0 {
		apimeta.SetStatusCondition(&out.Status.Conditions, metav1.Condition{
			Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse, Reason: policyv1.InsufficientPodsReason,
			ObservedGeneration: out.Status.ObservedGeneration, LastTransitionTime: metav1.NewTime(now),
		})
	}
	if out.Status.DisruptedPods == nil {
		out.Status.DisruptedPods = map[string]metav1.Time{}
	}
	out.Status.DisruptedPods[podName] = metav1.NewTime(now)
	return out, nil
}

// budgetInProgress is the 429 for a budget the disruption controller has
// not caught up with (a new budget, a changed spec, or an unready pod that
// became ready while it was being evicted).
func budgetInProgress(name string) *apierrors.StatusError {
	err := apierrors.NewTooManyRequests(budgetViolationMessage, 10)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type:    policyv1.DisruptionBudgetCause,
		Message: fmt.Sprintf("The disruption budget %s is still being processed by the server.", name),
	})
	return err
}

// podReady is kube's notion of a healthy pod for budgets: Ready=True.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
