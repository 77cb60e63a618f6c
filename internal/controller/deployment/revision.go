package deployment

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/controller/replicaset"
)

// notCopied are the Deployment annotations its ReplicaSets do not inherit.
var notCopied = map[string]bool{
	corev1.LastAppliedConfigAnnotation:  true,
	RevisionAnnotation:                  true,
	RevisionHistoryAnnotation:           true,
	DesiredReplicasAnnotation:           true,
	MaxReplicasAnnotation:               true,
	"deprecated.deployment.rollback.to": true,
}

// SameTemplate reports whether two pod templates are equal but for the
// pod-template-hash label: whether a ReplicaSet runs a Deployment's
// current template.
func SameTemplate(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return apiequality.Semantic.DeepEqual(a, b)
}

// NewReplicaSet is the ReplicaSet a Deployment's current template runs
// in: named <deployment>-<hash> with hash = replicaset.TemplateHash of
// the template and status.collisionCount, the hash added to the
// template's labels and the selector as pod-template-hash, controlled by
// the Deployment, with its minReadySeconds and no replicas yet.
func NewReplicaSet(d *appsv1.Deployment) *appsv1.ReplicaSet {
	tmpl := d.Spec.Template.DeepCopy()
	hash := replicaset.TemplateHash(&d.Spec.Template, d.Status.CollisionCount)
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	tmpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	sel := d.Spec.Selector.DeepCopy()
	if sel.MatchLabels == nil {
		sel.MatchLabels = map[string]string{}
	}
	sel.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	rsLabels := make(map[string]string, len(tmpl.Labels))
	for k, v := range tmpl.Labels {
		rsLabels[k] = v
	}
	var zero int32
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:            d.Name + "-" + hash,
			Namespace:       d.Namespace,
			Labels:          rsLabels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, Kind)},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        &zero,
			MinReadySeconds: d.Spec.MinReadySeconds,
			Selector:        sel,
			Template:        *tmpl,
		},
	}
}

// findNew brings the new ReplicaSet up to date — annotations, revision,
// minReadySeconds — and the Deployment's revision with it; with create it
// makes one if there is none (sized by newReplicas).
func (s *syncer) findNew(create bool) {
	revision := strconv.FormatInt(maxRevision(s.olds)+1, 10)
	if rs := s.newRS; rs != nil {
		s.annotateNew(rs, revision, true)
		rs.Spec.MinReadySeconds = s.d.Spec.MinReadySeconds
		setAnnotation(&s.d.ObjectMeta, RevisionAnnotation, rs.Annotations[RevisionAnnotation])
		if hasProgressDeadline(s.d) && findCondition(s.d.Status.Conditions, appsv1.DeploymentProgressing) == nil {
			setCondition(&s.d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonFoundNewRS,
				fmt.Sprintf("Found new replica set %q", rs.Name), s.now))
		}
		return
	}
	if !create {
		return
	}
	rs := NewReplicaSet(s.d)
	s.newRS, s.created = rs, true
	n := s.newReplicas()
	rs.Spec.Replicas = &n
	s.annotateNew(rs, revision, false)
	setAnnotation(&s.d.ObjectMeta, RevisionAnnotation, revision)
	if hasProgressDeadline(s.d) {
		setCondition(&s.d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonNewRSCreated,
			fmt.Sprintf("Created new replica set %q", rs.Name), s.now))
	}
}

// annotateNew copies the Deployment's annotations to its new ReplicaSet
// (but notCopied), raises its revision to revision if lower — keeping the
// one it had in the revision history when it had one (a rollback to an
// older template) — and, for a ReplicaSet being created, records the
// replica annotations.
func (s *syncer) annotateNew(rs *appsv1.ReplicaSet, revision string, exists bool) {
	for k, v := range s.d.Annotations {
		if !notCopied[k] && rs.Annotations[k] != v {
			setAnnotation(&rs.ObjectMeta, k, v)
		}
	}
	old, had := rs.Annotations[RevisionAnnotation]
	oldN, err := strconv.ParseInt(old, 10, 64)
	if err != nil && old != "" {
		return // not ours to fix
	}
	newN, _ := strconv.ParseInt(revision, 10, 64)
	if oldN < newN {
		setAnnotation(&rs.ObjectMeta, RevisionAnnotation, revision)
		if had && old != "" {
			rs.Annotations[RevisionHistoryAnnotation] = appendHistory(rs.Annotations[RevisionHistoryAnnotation], old)
		}
	}
	if !exists {
		setAnnotation(&rs.ObjectMeta, DesiredReplicasAnnotation, fmt.Sprint(s.want))
		setAnnotation(&rs.ObjectMeta, MaxReplicasAnnotation, fmt.Sprint(s.want+MaxSurge(s.d)))
	}
}

// appendHistory adds rev to a comma-separated history, dropping the
// oldest entries to stay within maxRevisionHistoryChars.
func appendHistory(history, rev string) string {
	var revs []string
	if history != "" {
		revs = strings.Split(history, ",")
	}
	revs = append(revs, rev)
	for len(revs) > 1 && len(strings.Join(revs, ",")) > maxRevisionHistoryChars {
		revs = revs[1:]
	}
	return strings.Join(revs, ",")
}

// cleanup deletes the oldest old ReplicaSets beyond
// spec.revisionHistoryLimit that are empty (no replicas wanted or
// reported), settled (status observed their generation) and not already
// being deleted.
func (s *syncer) cleanup() {
	limit := s.d.Spec.RevisionHistoryLimit
	if limit == nil {
		return
	}
	var alive []*appsv1.ReplicaSet
	for _, rs := range s.olds {
		if rs.DeletionTimestamp == nil {
			alive = append(alive, rs)
		}
	}
	extra := len(alive) - int(*limit)
	if extra <= 0 {
		return
	}
	sort.SliceStable(alive, func(i, j int) bool {
		ri, rj := revisionOf(alive[i]), revisionOf(alive[j])
		if ri != rj {
			return ri < rj
		}
		return olderRS(alive[i], alive[j])
	})
	for _, rs := range alive[:extra] {
		c := s.cached[rs]
		if c.Status.Replicas != 0 || replicas(c.Spec.Replicas) != 0 || replicas(rs.Spec.Replicas) != 0 ||
			c.Generation > c.Status.ObservedGeneration {
			continue
		}
		s.deletes = append(s.deletes, rs)
	}
}

func revisionOf(rs *appsv1.ReplicaSet) int64 {
	n, err := strconv.ParseInt(rs.Annotations[RevisionAnnotation], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

func maxRevision(sets []*appsv1.ReplicaSet) int64 {
	var m int64
	for _, rs := range sets {
		m = max(m, revisionOf(rs))
	}
	return m
}
