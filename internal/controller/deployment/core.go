package deployment

import (
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeplane/nodeplane/internal/controller/ownership"
)

// Names the controller writes, as upstream.
const (
	// ControllerName is the --controllers name and the event source.
	ControllerName = "deployment-controller"

	// RevisionAnnotation numbers a ReplicaSet among its Deployment's (1, 2,
	// …); the Deployment carries its new ReplicaSet's number.
	RevisionAnnotation = "deployment.kubernetes.io/revision"
	// RevisionHistoryAnnotation lists, comma-separated, the earlier
	// revisions a rolled-back-to ReplicaSet had.
	RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	// DesiredReplicasAnnotation and MaxReplicasAnnotation record
	// spec.replicas and spec.replicas + maxSurge at the ReplicaSet's last
	// scaling; they detect a scaling of the Deployment and size the
	// proportional share of each ReplicaSet.
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	MaxReplicasAnnotation     = "deployment.kubernetes.io/max-replicas"

	// Reasons of the Progressing condition.
	ReasonNewRSCreated   = "NewReplicaSetCreated"
	ReasonFoundNewRS     = "FoundNewReplicaSet"
	ReasonRSUpdated      = "ReplicaSetUpdated"
	ReasonNewRSAvailable = "NewReplicaSetAvailable"
	ReasonTimedOut       = "ProgressDeadlineExceeded"
	ReasonPaused         = "DeploymentPaused"
	ReasonResumed        = "DeploymentResumed"
	// ReasonRSCreateError is the Progressing reason and the event reason
	// of a ReplicaSet the API server refused.
	ReasonRSCreateError = "ReplicaSetCreateError"
	// Reasons of the Available condition.
	ReasonMinimumAvailable   = "MinimumReplicasAvailable"
	ReasonMinimumUnavailable = "MinimumReplicasUnavailable"

	// Event reasons.
	EventScaling      = "ScalingReplicaSet"
	EventSelectingAll = "SelectingAll"

	// maxRevisionHistoryChars bounds RevisionHistoryAnnotation.
	maxRevisionHistoryChars = 2000
)

// Kind is the GroupVersionKind of the controller references to a Deployment.
var Kind = appsv1.SchemeGroupVersion.WithKind("Deployment")

// Input is what one sync of a Deployment sees.
type Input struct {
	Deployment *appsv1.Deployment
	// ReplicaSets are the namespace's ReplicaSets the Deployment controls
	// or that have no controller; others are ignored.
	ReplicaSets []*appsv1.ReplicaSet
	// Pods are the pods of the Deployment's ReplicaSets by ReplicaSet UID.
	// Only Recreate reads them (it waits for the old pods to be gone).
	Pods map[types.UID][]*corev1.Pod
	Now  time.Time
}

// Event is an event to record on the Deployment.
type Event struct {
	Type, Reason, Message string
}

// Write is a ReplicaSet to create or update, and the event to record on
// the Deployment once the write succeeds (nil: none).
type Write struct {
	RS    *appsv1.ReplicaSet
	Event *Event
}

// Plan is what one sync does, in this order: record Events; patch Adopt
// and Release; create Create (stop if that fails — see CreateFailed and
// Collided); update Updates; delete Delete; write Deployment with
// UpdateStatus (its status and the revision annotation); sync again after
// RequeueAfter when positive. The shell stops at the first failed write
// and retries the whole sync with back-off.
type Plan struct {
	Events  []Event
	Adopt   []*appsv1.ReplicaSet
	Release []*appsv1.ReplicaSet
	Create  *Write
	Updates []Write
	// Delete are old, empty ReplicaSets beyond spec.revisionHistoryLimit.
	Delete []*appsv1.ReplicaSet
	// Deployment is the Deployment with its new status and annotations;
	// nil when neither changed.
	Deployment *appsv1.Deployment
	// RequeueAfter is when to look again although nothing changes: when a
	// stalled rollout's progress deadline passes.
	RequeueAfter time.Duration
}

// Decide plans one sync of a Deployment. It returns an error only for a
// selector or rolling-update parameter that does not parse (validation
// refuses both).
func Decide(in Input) (Plan, error) {
	d := in.Deployment
	var p Plan
	if d.Spec.Selector == nil || (len(d.Spec.Selector.MatchLabels) == 0 && len(d.Spec.Selector.MatchExpressions) == 0) {
		p.Events = append(p.Events, Event{corev1.EventTypeWarning, EventSelectingAll, "This deployment is selecting all pods. A non-empty selector is required."})
		if d.Status.ObservedGeneration < d.Generation {
			p.Deployment = d.DeepCopy()
			p.Deployment.Status.ObservedGeneration = d.Generation
		}
		return p, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return p, fmt.Errorf("deployment %s/%s selector: %w", d.Namespace, d.Name, err)
	}
	surge, unavailable, err := Fenceposts(d)
	if err != nil {
		return p, fmt.Errorf("deployment %s/%s rolling update: %w", d.Namespace, d.Name, err)
	}
	claimed := ownership.Claim(d, sel, in.ReplicaSets)
	p.Adopt, p.Release = claimed.Adopt, claimed.Release

	s := newSyncer(in, append(append([]*appsv1.ReplicaSet(nil), claimed.Owned...), claimed.Adopt...), surge, unavailable)
	switch {
	case d.DeletionTimestamp != nil:
		s.findNew(false)
		s.plainStatus()
	case d.Spec.Paused:
		s.pausedCondition()
		s.findNew(false)
		s.scale()
		s.cleanup()
		s.plainStatus()
	default:
		s.pausedCondition()
		switch {
		case s.scalingEvent():
			s.findNew(false)
			s.scale()
			s.plainStatus()
		case d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType:
			s.recreate()
		default:
			s.rolling()
		}
	}
	s.finish(&p)
	return p, nil
}

// syncer is the working state of one Decide: copies of the Deployment and
// of its ReplicaSets, changed step by step as upstream's sync changes the
// objects through the API, then compared with the originals.
type syncer struct {
	in   Input
	orig *appsv1.Deployment
	d    *appsv1.Deployment
	now  time.Time
	want int32
	// surge and unavailable are the resolved fenceposts (0 for Recreate);
	// see Fenceposts, MaxUnavailable.
	surge, unavailable int32

	newRS   *appsv1.ReplicaSet
	created bool
	// olds are the other ReplicaSets, oldest first.
	olds   []*appsv1.ReplicaSet
	cached map[*appsv1.ReplicaSet]*appsv1.ReplicaSet
	// deletes are old ReplicaSets to delete (cleanup).
	deletes []*appsv1.ReplicaSet
	// requeue: see Plan.RequeueAfter.
	requeue time.Duration
}

func newSyncer(in Input, owned []*appsv1.ReplicaSet, surge, unavailable int32) *syncer {
	d := in.Deployment
	s := &syncer{
		in: in, orig: d, d: d.DeepCopy(), now: in.Now, want: replicas(d.Spec.Replicas),
		surge: surge, unavailable: unavailable,
		cached: map[*appsv1.ReplicaSet]*appsv1.ReplicaSet{},
	}
	sort.SliceStable(owned, func(i, j int) bool { return olderRS(owned[i], owned[j]) })
	for _, rs := range owned {
		w := rs.DeepCopy()
		s.cached[w] = rs
		if s.newRS == nil && SameTemplate(&d.Spec.Template, &rs.Spec.Template) {
			// The oldest match wins if several do (upstream: after an
			// upgrade there may be more than one).
			s.newRS = w
			continue
		}
		s.olds = append(s.olds, w)
	}
	return s
}

// all returns the old ReplicaSets and the new one, if any.
func (s *syncer) all() []*appsv1.ReplicaSet {
	if s.newRS == nil {
		return s.olds
	}
	return append(append([]*appsv1.ReplicaSet(nil), s.olds...), s.newRS)
}

// resize sets rs's size to n, as upstream's scaleReplicaSetAndRecordEvent:
// nothing when it has that size already. It reports whether it changed.
func (s *syncer) resize(rs *appsv1.ReplicaSet, n int32) bool {
	if replicas(rs.Spec.Replicas) == n {
		return false
	}
	return s.setSize(rs, n)
}

// setSize sets rs's size to n and its replica annotations (upstream's
// scaleReplicaSet); it reports whether the size changed.
func (s *syncer) setSize(rs *appsv1.ReplicaSet, n int32) bool {
	changed := replicas(rs.Spec.Replicas) != n
	rs.Spec.Replicas = &n
	setAnnotation(&rs.ObjectMeta, DesiredReplicasAnnotation, fmt.Sprint(s.want))
	setAnnotation(&rs.ObjectMeta, MaxReplicasAnnotation, fmt.Sprint(s.want+MaxSurge(s.d)))
	return changed
}

// finish turns the working state into the plan.
func (s *syncer) finish(p *Plan) {
	if s.newRS != nil && s.created {
		p.Create = &Write{RS: s.newRS}
		if n := replicas(s.newRS.Spec.Replicas); n > 0 {
			p.Create.Event = scaledEvent(s.newRS.Name, 0, n)
		}
	}
	ordered := s.olds
	if s.newRS != nil && !s.created {
		ordered = append([]*appsv1.ReplicaSet{s.newRS}, s.olds...)
	}
	for _, rs := range ordered {
		c := s.cached[rs]
		if replicas(rs.Spec.Replicas) == replicas(c.Spec.Replicas) && rs.Spec.MinReadySeconds == c.Spec.MinReadySeconds &&
			apiequality.Semantic.DeepEqual(rs.Annotations, c.Annotations) {
			continue
		}
		w := Write{RS: rs}
		if from, to := replicas(c.Spec.Replicas), replicas(rs.Spec.Replicas); from != to {
			w.Event = scaledEvent(rs.Name, from, to)
		}
		p.Updates = append(p.Updates, w)
	}
	if !apiequality.Semantic.DeepEqual(s.d.Status, s.orig.Status) || !apiequality.Semantic.DeepEqual(s.d.Annotations, s.orig.Annotations) {
		p.Deployment = s.d
	}
	p.RequeueAfter = s.requeue
	for _, rs := range s.deletes {
		p.Delete = append(p.Delete, s.cached[rs])
	}
}

func scaledEvent(name string, from, to int32) *Event {
	dir := "up"
	if to < from {
		dir = "down"
	}
	return &Event{corev1.EventTypeNormal, EventScaling, fmt.Sprintf("Scaled %s replica set %s from %d to %d", dir, name, from, to)}
}

// CreateFailed returns d with the Progressing condition a refused
// ReplicaSet leaves (False, ReplicaSetCreateError) and the warning event to
// record; the condition only when d has a progress deadline.
func CreateFailed(d *appsv1.Deployment, rsName string, err error, now time.Time) (*appsv1.Deployment, Event) {
	msg := fmt.Sprintf("Failed to create new replica set %q: %v", rsName, err)
	out := d.DeepCopy()
	if hasProgressDeadline(d) {
		setCondition(&out.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, ReasonRSCreateError, msg, now))
	}
	return out, Event{corev1.EventTypeWarning, ReasonRSCreateError, msg}
}

// Collided returns d with status.collisionCount one higher: its new
// ReplicaSet's name is taken by one with another template, so the next
// sync hashes the template with the new count.
func Collided(d *appsv1.Deployment) *appsv1.Deployment {
	out := d.DeepCopy()
	var n int32
	if out.Status.CollisionCount != nil {
		n = *out.Status.CollisionCount
	}
	n++
	out.Status.CollisionCount = &n
	return out
}

// olderRS orders ReplicaSets by creation, then name.
func olderRS(a, b *appsv1.ReplicaSet) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

func setAnnotation(m *metav1.ObjectMeta, k, v string) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[k] = v
}
