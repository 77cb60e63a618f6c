package apiserver

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEventExpired(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	tests := []struct {
		name string
		ev   corev1.Event
		want bool
	}{
		{"an event created two hours ago and never updated expires", corev1.Event{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: ago(2 * time.Hour)}}, true},
		{"an old event seen again ten minutes ago stays", corev1.Event{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: ago(5 * time.Hour)}, LastTimestamp: ago(10 * time.Minute)}, false},
		{"a new-style event counts its series", corev1.Event{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: ago(5 * time.Hour)}, Series: &corev1.EventSeries{LastObservedTime: metav1.NewMicroTime(now.Add(-time.Minute))}}, false},
		{"an event exactly at the ttl stays", corev1.Event{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: ago(time.Hour)}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := eventExpired(&tt.ev, now, time.Hour); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
