// Package eventconv converts between the two representations of an event:
// events.k8s.io/v1 (what new clients write) and core/v1 (what is stored and
// what kubectl reads). The API server serves both from one storage.
package eventconv

import (
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
)

// ToCore converts an events.k8s.io/v1 Event to its core/v1 form.
func ToCore(e *eventsv1.Event) *corev1.Event {
	out := &corev1.Event{
		ObjectMeta:          *e.ObjectMeta.DeepCopy(),
		InvolvedObject:      e.Regarding,
		Reason:              e.Reason,
		Message:             e.Note,
		Source:              e.DeprecatedSource,
		FirstTimestamp:      e.DeprecatedFirstTimestamp,
		LastTimestamp:       e.DeprecatedLastTimestamp,
		Count:               e.DeprecatedCount,
		Type:                e.Type,
		EventTime:           e.EventTime,
		Action:              e.Action,
		Related:             e.Related.DeepCopy(),
		ReportingController: e.ReportingController,
		ReportingInstance:   e.ReportingInstance,
	}
	out.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Event"))
	if e.Series != nil {
		out.Series = &corev1.EventSeries{Count: e.Series.Count, LastObservedTime: e.Series.LastObservedTime}
	}
	return out
}

// FromCore converts a core/v1 Event to its events.k8s.io/v1 form.
func FromCore(e *corev1.Event) *eventsv1.Event {
	out := &eventsv1.Event{
		ObjectMeta:               *e.ObjectMeta.DeepCopy(),
		EventTime:                e.EventTime,
		ReportingController:      e.ReportingController,
		ReportingInstance:        e.ReportingInstance,
		Action:                   e.Action,
		Reason:                   e.Reason,
		Regarding:                e.InvolvedObject,
		Related:                  e.Related.DeepCopy(),
		Note:                     e.Message,
		Type:                     e.Type,
		DeprecatedSource:         e.Source,
		DeprecatedFirstTimestamp: e.FirstTimestamp,
		DeprecatedLastTimestamp:  e.LastTimestamp,
		DeprecatedCount:          e.Count,
	}
	out.SetGroupVersionKind(eventsv1.SchemeGroupVersion.WithKind("Event"))
	if e.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: e.Series.Count, LastObservedTime: e.Series.LastObservedTime}
	}
	return out
}
