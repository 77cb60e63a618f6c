package disruption

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const (
	// ControllerName is the upstream --controllers name.
	ControllerName = "disruption-controller"

	// DeletionTimeout is how long an eviction listed in
	// status.disruptedPods keeps its pod out of currentHealthy while the
	// pod is not yet seen being deleted (upstream's 2 minutes).
	DeletionTimeout = 2 * time.Minute
	// StaleDisruptionTimeout is how long a pod may carry DisruptionTarget=True
	// without being deleted before the condition is reset to False.
	StaleDisruptionTimeout = 2 * time.Minute
)

// Owner is the workload whose scale counts for the pods it controls.
type Owner struct {
	UID      types.UID
	Replicas int32
}

// Input is what one sync of one budget observes.
type Input struct {
	Budget *policyv1.PodDisruptionBudget
	// Pods are the pods of the budget's namespace its selector matches.
	Pods []*corev1.Pod
	// Owners maps the UID in a pod's controller reference to the workload
	// whose spec.replicas counts for it (a Deployment for the ReplicaSets
	// it owns); absent when the shell found none.
	Owners map[types.UID]Owner
	Now    time.Time
}

// Result is what to do for one budget.
type Result struct {
	// Status is the budget's new status; nil when the stored one is current.
	Status *policyv1.PodDisruptionBudgetStatus
	// Err is set when the expected pod count could not be computed; Status
	// is then the fail-safe status (no disruption allowed, SyncFailed).
	Err error
	// RecheckAfter > 0 asks for another sync then: an entry of
	// disruptedPods runs out.
	RecheckAfter time.Duration
	// Unmanaged names matched pods without a controller (they count as
	// pods but give no scale).
	Unmanaged []string
	// NotDeleted names pods whose eviction ran out without a deletion.
	NotDeleted []string
}

// Sync computes a budget's status.
func Sync(in Input) Result {
	var res Result
	expected, desired, unmanaged, err := expectedPods(in)
	res.Unmanaged = unmanaged
	if err != nil {
		res.Err = err
		res.Status = FailSafe(in.Budget, err, in.Now)
		return res
	}
	disrupted, recheck, notDeleted := disruptedPods(in)
	res.NotDeleted = notDeleted
	if recheck != nil {
		res.RecheckAfter = recheck.Sub(in.Now)
	}
	healthy := countHealthy(in.Pods, disrupted, in.Now)
	allowed := healthy - desired
	if expected <= 0 || allowed <= 0 {
		// A budget over no pods yet stays closed until its pods are
		// counted: the eviction handler must not approve on a status
		// computed before they appeared.
		allowed = 0
	}
	b := in.Budget
	if b.Status.CurrentHealthy == healthy && b.Status.DesiredHealthy == desired && b.Status.ExpectedPods == expected &&
		b.Status.DisruptionsAllowed == allowed && apiequality.Semantic.DeepEqual(b.Status.DisruptedPods, disrupted) &&
		b.Status.ObservedGeneration == b.Generation && conditionCurrent(b) {
		return res
	}
	st := &policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: b.Generation,
		DisruptedPods:      disrupted,
		DisruptionsAllowed: allowed,
		CurrentHealthy:     healthy,
		DesiredHealthy:     desired,
		ExpectedPods:       expected,
		Conditions:         append([]metav1.Condition(nil), b.Status.Conditions...),
	}
	SetDisruptionAllowed(st, in.Now)
	res.Status = st
	return res
}

// FailSafe is the status after a failed sync: the stored status with no
// disruption allowed and DisruptionAllowed=False (SyncFailed, the error as
// message), so the eviction handler refuses while the budget is unknown.
func FailSafe(b *policyv1.PodDisruptionBudget, err error, now time.Time) *policyv1.PodDisruptionBudgetStatus {
	st := b.Status.DeepCopy()
	st.DisruptionsAllowed = 0
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse, Reason: policyv1.SyncFailedReason,
		Message: err.Error(), ObservedGeneration: st.ObservedGeneration, LastTransitionTime: metav1.NewTime(now),
	})
	return st
}

// SetDisruptionAllowed sets the DisruptionAllowed condition from
// disruptionsAllowed: True (SufficientPods) when above 0, else False
// (InsufficientPods). The transition time moves only when the status does.
func SetDisruptionAllowed(st *policyv1.PodDisruptionBudgetStatus, now time.Time) {
	c := metav1.Condition{
		Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse, Reason: policyv1.InsufficientPodsReason,
		ObservedGeneration: st.ObservedGeneration, LastTransitionTime: metav1.NewTime(now),
	}
	if st.DisruptionsAllowed > 0 {
		c.Status, c.Reason = metav1.ConditionTrue, policyv1.SufficientPodsReason
	}
	if st.Conditions == nil {
		st.Conditions = []metav1.Condition{}
	}
	apimeta.SetStatusCondition(&st.Conditions, c)
}

// conditionCurrent reports whether the stored DisruptionAllowed condition
// agrees with the stored counts and generation.
func conditionCurrent(b *policyv1.PodDisruptionBudget) bool {
	c := apimeta.FindStatusCondition(b.Status.Conditions, policyv1.DisruptionAllowedCondition)
	if c == nil || b.Status.ObservedGeneration != b.Generation {
		return false
	}
	if b.Status.DisruptionsAllowed > 0 {
		return c.Status == metav1.ConditionTrue && c.Reason == policyv1.SufficientPodsReason
	}
	return c.Status == metav1.ConditionFalse && c.Reason == policyv1.InsufficientPodsReason
}

// expectedPods returns expectedPods and desiredHealthy. An integer
// minAvailable counts the matched pods; a percentage minAvailable and any
// maxUnavailable count the scale of the pods' controllers (percentages
// rounded up, as upstream). A budget with neither bound wants nothing.
func expectedPods(in Input) (expected, desired int32, unmanaged []string, err error) {
	spec := in.Budget.Spec
	bound := spec.MaxUnavailable
	switch {
	case bound != nil:
	case spec.MinAvailable == nil:
		return 0, 0, nil, nil
	case spec.MinAvailable.Type == intstr.Int:
		return int32(len(in.Pods)), spec.MinAvailable.IntVal, nil, nil
	default:
		bound = spec.MinAvailable
	}
	expected, unmanaged, err = scale(in)
	if err != nil {
		return 0, 0, unmanaged, err
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(bound, int(expected), true)
	if err != nil {
		return 0, 0, unmanaged, err
	}
	if spec.MaxUnavailable != nil {
		return expected, max(expected-int32(n), 0), unmanaged, nil
	}
	return expected, int32(n), unmanaged, nil
}

// scale sums the replicas of the distinct workloads controlling the pods.
// Pods without a controller are reported, not counted; a pod whose
// controller is unknown fails the sync.
func scale(in Input) (int32, []string, error) {
	var unmanaged []string
	seen := map[types.UID]bool{}
	var sum int32
	for _, p := range in.Pods {
		ref := metav1.GetControllerOfNoCopy(p)
		if ref == nil {
			unmanaged = append(unmanaged, p.Name)
			continue
		}
		owner, ok := in.Owners[ref.UID]
		if !ok {
			return 0, unmanaged, fmt.Errorf("found no controllers for pod %q", p.Name)
		}
		if !seen[owner.UID] {
			seen[owner.UID] = true
			sum += owner.Replicas
		}
	}
	return sum, unmanaged, nil
}

// disruptedPods keeps the entries of status.disruptedPods whose pod still
// exists, is not yet being deleted and whose eviction is less than
// DeletionTimeout old; it returns when the first kept entry runs out and
// the pods whose entries ran out.
func disruptedPods(in Input) (map[string]metav1.Time, *time.Time, []string) {
	out := map[string]metav1.Time{}
	old := in.Budget.Status.DisruptedPods
	if old == nil {
		return out, nil, nil
	}
	var recheck *time.Time
	var notDeleted []string
	for _, p := range in.Pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		at, ok := old[p.Name]
		if !ok {
			continue
		}
		deadline := at.Add(DeletionTimeout)
		if deadline.Before(in.Now) {
			notDeleted = append(notDeleted, p.Name)
			continue
		}
		if recheck == nil || deadline.Before(*recheck) {
			recheck = &deadline
		}
		out[p.Name] = at
	}
	return out, recheck, notDeleted
}

// countHealthy counts the ready pods that are neither being deleted nor
// listed as just evicted.
func countHealthy(pods []*corev1.Pod, disrupted map[string]metav1.Time, now time.Time) int32 {
	var n int32
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if at, ok := disrupted[p.Name]; ok && at.Add(DeletionTimeout).After(now) {
			continue
		}
		if podReady(p) {
			n++
		}
	}
	return n
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// StaleDisruption reports whether a pod carries a DisruptionTarget=True
// condition that should be reset (it is not being deleted, has not
// finished, and the condition was not set by its kubelet), and how long
// until it is stale (0: now).
func StaleDisruption(p *corev1.Pod, now time.Time) (bool, time.Duration) {
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false, 0
	}
	for _, c := range p.Status.Conditions {
		if c.Type != corev1.DisruptionTarget {
			continue
		}
		if c.Status != corev1.ConditionTrue || c.Reason == corev1.PodReasonTerminationByKubelet {
			return false, 0
		}
		return true, max(StaleDisruptionTimeout-now.Sub(c.LastTransitionTime.Time), 0)
	}
	return false, 0
}
