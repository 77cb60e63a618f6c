package nodelifecycle

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestARenewalCountsFromWhenTheWatchDeliveredIt: a node's grace runs from
// the moment the controller's watch delivered its last renewal
// (Observation.LeaseSeenAt), not from the monitor pass that looked at it up
// to a period later — so a silent node is marked Unknown up to a period
// sooner, and never before its grace has passed since the delivery.
func TestARenewalCountsFromWhenTheWatchDeliveredIt(t *testing.T) {
	grace := DefaultConfig().NodeMonitorGracePeriod
	cases := []struct {
		name string
		// seen is when the watch delivered the last renewal, relative to
		// the pass that first looks at it (zero: not known).
		seen time.Duration
		// at is when, after that pass, the node is checked.
		at          time.Duration
		wantUnknown bool
	}{
		{name: "a renewal delivered 4 s before the pass: Unknown once the grace has run from the delivery",
			seen: -4 * time.Second, at: grace - 4*time.Second + time.Millisecond, wantUnknown: true},
		{name: "a renewal delivered 4 s before the pass: still Ready just before the grace has run from the delivery",
			seen: -4 * time.Second, at: grace - 4*time.Second - time.Millisecond, wantUnknown: false},
		{name: "a delivery time not known counts from the pass, as before",
			at: grace - 4*time.Second + time.Millisecond, wantUnknown: false},
		{name: "a delivery time after the pass (clock step) counts as the pass",
			seen: 3 * time.Second, at: grace - time.Millisecond, wantUnknown: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := newCluster(t, DefaultConfig())
			cl.join("n1")
			cl.monitor()
			cl.step(10 * time.Second)
			cl.post("n1", corev1.ConditionTrue) // the status heartbeat comes before the lease's
			cl.monitor()
			cl.step(time.Second)
			cl.renew("n1")
			cl.step(5 * time.Second) // the next pass
			obs := cl.observations()
			if tc.seen != 0 {
				obs[0].LeaseSeenAt = cl.now.Add(tc.seen)
			}
			cl.monitorWith(obs)
			cl.step(tc.at)
			cl.monitor()
			if got := cl.ready("n1") == corev1.ConditionUnknown; got != tc.wantUnknown {
				t.Errorf("Unknown = %v at pass + %v, want %v", got, tc.at, tc.wantUnknown)
			}
		})
	}
}

// TestALeaseVersionNotDeliveredYetCountsFromNow: the informer's cache shows
// a renewal before the handler that notes its delivery has run. Such a
// version must not borrow the previous version's delivery time — the node's
// grace would start a renewal early, and a node that then went silent would
// be marked Unknown that much before its grace ended (seen at 10,000
// simulated nodes: 2 of 5,363 silenced nodes marked 10 s early).
func TestALeaseVersionNotDeliveredYetCountsFromNow(t *testing.T) {
	delivered := time.Date(2026, 11, 28, 11, 10, 48, 0, time.UTC)
	lease := func(rv string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: corev1.NamespaceNodeLease, ResourceVersion: rv}}
	}
	c := &Controller{leaseSeen: map[string]seenLease{"n1": {resourceVersion: "41", at: delivered}}}
	cases := []struct {
		name string
		rv   string
		want time.Time
	}{
		{"the version whose delivery was noted carries its delivery time", "41", delivered},
		{"a newer version not noted yet carries none", "42", time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs := []Observation{{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, Lease: lease(tc.rv)}}
			c.stampLeaseSeen(obs)
			if !obs[0].LeaseSeenAt.Equal(tc.want) {
				t.Errorf("LeaseSeenAt = %v, want %v", obs[0].LeaseSeenAt, tc.want)
			}
		})
	}
}
