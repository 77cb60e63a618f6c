package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestEventTTL: with --event-ttl, etcd removes an event that long after its
// last write (a lease on its key), and the event is gone from the API, not
// before. (storage/etcd TestKeyTTL shows keys without a TTL stay.)
func TestEventTTL(t *testing.T) {
	s := startServer(t, serverOptions{apiOnly: true, args: []string{"--event-ttl=2s"}})
	cs := s.client()
	ctx := context.Background()
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "short-lived", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p"},
		Reason:         "Test", Message: "expires", Type: corev1.EventTypeNormal,
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1,
		Source: corev1.EventSource{Component: "e2e"},
	}
	if _, err := cs.CoreV1().Events("default").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	eventually(t, 30*time.Second, "event removed by its TTL", func() error {
		_, err := cs.CoreV1().Events("default").Get(ctx, "short-lived", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("event still there: %v", err)
	})
	if d := time.Since(created); d < time.Second {
		t.Errorf("event removed after %v, before its 2s TTL", d)
	}
}
