package tainteviction

import (
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// Taint is one NoExecute taint of a node together with the moment its
// toleration clock started: the taint's timeAdded, or when it was first seen.
type Taint struct {
	corev1.Taint
	Since time.Time
}

// Verdict is what the controller should do about one pod.
type Verdict int

const (
	// Stay: no NoExecute taint, or every one tolerated without a time limit.
	Stay Verdict = iota
	// EvictNow: some NoExecute taint is not tolerated.
	EvictNow
	// EvictAt: every NoExecute taint is tolerated, some only for a while;
	// the pod goes at Decision.At (which may already have passed).
	EvictAt
)

func (v Verdict) String() string {
	switch v {
	case Stay:
		return "Stay"
	case EvictNow:
		return "EvictNow"
	case EvictAt:
		return "EvictAt"
	default:
		return "Verdict(?)"
	}
}

// Decision is the verdict for one pod with its time and the taint behind it.
type Decision struct {
	Verdict Verdict
	// At is now for EvictNow and the deadline for EvictAt; zero for Stay.
	At time.Time
	// Taint is the first untolerated taint (EvictNow) or the taint whose
	// toleration runs out first (EvictAt).
	Taint corev1.Taint
}

// maxTolerationSeconds keeps Since + tolerationSeconds from overflowing
// time.Duration (about 292 years).
const maxTolerationSeconds = math.MaxInt64 / int64(time.Second)

// Decide applies TEC-3 to one pod and the NoExecute taints of its node
// (taints of other effects must already be filtered out).
//
// For each taint the first toleration in the pod's list that tolerates it is
// the one that counts (upstream's "used tolerations"). If some taint has none
// the pod is evicted now. Otherwise each taint whose counting toleration has
// tolerationSeconds gives a deadline: the start of its clock plus
// max(tolerationSeconds, 0) seconds, where the clock starts at the later of
// the taint's Since and the pod's binding (BoundAt), but never after now. The
// earliest deadline wins; with none the pod stays.
//
// With all clocks started at the same moment this is upstream's
// "observedTime + minimum tolerationSeconds of the used tolerations".
func Decide(now time.Time, taints []Taint, pod *corev1.Pod) Decision {
	bound := BoundAt(pod)
	d := Decision{Verdict: Stay}
	for i := range taints {
		tol := firstTolerating(pod.Spec.Tolerations, &taints[i].Taint)
		if tol == nil {
			return Decision{Verdict: EvictNow, At: now, Taint: taints[i].Taint}
		}
		if tol.TolerationSeconds == nil {
			continue
		}
		secs := min(max(*tol.TolerationSeconds, 0), maxTolerationSeconds)
		start := taints[i].Since
		if bound.After(start) {
			start = bound
		}
		if start.After(now) {
			start = now
		}
		at := start.Add(time.Duration(secs) * time.Second)
		if d.Verdict == Stay || at.Before(d.At) {
			d = Decision{Verdict: EvictAt, At: at, Taint: taints[i].Taint}
		}
	}
	return d
}

// BoundAt is when pod was bound to its node: the last transition of its
// PodScheduled=True condition (the API server sets it on binding), else its
// creation (a pod created with spec.nodeName is bound from the start).
func BoundAt(pod *corev1.Pod) time.Time {
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	return pod.CreationTimestamp.Time
}

func firstTolerating(tolerations []corev1.Toleration, taint *corev1.Taint) *corev1.Toleration {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(klog.Background(), taint, false) {
			return &tolerations[i]
		}
	}
	return nil
}
