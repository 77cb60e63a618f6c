package loadgen

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// A renewal answered 429 twice (Retry-After: 0, so client-go retries at
// once) and then 200 succeeds for the caller; Wire sees the three answers
// and the two 429s, and the renewal's own counter its two 429s.
func TestWireCountsTheThrottledAttemptsClientGoHides(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if calls.Add(1) <= 2 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status: metav1.StatusFailure, Reason: metav1.StatusReasonTooManyRequests, Code: http.StatusTooManyRequests})
			return
		}
		_ = json.NewEncoder(w).Encode(coordinationv1.Lease{TypeMeta: metav1.TypeMeta{Kind: "Lease", APIVersion: "coordination.k8s.io/v1"},
			ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: NodeLeaseNamespace, ResourceVersion: "2"}})
	}))
	defer srv.Close()

	wire := &Wire{}
	cfg := &rest.Config{Host: srv.URL}
	wire.Wrap(cfg)
	clients, err := NewClients(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, a := withAttempts(t.Context())
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: NodeLeaseNamespace, ResourceVersion: "1"}}
	if _, err := clients[0].CoordinationV1().Leases(NodeLeaseNamespace).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("renewal after two 429s: %v", err)
	}
	if got, want := wire.Counts(), (WireCounts{Responses: 3, TooManyRequests: 2}); got != want {
		t.Errorf("wire counts: got %+v, want %+v", got, want)
	}
	if got := a.tooMany.Load(); got != 2 {
		t.Errorf("the renewal's 429s: got %d, want 2", got)
	}
}
