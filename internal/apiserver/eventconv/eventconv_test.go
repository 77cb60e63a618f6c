package eventconv

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAnEventSurvivesARoundTripThroughEventsV1(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	e := &corev1.Event{
		TypeMeta:            metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:          metav1.ObjectMeta{Name: "n1.1", Namespace: "default", Labels: map[string]string{"a": "b"}},
		InvolvedObject:      corev1.ObjectReference{Kind: "Node", Name: "n1", UID: "n1"},
		Reason:              "NodeNotReady",
		Message:             "Node n1 status is now: NodeNotReady",
		Source:              corev1.EventSource{Component: "node-controller"},
		FirstTimestamp:      metav1.NewTime(now),
		LastTimestamp:       metav1.NewTime(now.Add(time.Minute)),
		Count:               3,
		Type:                corev1.EventTypeNormal,
		EventTime:           metav1.NewMicroTime(now),
		Series:              &corev1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(now.Add(time.Minute))},
		Action:              "Mark",
		Related:             &corev1.ObjectReference{Kind: "Pod", Name: "p"},
		ReportingController: "node-controller",
		ReportingInstance:   "nodeplane-1",
	}
	v1 := FromCore(e)
	if v1.Note != e.Message || v1.Regarding != e.InvolvedObject || v1.DeprecatedCount != 3 || v1.Series.Count != 3 {
		t.Fatalf("FromCore lost fields: %+v", v1)
	}
	back := ToCore(v1)
	if !apiequality.Semantic.DeepEqual(back, e) {
		t.Errorf("round trip changed the event:\ngot  %+v\nwant %+v", back, e)
	}
	v1.Labels["a"] = "changed"
	if e.Labels["a"] != "b" {
		t.Error("FromCore shares metadata maps with its input")
	}
}
