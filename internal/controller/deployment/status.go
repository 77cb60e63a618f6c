package deployment

import (
	"fmt"
	"math"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pausedCondition records a pause or a resume in the Progressing
// condition (Unknown, DeploymentPaused / DeploymentResumed), unless the
// rollout has already timed out.
func (s *syncer) pausedCondition() {
	if !hasProgressDeadline(s.d) {
		return
	}
	cur := findCondition(s.d.Status.Conditions, appsv1.DeploymentProgressing)
	if cur != nil && cur.Reason == ReasonTimedOut {
		return
	}
	paused := cur != nil && cur.Reason == ReasonPaused
	switch {
	case s.d.Spec.Paused && !paused:
		setCondition(&s.d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, ReasonPaused, "Deployment is paused", s.now))
	case !s.d.Spec.Paused && paused:
		setCondition(&s.d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, ReasonResumed, "Deployment is resumed", s.now))
	}
}

// plainStatus sets the counts and the Available condition (scaling, pause
// and deletion: no progress is judged).
func (s *syncer) plainStatus() {
	s.d.Status = s.counts()
}

// counts is the status the ReplicaSets add up to, with the Available
// condition: True once availableReplicas ≥ spec.replicas − maxUnavailable.
// The other conditions are kept.
func (s *syncer) counts() appsv1.DeploymentStatus {
	all := s.all()
	st := appsv1.DeploymentStatus{
		ObservedGeneration: s.d.Generation,
		CollisionCount:     s.d.Status.CollisionCount,
		Conditions:         append([]appsv1.DeploymentCondition(nil), s.d.Status.Conditions...),
	}
	for _, rs := range all {
		st.Replicas += rs.Status.Replicas
		st.ReadyReplicas += rs.Status.ReadyReplicas
		st.AvailableReplicas += rs.Status.AvailableReplicas
		if t := rs.Status.TerminatingReplicas; t != nil {
			st.TerminatingReplicas = ptrAdd(st.TerminatingReplicas, *t)
		}
	}
	if s.newRS != nil {
		st.UpdatedReplicas = s.newRS.Status.Replicas
	}
	// Upstream counts the unavailable against the ReplicaSets' sizes, not
	// spec.replicas.
	st.UnavailableReplicas = max(sumReplicas(all)-st.AvailableReplicas, 0)
	if st.AvailableReplicas >= s.want-MaxUnavailable(s.d) {
		setCondition(&st, newCondition(appsv1.DeploymentAvailable, corev1.ConditionTrue, ReasonMinimumAvailable, "Deployment has minimum availability.", s.now))
	} else {
		setCondition(&st, newCondition(appsv1.DeploymentAvailable, corev1.ConditionFalse, ReasonMinimumUnavailable, "Deployment does not have minimum availability.", s.now))
	}
	return st
}

// rolloutStatus sets the counts and judges the rollout's progress in the
// Progressing condition, as `kubectl rollout status` reads it: True
// NewReplicaSetAvailable when complete; True ReplicaSetUpdated whenever
// pods were updated, old ones went, or more became ready or available
// since the last status; False ProgressDeadlineExceeded when nothing moved
// for progressDeadlineSeconds. It also mirrors a ReplicaFailure condition
// of the ReplicaSets.
func (s *syncer) rolloutStatus() {
	st := s.counts()
	if !hasProgressDeadline(s.d) {
		removeCondition(&st, appsv1.DeploymentProgressing)
	}
	cur := findCondition(st.Conditions, appsv1.DeploymentProgressing)
	done := st.Replicas == st.UpdatedReplicas && cur != nil && cur.Reason == ReasonNewRSAvailable
	subject := fmt.Sprintf("Deployment %q", s.d.Name)
	if s.newRS != nil {
		subject = fmt.Sprintf("ReplicaSet %q", s.newRS.Name)
	}
	if hasProgressDeadline(s.d) && !done {
		switch {
		case complete(s.d, &st):
			setCondition(&st, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonNewRSAvailable, subject+" has successfully progressed.", s.now))
		case progressed(&s.orig.Status, &st):
			c := newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonRSUpdated, subject+" is progressing.", s.now)
			// Unlike other conditions, progress renews lastUpdateTime
			// even when the reason stays.
			if cur != nil {
				if cur.Status == corev1.ConditionTrue {
					c.LastTransitionTime = cur.LastTransitionTime
				}
				removeCondition(&st, appsv1.DeploymentProgressing)
			}
			setCondition(&st, c)
		case timedOut(s.d, &st, s.now):
			setCondition(&st, newCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, ReasonTimedOut, subject+" has timed out progressing.", s.now))
		}
	}
	if f := s.replicaFailure(); f != nil {
		setCondition(&st, *f)
	} else {
		removeCondition(&st, appsv1.DeploymentReplicaFailure)
	}
	s.d.Status = st
	s.requeue = stallCheck(s.d, &st, s.now)
}

// replicaFailure is the first ReplicaFailure=True condition among the new
// and then the old ReplicaSets, as a Deployment condition.
func (s *syncer) replicaFailure() *appsv1.DeploymentCondition {
	sets := s.olds
	if s.newRS != nil {
		sets = append([]*appsv1.ReplicaSet{s.newRS}, s.olds...)
	}
	for _, rs := range sets {
		for _, c := range rs.Status.Conditions {
			if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue {
				return &appsv1.DeploymentCondition{
					Type: appsv1.DeploymentReplicaFailure, Status: c.Status, Reason: c.Reason, Message: c.Message,
					LastUpdateTime: c.LastTransitionTime, LastTransitionTime: c.LastTransitionTime,
				}
			}
		}
	}
	return nil
}

// complete reports whether st shows the rollout of d's current spec done:
// every replica updated and available, no old one left.
func complete(d *appsv1.Deployment, st *appsv1.DeploymentStatus) bool {
	want := replicas(d.Spec.Replicas)
	return st.UpdatedReplicas == want && st.Replicas == want && st.AvailableReplicas == want && st.ObservedGeneration >= d.Generation
}

// progressed reports whether st moved since old: more updated, fewer old,
// more ready or more available replicas.
func progressed(old, st *appsv1.DeploymentStatus) bool {
	return st.UpdatedReplicas > old.UpdatedReplicas ||
		st.Replicas-st.UpdatedReplicas < old.Replicas-old.UpdatedReplicas ||
		st.ReadyReplicas > old.ReadyReplicas ||
		st.AvailableReplicas > old.AvailableReplicas
}

// timedOut reports whether the Progressing condition in st was last
// renewed more than progressDeadlineSeconds before now.
func timedOut(d *appsv1.Deployment, st *appsv1.DeploymentStatus, now time.Time) bool {
	c := findCondition(st.Conditions, appsv1.DeploymentProgressing)
	if !hasProgressDeadline(d) || c == nil || c.Reason == ReasonNewRSAvailable {
		return false
	}
	if c.Reason == ReasonTimedOut {
		return true
	}
	return c.LastUpdateTime.Add(deadline(d)).Before(now)
}

// stallCheck is when to look at a rollout again to see whether it timed
// out: just past the deadline of its Progressing condition; 0 when it is
// complete, timed out already or has no deadline.
func stallCheck(d *appsv1.Deployment, st *appsv1.DeploymentStatus, now time.Time) time.Duration {
	c := findCondition(st.Conditions, appsv1.DeploymentProgressing)
	if !hasProgressDeadline(d) || c == nil || c.Reason == ReasonTimedOut || c.Reason == ReasonNewRSAvailable || complete(d, st) {
		return 0
	}
	return max(c.LastUpdateTime.Add(deadline(d)).Sub(now), 0) + time.Second
}

func hasProgressDeadline(d *appsv1.Deployment) bool {
	return d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds != math.MaxInt32
}

func deadline(d *appsv1.Deployment) time.Duration {
	return time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second
}

func newCondition(t appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, msg string, now time.Time) appsv1.DeploymentCondition {
	ts := metav1.NewTime(now)
	return appsv1.DeploymentCondition{Type: t, Status: status, Reason: reason, Message: msg, LastUpdateTime: ts, LastTransitionTime: ts}
}

// setCondition sets c in st the upstream way: a condition of that type
// with the same status and reason is left alone (message and times
// included); with the same status its lastTransitionTime is kept.
func setCondition(st *appsv1.DeploymentStatus, c appsv1.DeploymentCondition) {
	cur := findCondition(st.Conditions, c.Type)
	if cur != nil && cur.Status == c.Status && cur.Reason == c.Reason {
		return
	}
	if cur != nil && cur.Status == c.Status {
		c.LastTransitionTime = cur.LastTransitionTime
	}
	removeCondition(st, c.Type)
	st.Conditions = append(st.Conditions, c)
}

func removeCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) {
	var out []appsv1.DeploymentCondition
	for _, c := range st.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	st.Conditions = out
}

func findCondition(cs []appsv1.DeploymentCondition, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

func ptrAdd(p *int32, n int32) *int32 {
	v := n
	if p != nil {
		v += *p
	}
	return &v
}
