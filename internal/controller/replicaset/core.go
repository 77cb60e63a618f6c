package replicaset

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/nodeplane/nodeplane/internal/controller/ownership"
)

// Names the controller uses.
const (
	// ControllerName is the --controllers name and the event source.
	ControllerName = "replicaset-controller"

	// Event reasons, as upstream.
	ReasonSuccessfulCreate = ownership.ReasonSuccessfulCreate
	ReasonFailedCreate     = ownership.ReasonFailedCreate
	ReasonSuccessfulDelete = ownership.ReasonSuccessfulDelete
	ReasonFailedDelete     = ownership.ReasonFailedDelete

	// DefaultBurstReplicas caps the pods one sync creates or deletes
	// (upstream's burstReplicas).
	DefaultBurstReplicas = 500
)

// Kind is the GroupVersionKind the controller references its pods' owner by.
var Kind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")

// Input is what one sync of a ReplicaSet sees.
type Input struct {
	RS *appsv1.ReplicaSet
	// Pods are the namespace's pods the ReplicaSet controls or that have
	// no controller; others are ignored.
	Pods []*corev1.Pod
	// Related are the active pods of sibling ReplicaSets (same controller
	// owner); they only rank victims by how crowded their node is.
	Related []*corev1.Pod
	// Settled is true when the creations and deletions of earlier syncs
	// have been observed (Expectations.Satisfied): only then is Pods
	// trusted to count replicas.
	Settled bool
	// BurstReplicas caps Create and Delete (DefaultBurstReplicas when ≤ 0).
	BurstReplicas int
	Now           time.Time
}

// Plan is what one sync does, in this order: patch Adopt and Release,
// create Create pods from the template, delete Delete, write Status (with
// the ReplicaFailure condition set by WithFailure when a create or delete
// failed), and sync again after RequeueAfter if it is positive.
type Plan struct {
	Adopt   []*corev1.Pod
	Release []*corev1.Pod
	Create  int
	Delete  []*corev1.Pod
	// Status is computed from the pods as observed, before the plan's
	// creates and deletes (they show in the next sync), as upstream.
	Status appsv1.ReplicaSetStatus
	// RequeueAfter is when the first ready pod becomes available
	// (minReadySeconds), 0 if none is waiting.
	RequeueAfter time.Duration
}

// Decide plans one sync. It returns an error only for a selector that does
// not parse (refused by validation; nothing to do until it is fixed).
func Decide(in Input) (Plan, error) {
	rs := in.RS
	sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		return Plan{}, fmt.Errorf("replica set %s/%s selector: %w", rs.Namespace, rs.Name, err)
	}
	var active, terminating []*corev1.Pod
	for _, p := range in.Pods {
		switch {
		case PodActive(p):
			active = append(active, p)
		case PodTerminating(p) && controlledBy(p, rs):
			terminating = append(terminating, p)
		}
	}
	claimed := ownership.Claim(rs, sel, active)
	var p Plan
	p.Adopt, p.Release = claimed.Adopt, claimed.Release
	owned := append(append([]*corev1.Pod(nil), claimed.Owned...), claimed.Adopt...)

	burst := in.BurstReplicas
	if burst <= 0 {
		burst = DefaultBurstReplicas
	}
	if in.Settled && rs.DeletionTimestamp == nil {
		switch diff := len(owned) - int(replicas(rs)); {
		case diff < 0:
			p.Create = min(-diff, burst)
		case diff > 0:
			p.Delete = Victims(owned, in.Related, min(diff, burst))
		}
	}
	p.Status, p.RequeueAfter = status(rs, owned, len(terminating), in.Now)
	return p, nil
}

// status computes the ReplicaSet's status from its active owned pods and
// how many of its pods are terminating, keeping its conditions.
func status(rs *appsv1.ReplicaSet, owned []*corev1.Pod, terminating int, now time.Time) (appsv1.ReplicaSetStatus, time.Duration) {
	st := appsv1.ReplicaSetStatus{
		Replicas:            int32(len(owned)),
		ObservedGeneration:  rs.Generation,
		TerminatingReplicas: ptr.To(int32(terminating)),
		Conditions:          append([]appsv1.ReplicaSetCondition(nil), rs.Status.Conditions...),
	}
	tmpl := labels.SelectorFromSet(rs.Spec.Template.Labels)
	var wake time.Duration
	for _, p := range owned {
		if tmpl.Matches(labels.Set(p.Labels)) {
			st.FullyLabeledReplicas++
		}
		wait, ready := UntilAvailable(p, rs.Spec.MinReadySeconds, now)
		if !ready {
			continue
		}
		st.ReadyReplicas++
		if wait == 0 {
			st.AvailableReplicas++
		} else if wake == 0 || wait < wake {
			wake = wait
		}
	}
	return st, wake
}

// WithFailure returns st with the ReplicaFailure condition as a sync that
// failed to create (reason FailedCreate) or delete (FailedDelete) pods
// leaves it: set with msg if it was absent; removed when reason is ""
// (the sync succeeded). An existing condition is kept as it is, as
// upstream.
func WithFailure(st appsv1.ReplicaSetStatus, reason, msg string, now time.Time) appsv1.ReplicaSetStatus {
	idx := -1
	for i, c := range st.Conditions {
		if c.Type == appsv1.ReplicaSetReplicaFailure {
			idx = i
		}
	}
	switch {
	case reason == "" && idx >= 0:
		st.Conditions = append(st.Conditions[:idx:idx], st.Conditions[idx+1:]...)
	case reason != "" && idx < 0:
		st.Conditions = append(st.Conditions, appsv1.ReplicaSetCondition{
			Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue,
			Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(now),
		})
	}
	return st
}

func replicas(rs *appsv1.ReplicaSet) int32 {
	if rs.Spec.Replicas == nil {
		return 1
	}
	return *rs.Spec.Replicas
}

func controlledBy(obj metav1.Object, owner metav1.Object) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.UID == owner.GetUID()
}
