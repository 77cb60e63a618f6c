package printers

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func micro(t metav1.Time) metav1.MicroTime { return metav1.NewMicroTime(t.Time) }

func TestEventCells(t *testing.T) {
	node := corev1.ObjectReference{Kind: "Node", Name: "n1", UID: "n1"}
	tests := []struct {
		name  string
		event *corev1.Event
		// LAST SEEN TYPE REASON OBJECT SUBOBJECT SOURCE MESSAGE FIRST SEEN COUNT NAME
		want []interface{}
	}{
		{
			name: "a kubelet event shows kind/name, source with host and both timestamps",
			event: &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: "n1.17a", Namespace: "default"},
				InvolvedObject: node,
				Type:           corev1.EventTypeNormal,
				Reason:         "NodeReady",
				Message:        "  Node n1 status is now: NodeReady\n",
				Source:         corev1.EventSource{Component: "kubelet", Host: "n1"},
				FirstTimestamp: ago(10 * time.Minute),
				LastTimestamp:  ago(30 * time.Second),
				Count:          4,
			},
			want: []interface{}{"30s", "Normal", "NodeReady", "node/n1", "", "kubelet, n1", "Node n1 status is now: NodeReady", "10m", int64(4), "n1.17a"},
		},
		{
			name: "a pod event names the container as its subobject",
			event: &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: "p.1"},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p", FieldPath: "spec.containers{app}"},
				Type:           corev1.EventTypeWarning,
				Reason:         "BackOff",
				Source:         corev1.EventSource{Component: "kubelet"},
				FirstTimestamp: ago(time.Hour),
				LastTimestamp:  ago(time.Minute),
				Count:          12,
			},
			want: []interface{}{"60s", "Warning", "BackOff", "pod/p", "spec.containers{app}", "kubelet", "", "60m", int64(12), "p.1"},
		},
		{
			name: "an event written through the new API reads eventTime and counts once",
			event: &corev1.Event{
				ObjectMeta:          metav1.ObjectMeta{Name: "e"},
				InvolvedObject:      node,
				EventTime:           micro(ago(2 * time.Minute)),
				ReportingController: "nodeplane.io/node-lifecycle",
				ReportingInstance:   "controller-0",
			},
			want: []interface{}{"2m", "", "", "node/n1", "", "nodeplane.io/node-lifecycle, controller-0", "", "2m", int64(1), "e"},
		},
		{
			name: "an event series shows its last observation and count",
			event: &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: "e"},
				InvolvedObject: node,
				EventTime:      micro(ago(time.Hour)),
				LastTimestamp:  ago(50 * time.Minute),
				Series:         &corev1.EventSeries{Count: 7, LastObservedTime: micro(ago(20 * time.Second))},
			},
			want: []interface{}{"20s", "", "", "node/n1", "", "", "", "60m", int64(7), "e"},
		},
		{
			name: "an event without any timestamp shows <unknown>",
			event: &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: "e", CreationTimestamp: ago(time.Minute)},
				InvolvedObject: corev1.ObjectReference{Kind: "Namespace"},
			},
			want: []interface{}{"<unknown>", "", "", "namespace", "", "", "", "<unknown>", int64(1), "e"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Events().Cells(tt.event, now)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestEventsV1Cells(t *testing.T) {
	tests := []struct {
		name  string
		event *eventsv1.Event
		want  []interface{}
	}{
		{
			name: "a new-style event reads regarding, note and the reporting fields",
			event: &eventsv1.Event{
				ObjectMeta:          metav1.ObjectMeta{Name: "e"},
				Regarding:           corev1.ObjectReference{Kind: "Node", Name: "n1"},
				Type:                corev1.EventTypeWarning,
				Reason:              "NodeNotReady",
				Note:                "Node is not ready",
				EventTime:           micro(ago(3 * time.Minute)),
				ReportingController: "node-controller",
			},
			want: []interface{}{"3m", "Warning", "NodeNotReady", "node/n1", "", "node-controller", "Node is not ready", "3m", int64(1), "e"},
		},
		{
			name: "a series shows its count and last observation",
			event: &eventsv1.Event{
				ObjectMeta: metav1.ObjectMeta{Name: "e"},
				Regarding:  corev1.ObjectReference{Kind: "Pod", Name: "p", FieldPath: "spec.containers{app}"},
				EventTime:  micro(ago(time.Hour)),
				Series:     &eventsv1.EventSeries{Count: 3, LastObservedTime: micro(ago(10 * time.Second))},
			},
			want: []interface{}{"10s", "", "", "pod/p", "spec.containers{app}", "", "", "60m", int64(3), "e"},
		},
		{
			name: "a converted old-style event reads the deprecated fields",
			event: &eventsv1.Event{
				ObjectMeta:               metav1.ObjectMeta{Name: "e"},
				Regarding:                corev1.ObjectReference{Kind: "Node", Name: "n1"},
				DeprecatedSource:         corev1.EventSource{Component: "kubelet", Host: "n1"},
				DeprecatedFirstTimestamp: ago(4 * time.Hour),
				DeprecatedLastTimestamp:  ago(5 * time.Second),
				DeprecatedCount:          9,
			},
			want: []interface{}{"5s", "", "", "node/n1", "", "kubelet, n1", "", "4h", int64(9), "e"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := EventsV1().Cells(tt.event, now)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}
