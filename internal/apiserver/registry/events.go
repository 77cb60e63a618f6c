package registry

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeplane/nodeplane/internal/apiserver/eventconv"
	"github.com/nodeplane/nodeplane/internal/apiserver/printers"
	"github.com/nodeplane/nodeplane/internal/apiserver/validation"
)

// Events declares core/v1 events, the stored representation of events.
func Events() *Resource {
	return &Resource{
		GroupVersion: coreV1, Resource: "events", Singular: "event", Kind: "Event", ListKind: "EventList",
		Namespaced: true,
		ShortNames: []string{"ev"},
		New:        func() runtime.Object { return &corev1.Event{} },
		NewList:    func() runtime.Object { return &corev1.EventList{} },
		Fields:     eventFields,
		Printer:    printers.Events(),
		Strategy: Strategy{
			Validate: func(obj runtime.Object) field.ErrorList { return validation.Event(obj.(*corev1.Event)) },
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.EventUpdate(obj.(*corev1.Event), old.(*corev1.Event))
			},
			AllowCreateOnUpdate: true,
		},
	}
}

func eventFields(obj runtime.Object) fields.Set {
	e := obj.(*corev1.Event)
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	return fields.Set{
		"involvedObject.kind":            e.InvolvedObject.Kind,
		"involvedObject.namespace":       e.InvolvedObject.Namespace,
		"involvedObject.name":            e.InvolvedObject.Name,
		"involvedObject.uid":             string(e.InvolvedObject.UID),
		"involvedObject.apiVersion":      e.InvolvedObject.APIVersion,
		"involvedObject.resourceVersion": e.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath":       e.InvolvedObject.FieldPath,
		"reason":                         e.Reason,
		"reportingComponent":             e.ReportingController,
		"source":                         source,
		"type":                           e.Type,
	}
}

// EventsV1 declares events.k8s.io/v1 events, served from the core/v1 event
// storage so both APIs see the same events.
func EventsV1(core *Resource) *Resource {
	return &Resource{
		GroupVersion: eventsv1.SchemeGroupVersion, Resource: "events", Singular: "event", Kind: "Event", ListKind: "EventList",
		Namespaced: true,
		ShortNames: []string{"ev"},
		New:        func() runtime.Object { return &eventsv1.Event{} },
		NewList:    func() runtime.Object { return &eventsv1.EventList{} },
		Printer:    printers.EventsV1(),
		Storage:    core,
		Strategy: Strategy{
			Validate: func(obj runtime.Object) field.ErrorList { return validation.EventV1(obj.(*eventsv1.Event)) },
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.EventV1Update(obj.(*eventsv1.Event), old.(*eventsv1.Event))
			},
		},
		ToStorage: func(obj runtime.Object) (runtime.Object, error) {
			e, ok := obj.(*eventsv1.Event)
			if !ok {
				return nil, fmt.Errorf("expected events.k8s.io/v1 Event, got %T", obj)
			}
			return eventconv.ToCore(e), nil
		},
		FromStorage: func(obj runtime.Object) (runtime.Object, error) {
			e, ok := obj.(*corev1.Event)
			if !ok {
				return nil, fmt.Errorf("expected v1 Event, got %T", obj)
			}
			return eventconv.FromCore(e), nil
		},
	}
}
