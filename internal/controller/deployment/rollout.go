package deployment

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Fenceposts resolves a RollingUpdate Deployment's maxSurge and
// maxUnavailable against spec.replicas, as upstream: a percentage of
// maxSurge rounds up, of maxUnavailable down (25% of 10 is a surge of 3
// and 2 unavailable); maxSurge defaults to 0 and maxUnavailable to 0 when
// unset; and if both come to 0, maxUnavailable is 1 so the rollout can
// move. Recreate Deployments have neither (0, 0).
func Fenceposts(d *appsv1.Deployment) (surge, unavailable int32, err error) {
	if !rolling(d) {
		return 0, 0, nil
	}
	want := int(replicas(d.Spec.Replicas))
	zero := intstr.FromInt32(0)
	var ms, mu *intstr.IntOrString
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		ms, mu = ru.MaxSurge, ru.MaxUnavailable
	}
	if ms == nil {
		ms = &zero
	}
	if mu == nil {
		mu = &zero
	}
	s, err := intstr.GetScaledValueFromIntOrPercent(ms, want, true)
	if err != nil {
		return 0, 0, err
	}
	u, err := intstr.GetScaledValueFromIntOrPercent(mu, want, false)
	if err != nil {
		return 0, 0, err
	}
	if s == 0 && u == 0 {
		u = 1
	}
	return int32(s), int32(u), nil
}

// MaxSurge is how many pods a RollingUpdate Deployment may run above
// spec.replicas (0 for Recreate).
func MaxSurge(d *appsv1.Deployment) int32 {
	if !rolling(d) {
		return 0
	}
	s, _, _ := Fenceposts(d)
	return s
}

// MaxUnavailable is how many of spec.replicas a Deployment may be short
// of available pods during a rollout: the resolved maxUnavailable, at most
// spec.replicas; 0 for Recreate or zero replicas.
func MaxUnavailable(d *appsv1.Deployment) int32 {
	want := replicas(d.Spec.Replicas)
	if !rolling(d) || want == 0 {
		return 0
	}
	_, u, _ := Fenceposts(d)
	return min(u, want)
}

func rolling(d *appsv1.Deployment) bool {
	return d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType
}

// rolling is one step of a RollingUpdate rollout: create the new
// ReplicaSet if needed; scale it up within the surge; otherwise scale the
// old ones down within maxUnavailable; once complete, trim the history.
func (s *syncer) rolling() {
	s.findNew(true)
	if s.reconcileNew() || s.reconcileOld() {
		s.rolloutStatus()
		return
	}
	if complete(s.d, &s.d.Status) {
		s.cleanup()
	}
	s.rolloutStatus()
}

// reconcileNew scales the new ReplicaSet toward spec.replicas: down at
// once if it is above, up as far as spec.replicas + maxSurge allows.
func (s *syncer) reconcileNew() bool {
	rs := s.newRS
	if rs == nil {
		return false
	}
	cur := replicas(rs.Spec.Replicas)
	switch {
	case cur == s.want:
		return false
	case cur > s.want:
		return s.resize(rs, s.want)
	}
	return s.resize(rs, s.newReplicas())
}

// newReplicas is the size the new ReplicaSet may have now: all of
// spec.replicas for Recreate; for RollingUpdate its size plus what fits
// under spec.replicas + maxSurge counting every ReplicaSet's spec.replicas,
// at most spec.replicas.
func (s *syncer) newReplicas() int32 {
	if !rolling(s.d) {
		return s.want
	}
	cur := replicas(s.newRS.Spec.Replicas)
	total := sumReplicas(s.all())
	limit := s.want + s.surge
	if total >= limit {
		return cur
	}
	return cur + min(limit-total, s.want-cur)
}

// reconcileOld scales old ReplicaSets down as far as keeping
// spec.replicas − maxUnavailable pods available allows: first the pods that
// are not available anyway, then available ones, oldest ReplicaSet first.
func (s *syncer) reconcileOld() bool {
	if sumReplicas(s.olds) == 0 {
		return false
	}
	minAvailable := s.want - MaxUnavailable(s.d)
	newUnavailable := replicas(s.newRS.Spec.Replicas) - s.newRS.Status.AvailableReplicas
	room := sumReplicas(s.all()) - minAvailable - newUnavailable
	if room <= 0 {
		return false
	}
	cleaned := s.dropUnavailable(room)
	return cleaned+s.scaleDownOld(minAvailable) > 0
}

// dropUnavailable scales old ReplicaSets down by their pods that are not
// available, oldest first, at most limit in all.
func (s *syncer) dropUnavailable(limit int32) int32 {
	var done int32
	for _, rs := range s.olds {
		if done >= limit {
			break
		}
		cur := replicas(rs.Spec.Replicas)
		if cur == 0 || rs.Status.AvailableReplicas >= cur {
			continue
		}
		n := min(limit-done, cur-rs.Status.AvailableReplicas)
		s.resize(rs, cur-n)
		done += n
	}
	return done
}

// scaleDownOld scales old ReplicaSets down, oldest first, by as many
// available pods as exceed minAvailable across all ReplicaSets.
func (s *syncer) scaleDownOld(minAvailable int32) int32 {
	var available int32
	for _, rs := range s.all() {
		available += rs.Status.AvailableReplicas
	}
	if available <= minAvailable {
		return 0
	}
	excess := available - minAvailable
	var done int32
	for _, rs := range s.olds {
		if done >= excess {
			break
		}
		cur := replicas(rs.Spec.Replicas)
		if cur == 0 {
			continue
		}
		n := min(cur, excess-done)
		s.resize(rs, cur-n)
		done += n
	}
	return done
}

// recreate is one step of a Recreate rollout: scale every old ReplicaSet
// to 0; wait until none of their pods runs; then create the new
// ReplicaSet (or scale it) at full size.
func (s *syncer) recreate() {
	s.findNew(false)
	scaled := false
	for _, rs := range s.olds {
		if replicas(rs.Spec.Replicas) > 0 && s.resize(rs, 0) {
			scaled = true
		}
	}
	if scaled || s.oldPodsRunning() {
		s.rolloutStatus()
		return
	}
	if s.newRS == nil {
		s.findNew(true)
	}
	s.resize(s.newRS, s.want)
	if complete(s.d, &s.d.Status) {
		s.cleanup()
	}
	s.rolloutStatus()
}

// oldPodsRunning reports whether an old ReplicaSet still reports pods or
// has a pod that has not ended (terminating pods included).
func (s *syncer) oldPodsRunning() bool {
	if sumStatusReplicas(s.olds) > 0 {
		return true
	}
	for _, rs := range s.olds {
		for _, p := range s.in.Pods[rs.UID] {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				return true
			}
		}
	}
	return false
}

func sumReplicas(sets []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range sets {
		n += replicas(rs.Spec.Replicas)
	}
	return n
}

func sumStatusReplicas(sets []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range sets {
		n += rs.Status.Replicas
	}
	return n
}
