package validation_test

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/apiserver/defaults"
	"github.com/nodeplane/nodeplane/internal/apiserver/validation"
)

func TestNamespace(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(ns *corev1.Namespace)
		want   []want
	}{
		{"a defaulted namespace is valid", func(*corev1.Namespace) {}, nil},
		{"a namespace name must be a DNS label", func(ns *corev1.Namespace) { ns.Name = "team.a" }, []want{invalid("metadata.name")}},
		{"a namespace name may not be longer than 63 characters", func(ns *corev1.Namespace) { ns.Name = strings.Repeat("a", 64) }, []want{invalid("metadata.name")}},
		{"a namespace may not itself have a namespace", func(ns *corev1.Namespace) { ns.Namespace = "default" }, []want{forbidden("metadata.namespace")}},
		{"a spec finalizer must be a qualified name", func(ns *corev1.Namespace) {
			ns.Spec.Finalizers = append(ns.Spec.Finalizers, "bad name")
		}, []want{invalid("spec.finalizers"), invalid("spec.finalizers")}},
		{"an unprefixed spec finalizer other than kubernetes is rejected", func(ns *corev1.Namespace) {
			ns.Spec.Finalizers = append(ns.Spec.Finalizers, "mine")
		}, []want{invalid("spec.finalizers")}},
		{"a prefixed spec finalizer is valid", func(ns *corev1.Namespace) {
			ns.Spec.Finalizers = append(ns.Spec.Finalizers, "example.com/cleanup")
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}
			defaults.NamespaceForCreate(ns)
			tt.mutate(ns)
			checkErrs(t, validation.Namespace(ns), tt.want...)
		})
	}
}

func TestNamespaceStatusUpdate(t *testing.T) {
	tests := []struct {
		name     string
		deleting bool
		phase    corev1.NamespacePhase
		want     []want
	}{
		{"a live namespace is Active", false, corev1.NamespaceActive, nil},
		{"a live namespace may not be Terminating", false, corev1.NamespaceTerminating, []want{invalid("status.Phase")}},
		{"a deleted namespace is Terminating", true, corev1.NamespaceTerminating, nil},
		{"a deleted namespace may not be Active", true, corev1.NamespaceActive, []want{invalid("status.Phase")}},
		{"an unknown phase is rejected", false, "Sleeping", []want{invalid("status.Phase")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", ResourceVersion: "3"}}
			if tt.deleting {
				old.DeletionTimestamp = &metav1.Time{Time: time.Unix(1000, 0)}
				old.DeletionGracePeriodSeconds = ptr(int64(0))
			}
			ns := old.DeepCopy()
			ns.Status.Phase = tt.phase
			checkErrs(t, validation.NamespaceStatusUpdate(ns, old), tt.want...)
		})
	}
}

func TestNamespaceUpdateKeepsNameImmutable(t *testing.T) {
	old := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", ResourceVersion: "3"}}
	ns := old.DeepCopy()
	ns.Name = "team-b"
	checkErrs(t, validation.NamespaceUpdate(ns, old), invalid("metadata.name"))
}

func TestLease(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(l *coordinationv1.Lease)
		want   []want
	}{
		{"a node heartbeat lease is valid", func(*coordinationv1.Lease) {}, nil},
		{"a lease name must be a DNS subdomain", func(l *coordinationv1.Lease) { l.Name = "Node_1" }, []want{invalid("metadata.name")}},
		{"a lease needs a namespace", func(l *coordinationv1.Lease) { l.Namespace = "" }, []want{required("metadata.namespace")}},
		{"a lease with zero leaseDurationSeconds is invalid", func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = ptr(int32(0)) }, []want{invalid("spec.leaseDurationSeconds")}},
		{"a lease with negative leaseTransitions is invalid", func(l *coordinationv1.Lease) { l.Spec.LeaseTransitions = ptr(int32(-1)) }, []want{invalid("spec.leaseTransitions")}},
		{"a preferred holder needs a strategy", func(l *coordinationv1.Lease) { l.Spec.PreferredHolder = ptr("node-2") }, []want{forbidden("spec.preferredHolder")}},
		{"a preferred holder with a strategy is valid", func(l *coordinationv1.Lease) {
			l.Spec.PreferredHolder = ptr("node-2")
			l.Spec.Strategy = ptr(coordinationv1.OldestEmulationVersion)
		}, nil},
		{"an unknown unprefixed strategy is rejected (at kube's doubled path)", func(l *coordinationv1.Lease) {
			l.Spec.Strategy = ptr(coordinationv1.CoordinatedLeaseStrategy("Newest"))
		}, []want{notSupported("spec.strategy.strategy")}},
		{"a prefixed strategy is valid", func(l *coordinationv1.Lease) {
			l.Spec.Strategy = ptr(coordinationv1.CoordinatedLeaseStrategy("example.com/mine"))
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease"},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity:       ptr("node-1"),
					LeaseDurationSeconds: ptr(int32(40)),
					RenewTime:            &metav1.MicroTime{Time: time.Unix(1000, 0)},
				},
			}
			tt.mutate(l)
			checkErrs(t, validation.Lease(l), tt.want...)
		})
	}
}

func TestLeaseUpdate(t *testing.T) {
	old := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease", ResourceVersion: "5"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr("node-1"), LeaseDurationSeconds: ptr(int32(40))},
	}
	renewed := old.DeepCopy()
	renewed.Spec.RenewTime = &metav1.MicroTime{Time: time.Unix(2000, 0)}
	renewed.Spec.HolderIdentity = ptr("node-1b")
	checkErrs(t, validation.LeaseUpdate(renewed, old))

	bad := old.DeepCopy()
	bad.Spec.LeaseDurationSeconds = ptr(int32(-5))
	bad.ResourceVersion = ""
	checkErrs(t, validation.LeaseUpdate(bad, old), invalid("spec.leaseDurationSeconds"), invalid("metadata.resourceVersion"))
}

func TestEvent(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(e *corev1.Event)
		want   []want
	}{
		{"an old-style event about a pod in its namespace is valid", func(*corev1.Event) {}, nil},
		{"an event about a pod in another namespace is rejected", func(e *corev1.Event) { e.InvolvedObject.Namespace = "other" }, []want{invalid("involvedObject.namespace")}},
		{"an event about a node may live in default", func(e *corev1.Event) {
			e.InvolvedObject = corev1.ObjectReference{Kind: "Node", Name: "node-1"}
			e.Namespace = "default"
		}, nil},
		{"an event about a node may not live in another namespace", func(e *corev1.Event) {
			e.InvolvedObject = corev1.ObjectReference{Kind: "Node", Name: "node-1"}
		}, []want{invalid("involvedObject.namespace")}},
		{"core/v1 accepts any type and long old-style messages", func(e *corev1.Event) {
			e.Type = "Loud"
			e.Message = strings.Repeat("m", 4096)
		}, nil},
		{"a new-style event needs its reporting fields", func(e *corev1.Event) {
			e.EventTime = metav1.MicroTime{Time: time.Unix(1000, 0)}
		}, []want{required("reportingController"), invalid("reportingController"), invalid("reportingController"), required("reportingInstance"), required("action")}},
		{"a new-style event message is at most 1024 characters", func(e *corev1.Event) {
			e.EventTime = metav1.MicroTime{Time: time.Unix(1000, 0)}
			e.ReportingController, e.ReportingInstance, e.Action = "kubelet", "node-1", "Pulling"
			e.Message = strings.Repeat("m", 1025)
		}, []want{invalid("message")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: "web-0.1", Namespace: "team-a"},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "team-a", Name: "web-0"},
				Reason:         "Pulled", Message: "pulled image", Type: corev1.EventTypeNormal, Count: 1,
				Source: corev1.EventSource{Component: "kubelet", Host: "node-1"},
			}
			tt.mutate(e)
			checkErrs(t, validation.Event(e), tt.want...)
		})
	}
}

func validEventV1() *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: "web-0.1", Namespace: "team-a"},
		EventTime:           metav1.MicroTime{Time: time.Unix(1000, 0)},
		ReportingController: "example.com/controller",
		ReportingInstance:   "controller-0",
		Action:              "Scale",
		Reason:              "Scaled",
		Regarding:           corev1.ObjectReference{Kind: "Deployment", Namespace: "team-a", Name: "web"},
		Note:                "scaled to 3",
		Type:                corev1.EventTypeNormal,
	}
}

func TestEventV1(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(e *eventsv1.Event)
		want   []want
	}{
		{"a complete events.k8s.io event is valid", func(*eventsv1.Event) {}, nil},
		{"eventTime is required", func(e *eventsv1.Event) { e.EventTime = metav1.MicroTime{} }, []want{required("eventTime")}},
		{"type must be Normal or Warning", func(e *eventsv1.Event) { e.Type = "Info" }, []want{invalid("type")}},
		{"reportingController must be a qualified name", func(e *eventsv1.Event) { e.ReportingController = "not valid" }, []want{invalid("reportingController")}},
		{"reportingInstance is at most 128 characters", func(e *eventsv1.Event) { e.ReportingInstance = strings.Repeat("i", 129) }, []want{invalid("reportingInstance")}},
		{"action is required", func(e *eventsv1.Event) { e.Action = "" }, []want{required("action")}},
		{"reason is at most 128 characters", func(e *eventsv1.Event) { e.Reason = strings.Repeat("r", 129) }, []want{invalid("reason")}},
		{"note is at most 1 kB (reported as message)", func(e *eventsv1.Event) { e.Note = strings.Repeat("n", 1025) }, []want{invalid("message")}},
		{"deprecated fields must stay unset", func(e *eventsv1.Event) {
			e.DeprecatedCount = 2
			e.DeprecatedSource = corev1.EventSource{Component: "kubelet"}
		}, []want{invalid("count"), invalid("source")}},
		{"a series needs at least two occurrences and a time", func(e *eventsv1.Event) {
			e.Series = &eventsv1.EventSeries{Count: 1}
		}, []want{invalid("series.count"), required("series.lastObservedTime")}},
		{"the name must be a DNS subdomain", func(e *eventsv1.Event) { e.Name = "Web 0" }, []want{invalid("metadata.name")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := validEventV1()
			tt.mutate(e)
			checkErrs(t, validation.EventV1(e), tt.want...)
		})
	}
}

func TestEventV1Update(t *testing.T) {
	old := validEventV1()
	old.ResourceVersion = "9"
	series := old.DeepCopy()
	series.Series = &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.MicroTime{Time: time.Unix(2000, 0)}}
	checkErrs(t, validation.EventV1Update(series, old))

	changed := old.DeepCopy()
	changed.Note = "something else"
	changed.Reason = "Other"
	checkErrs(t, validation.EventV1Update(changed, old), invalid("message"), invalid("reason"), invalid("reason"))
}
