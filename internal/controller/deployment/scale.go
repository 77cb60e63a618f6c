package deployment

import (
	"math"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
)

// scalingEvent reports whether spec.replicas changed since the active
// ReplicaSets were last sized: one of them records another desired count.
func (s *syncer) scalingEvent() bool {
	for _, rs := range active(s.all()) {
		if n, ok := annotatedInt(rs, DesiredReplicasAnnotation); ok && n != s.want {
			return true
		}
	}
	return false
}

// scale resizes the ReplicaSets to a new spec.replicas without rolling
// out: a lone active (or else the newest) ReplicaSet takes all of it; a
// saturated new ReplicaSet leaves the old ones at 0; during a rolling
// update the change is shared in proportion to each active ReplicaSet's
// size (see share).
func (s *syncer) scale() {
	if rs := s.activeOrLatest(); rs != nil {
		s.resize(rs, s.want)
		return
	}
	if s.saturated() {
		for _, rs := range active(s.olds) {
			s.resize(rs, 0)
		}
		return
	}
	if !rolling(s.d) {
		return
	}
	sets := active(s.all())
	var allowed int32
	if s.want > 0 {
		allowed = s.want + s.surge
	}
	toAdd := allowed - sumReplicas(sets)
	// Growing favours the biggest then newest ReplicaSets, shrinking the
	// biggest then oldest.
	sort.SliceStable(sets, func(i, j int) bool {
		a, b := replicas(sets[i].Spec.Replicas), replicas(sets[j].Spec.Replicas)
		if a != b {
			return a > b
		}
		if toAdd > 0 {
			return olderRS(sets[j], sets[i])
		}
		return olderRS(sets[i], sets[j])
	})
	sizes := make([]int32, len(sets))
	var added int32
	for i, rs := range sets {
		sizes[i] = replicas(rs.Spec.Replicas)
		if toAdd != 0 {
			n := s.share(rs, toAdd, added)
			sizes[i] += n
			added += n
		}
	}
	for i, rs := range sets {
		if i == 0 && toAdd != 0 {
			// Rounding leftovers go to the biggest.
			sizes[0] = max(sizes[0]+toAdd-added, 0)
		}
		s.setSize(rs, sizes[i])
	}
}

// share is rs's part of toAdd (negative: to remove), given that added
// has been handed out already: rs keeps its proportion of spec.replicas +
// maxSurge as it was when rs was last sized (its max-replicas annotation,
// else the Deployment's status.replicas), rounded half up, within what is
// left to hand out.
func (s *syncer) share(rs *appsv1.ReplicaSet, toAdd, added int32) int32 {
	cur := replicas(rs.Spec.Replicas)
	if cur == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	var frac int32
	switch {
	case s.want == 0:
		frac = -cur
	default:
		was, ok := annotatedInt(rs, MaxReplicasAnnotation)
		if !ok {
			was = s.d.Status.Replicas
		}
		if was > 0 {
			frac = int32(math.Floor(float64(cur)*float64(s.want+s.surge)/float64(was)+0.5)) - cur
		}
	}
	left := toAdd - added
	if toAdd > 0 {
		return min(frac, left)
	}
	return max(frac, left)
}

// activeOrLatest returns the ReplicaSet that takes a whole scaling: the
// only active one; with none active, the new one or else the newest old
// one; nil when several are active or there is none.
func (s *syncer) activeOrLatest() *appsv1.ReplicaSet {
	act := active(s.all())
	switch {
	case len(act) == 1:
		return act[0]
	case len(act) > 1:
		return nil
	case s.newRS != nil:
		return s.newRS
	case len(s.olds) > 0:
		return s.olds[len(s.olds)-1]
	}
	return nil
}

// saturated reports whether the new ReplicaSet has all of spec.replicas,
// sized for it, and all available.
func (s *syncer) saturated() bool {
	rs := s.newRS
	if rs == nil {
		return false
	}
	desired, ok := annotatedInt(rs, DesiredReplicasAnnotation)
	return ok && desired == s.want && replicas(rs.Spec.Replicas) == s.want && rs.Status.AvailableReplicas == s.want
}

func active(sets []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range sets {
		if replicas(rs.Spec.Replicas) > 0 {
			out = append(out, rs)
		}
	}
	return out
}

func annotatedInt(rs *appsv1.ReplicaSet, key string) (int32, bool) {
	v, ok := rs.Annotations[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(n), true
}
