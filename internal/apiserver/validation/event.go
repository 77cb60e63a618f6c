package validation

import (
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeplane/nodeplane/internal/apiserver/eventconv"
)

// Length limits kube puts on events.
const (
	reportingInstanceLengthLimit = 128
	actionLengthLimit            = 128
	reasonLengthLimit            = 128
	noteLengthLimit              = 1024
)

// Event validates a core/v1 Event on create. kube keeps core/v1 lenient
// for old clients: only the namespace rules, and, for events that carry an
// eventTime (new-style events), the reporting fields and lengths.
//
// Like every kind here it validates its own metadata, so the API server runs
// one metadata check per write.
func Event(e *corev1.Event) field.ErrorList {
	return append(GenericObjectMeta(e, true), legacyEvent(e)...)
}

// EventUpdate validates a core/v1 Event update; the same lenient rules as
// create, plus the metadata update rules.
func EventUpdate(e, old *corev1.Event) field.ErrorList {
	return append(GenericObjectMetaUpdate(e, old), legacyEvent(e)...)
}

// EventV1 validates an events.k8s.io/v1 Event on create: the legacy rules
// plus strict ones: eventTime, reportingController, reportingInstance,
// action and reason are required, type is Normal or Warning, note is at
// most 1024 characters and the deprecated fields stay unset. Errors use
// the field names of kube's internal Event (kube validates that type for
// both APIs): involvedObject for regarding, message for note, source,
// firstTimestamp, lastTimestamp and count for the deprecated fields.
func EventV1(e *eventsv1.Event) field.ErrorList {
	ce := eventconv.ToCore(e)
	allErrs := legacyEvent(ce)
	allErrs = append(allErrs, objectMeta(&ce.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metadataPath)...)
	allErrs = append(allErrs, eventSeries(ce)...)
	if ce.EventTime.IsZero() {
		allErrs = append(allErrs, field.Required(field.NewPath("eventTime"), ""))
	}
	if ce.Type != corev1.EventTypeNormal && ce.Type != corev1.EventTypeWarning {
		allErrs = append(allErrs, field.Invalid(field.NewPath("type"), "", fmt.Sprintf("has invalid value: %v", ce.Type)))
	}
	if !ce.FirstTimestamp.IsZero() {
		allErrs = append(allErrs, field.Invalid(field.NewPath("firstTimestamp"), "", "needs to be unset"))
	}
	if !ce.LastTimestamp.IsZero() {
		allErrs = append(allErrs, field.Invalid(field.NewPath("lastTimestamp"), "", "needs to be unset"))
	}
	if ce.Count != 0 {
		allErrs = append(allErrs, field.Invalid(field.NewPath("count"), "", "needs to be unset"))
	}
	if ce.Source.Component != "" || ce.Source.Host != "" {
		allErrs = append(allErrs, field.Invalid(field.NewPath("source"), "", "needs to be unset"))
	}
	return allErrs
}

// EventV1Update validates an events.k8s.io/v1 Event update: everything but
// the series (and metadata) is immutable.
func EventV1Update(e, old *eventsv1.Event) field.ErrorList {
	ce, co := eventconv.ToCore(e), eventconv.ToCore(old)
	allErrs := legacyEvent(ce)
	allErrs = append(allErrs, objectMetaUpdate(&ce.ObjectMeta, &co.ObjectMeta, metadataPath)...)
	if !reflect.DeepEqual(ce.Series, co.Series) {
		allErrs = append(allErrs, eventSeries(ce)...)
	}
	fields := []struct {
		name     string
		new, old any
	}{
		{"involvedObject", ce.InvolvedObject, co.InvolvedObject},
		{"reason", ce.Reason, co.Reason},
		{"message", ce.Message, co.Message},
		{"source", ce.Source, co.Source},
		{"firstTimestamp", ce.FirstTimestamp, co.FirstTimestamp},
		{"lastTimestamp", ce.LastTimestamp, co.LastTimestamp},
		{"count", ce.Count, co.Count},
		// kube checks reason twice; so does nodeplane, to report alike.
		{"reason", ce.Reason, co.Reason},
		{"type", ce.Type, co.Type},
		{"eventTime", ce.EventTime, co.EventTime},
		{"action", ce.Action, co.Action},
		{"related", ce.Related, co.Related},
		{"reportingController", ce.ReportingController, co.ReportingController},
		{"reportingInstance", ce.ReportingInstance, co.ReportingInstance},
	}
	for _, f := range fields {
		allErrs = append(allErrs, immutable(f.new, f.old, field.NewPath(f.name))...)
	}
	return allErrs
}

func eventSeries(e *corev1.Event) field.ErrorList {
	if e.Series == nil {
		return nil
	}
	var allErrs field.ErrorList
	if e.Series.Count < 2 {
		allErrs = append(allErrs, field.Invalid(field.NewPath("series", "count"), "", "should be at least 2"))
	}
	if e.Series.LastObservedTime.IsZero() {
		allErrs = append(allErrs, field.Required(field.NewPath("series", "lastObservedTime"), ""))
	}
	return allErrs
}

func legacyEvent(e *corev1.Event) field.ErrorList {
	var allErrs field.ErrorList
	nsPath := field.NewPath("involvedObject", "namespace")
	const nsMismatch = "does not match event.namespace"
	if e.EventTime.IsZero() {
		// Old-style event: its namespace must be the involved object's, or
		// empty/default for cluster-scoped objects.
		if e.InvolvedObject.Namespace == "" {
			if e.Namespace != metav1.NamespaceNone && e.Namespace != metav1.NamespaceDefault {
				allErrs = append(allErrs, field.Invalid(nsPath, e.InvolvedObject.Namespace, nsMismatch))
			}
		} else if e.Namespace != e.InvolvedObject.Namespace {
			allErrs = append(allErrs, field.Invalid(nsPath, e.InvolvedObject.Namespace, nsMismatch))
		}
	} else {
		if e.InvolvedObject.Namespace == "" && e.Namespace != metav1.NamespaceDefault && e.Namespace != metav1.NamespaceSystem {
			allErrs = append(allErrs, field.Invalid(nsPath, e.InvolvedObject.Namespace, nsMismatch))
		}
		if e.ReportingController == "" {
			allErrs = append(allErrs, field.Required(field.NewPath("reportingController"), ""))
		}
		allErrs = append(allErrs, invalidEach(field.NewPath("reportingController"), e.ReportingController, utilvalidation.IsQualifiedName(e.ReportingController))...)
		allErrs = append(allErrs, requiredWithLimit(e.ReportingInstance, reportingInstanceLengthLimit, field.NewPath("reportingInstance"))...)
		allErrs = append(allErrs, requiredWithLimit(e.Action, actionLengthLimit, field.NewPath("action"))...)
		allErrs = append(allErrs, requiredWithLimit(e.Reason, reasonLengthLimit, field.NewPath("reason"))...)
		if len(e.Message) > noteLengthLimit {
			allErrs = append(allErrs, field.Invalid(field.NewPath("message"), "", mustBeAtMost(noteLengthLimit)))
		}
	}
	return append(allErrs, invalidEach(field.NewPath("namespace"), e.Namespace, utilvalidation.IsDNS1123Subdomain(e.Namespace))...)
}

func requiredWithLimit(value string, limit int, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if value == "" {
		allErrs = append(allErrs, field.Required(fldPath, ""))
	}
	if len(value) > limit {
		allErrs = append(allErrs, field.Invalid(fldPath, "", mustBeAtMost(limit)))
	}
	return allErrs
}
