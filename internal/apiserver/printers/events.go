package printers

import (
	"cmp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Events prints core/v1 events: LAST SEEN TYPE REASON OBJECT MESSAGE, and with
// -o wide SUBOBJECT SOURCE (between OBJECT and MESSAGE) and FIRST SEEN COUNT
// NAME (after MESSAGE), in Kubernetes' column order.
func Events() Printer {
	return Printer{Columns: eventColumns(), Cells: cellsOf(coreEventCells)}
}

// EventsV1 prints events.k8s.io/v1 events with the same columns as Events:
// Kubernetes serves both groups from one internal type and one printer.
func EventsV1() Printer {
	return Printer{Columns: eventColumns(), Cells: cellsOf(func(e *eventsv1.Event, now time.Time) []interface{} {
		return eventCells(eventFromV1(e), now)
	})}
}

func eventColumns() []metav1.TableColumnDefinition {
	doc := corev1.Event{}.SwaggerDoc()
	name := nameColumn()
	name.Priority = 1
	return []metav1.TableColumnDefinition{
		column("Last Seen", "string", doc["lastTimestamp"]),
		column("Type", "string", doc["type"]),
		column("Reason", "string", doc["reason"]),
		column("Object", "string", doc["involvedObject"]),
		wideColumn("Subobject", "string", corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]),
		wideColumn("Source", "string", doc["source"]),
		column("Message", "string", doc["message"]),
		wideColumn("First Seen", "string", doc["firstTimestamp"]),
		wideColumn("Count", "string", doc["count"]),
		name,
	}
}

// event holds the fields the event columns read, whichever API group the event
// came from.
type event struct {
	name                 string
	regarding            corev1.ObjectReference
	typ, reason, message string
	source               corev1.EventSource
	reportingController  string
	reportingInstance    string
	firstTimestamp       metav1.Time
	lastTimestamp        metav1.Time
	eventTime            metav1.MicroTime
	count                int32
	series               *corev1.EventSeries
}

func coreEventCells(e *corev1.Event, now time.Time) []interface{} {
	return eventCells(event{
		name:                e.Name,
		regarding:           e.InvolvedObject,
		typ:                 e.Type,
		reason:              e.Reason,
		message:             e.Message,
		source:              e.Source,
		reportingController: e.ReportingController,
		reportingInstance:   e.ReportingInstance,
		firstTimestamp:      e.FirstTimestamp,
		lastTimestamp:       e.LastTimestamp,
		eventTime:           e.EventTime,
		count:               e.Count,
		series:              e.Series,
	}, now)
}

// eventFromV1 maps an events.k8s.io/v1 event onto the core/v1 fields, the way
// the two versions convert into each other.
func eventFromV1(e *eventsv1.Event) event {
	ev := event{
		name:                e.Name,
		regarding:           e.Regarding,
		typ:                 e.Type,
		reason:              e.Reason,
		message:             e.Note,
		source:              e.DeprecatedSource,
		reportingController: e.ReportingController,
		reportingInstance:   e.ReportingInstance,
		firstTimestamp:      e.DeprecatedFirstTimestamp,
		lastTimestamp:       e.DeprecatedLastTimestamp,
		eventTime:           e.EventTime,
		count:               e.DeprecatedCount,
	}
	if e.Series != nil {
		ev.series = &corev1.EventSeries{Count: e.Series.Count, LastObservedTime: e.Series.LastObservedTime}
	}
	return ev
}

// eventCells renders one event. FIRST SEEN is firstTimestamp, else eventTime.
// LAST SEEN is series.lastObservedTime for a series, else lastTimestamp, else
// FIRST SEEN. COUNT is the series count, else count, and 1 for a singleton
// event written through the new API (count unset).
func eventCells(e event, now time.Time) []interface{} {
	firstSeen := age(e.firstTimestamp, now)
	if e.firstTimestamp.IsZero() {
		firstSeen = microAge(e.eventTime, now)
	}
	lastSeen := age(e.lastTimestamp, now)
	if e.lastTimestamp.IsZero() {
		lastSeen = firstSeen
	}
	count := e.count
	switch {
	case e.series != nil:
		lastSeen = microAge(e.series.LastObservedTime, now)
		count = e.series.Count
	case count == 0:
		count = 1
	}

	return []interface{}{
		lastSeen,
		e.typ,
		e.reason,
		eventObject(e.regarding),
		e.regarding.FieldPath,
		eventSource(e),
		strings.TrimSpace(e.message),
		firstSeen,
		int64(count),
		e.name,
	}
}

// eventObject is "kind/name" in lower case ("node/n1"), or just the kind when
// the reference has no name.
func eventObject(ref corev1.ObjectReference) string {
	kind := strings.ToLower(ref.Kind)
	if ref.Name == "" {
		return kind
	}
	return kind + "/" + ref.Name
}

// eventSource is "component, host", falling back to the reporting controller
// and instance, and dropping the host part when there is none.
func eventSource(e event) string {
	component := cmp.Or(e.source.Component, e.reportingController)
	host := cmp.Or(e.source.Host, e.reportingInstance)
	if host == "" {
		return component
	}
	return component + ", " + host
}
