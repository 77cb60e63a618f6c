package lease

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeLeases is an in-memory lease API that counts calls and can fail.
type fakeLeases struct {
	stored              *coordinationv1.Lease
	rv                  int
	gets, creates, upds int
	failNext            []error // popped by each call, nil entries mean success
}

var gr = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

func (f *fakeLeases) fail() error {
	if len(f.failNext) == 0 {
		return nil
	}
	err := f.failNext[0]
	f.failNext = f.failNext[1:]
	return err
}

func (f *fakeLeases) Get(_ context.Context, name string, _ metav1.GetOptions) (*coordinationv1.Lease, error) {
	f.gets++
	if err := f.fail(); err != nil {
		return nil, err
	}
	if f.stored == nil {
		return nil, apierrors.NewNotFound(gr, name)
	}
	return f.stored.DeepCopy(), nil
}

func (f *fakeLeases) Create(_ context.Context, l *coordinationv1.Lease, _ metav1.CreateOptions) (*coordinationv1.Lease, error) {
	f.creates++
	if err := f.fail(); err != nil {
		return nil, err
	}
	if f.stored != nil {
		return nil, apierrors.NewAlreadyExists(gr, l.Name)
	}
	f.rv++
	f.stored = l.DeepCopy()
	f.stored.ResourceVersion = itoa(f.rv)
	return f.stored.DeepCopy(), nil
}

func (f *fakeLeases) Update(_ context.Context, l *coordinationv1.Lease, _ metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	f.upds++
	if err := f.fail(); err != nil {
		return nil, err
	}
	if f.stored == nil {
		return nil, apierrors.NewNotFound(gr, l.Name)
	}
	if l.ResourceVersion != f.stored.ResourceVersion {
		return nil, apierrors.NewConflict(gr, l.Name, errors.New("stale"))
	}
	f.rv++
	f.stored = l.DeepCopy()
	f.stored.ResourceVersion = itoa(f.rv)
	return f.stored.DeepCopy(), nil
}

func itoa(i int) string { return time.Duration(i).String() }

func newRenewer(t *testing.T, c *fakeLeases, clk *clocktesting.FakeClock, uid types.UID) *Renewer {
	t.Helper()
	r, err := New(Config{
		NodeName: "n1",
		Client:   c,
		Clock:    clk,
		Rand:     rand.New(rand.NewPCG(1, 2)),
		NodeUID: func(context.Context) (types.UID, error) {
			if uid == "" {
				return "", errors.New("node not found")
			}
			return uid, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRenewCreatesThenUpdatesWithoutReading(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := &fakeLeases{}
	r := newRenewer(t, c, clk, "uid-1")

	next := r.Renew(ctx)
	if c.creates != 1 || c.stored == nil {
		t.Fatalf("first renewal: creates=%d, want 1", c.creates)
	}
	l := c.stored
	if *l.Spec.HolderIdentity != "n1" || *l.Spec.LeaseDurationSeconds != 40 || !l.Spec.RenewTime.Time.Equal(clk.Now()) {
		t.Errorf("lease spec = %+v", l.Spec)
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" || l.OwnerReferences[0].UID != "uid-1" ||
		l.OwnerReferences[0].Controller != nil || l.OwnerReferences[0].BlockOwnerDeletion != nil {
		t.Errorf("owner references = %+v", l.OwnerReferences)
	}
	if l.Spec.AcquireTime != nil || l.Spec.LeaseTransitions != nil {
		t.Errorf("acquireTime/leaseTransitions set: %+v", l.Spec)
	}
	if next < 10*time.Second || next >= 10400*time.Millisecond {
		t.Errorf("next renewal in %v, want [10s, 10.4s)", next)
	}

	gets := c.gets
	for i := range 10 {
		clk.Step(next)
		next = r.Renew(ctx)
		if !c.stored.Spec.RenewTime.Time.Equal(clk.Now()) {
			t.Fatalf("renewal %d: renewTime %v, want %v", i, c.stored.Spec.RenewTime, clk.Now())
		}
	}
	if c.gets != gets {
		t.Errorf("steady-state renewals read the lease %d times, want 0", c.gets-gets)
	}
	if c.upds != 10 {
		t.Errorf("updates = %d, want 10", c.upds)
	}
}

func TestRenewIntervalJitterStaysWithinFourPercent(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	r := newRenewer(t, &fakeLeases{}, clk, "u")
	seen := map[time.Duration]bool{}
	for range 200 {
		d := r.Renew(context.Background())
		if d < 10*time.Second || d >= 10400*time.Millisecond {
			t.Fatalf("interval %v outside [10s, 10.4s)", d)
		}
		seen[d] = true
	}
	if len(seen) < 50 {
		t.Errorf("only %d distinct intervals in 200 renewals: no jitter?", len(seen))
	}
}

func TestBackoffDoublesFrom200msTo7s(t *testing.T) {
	want := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 3200 * time.Millisecond, 6400 * time.Millisecond, 7 * time.Second, 7 * time.Second}
	for i, w := range want {
		if got := Backoff(i + 1); got != w {
			t.Errorf("Backoff(%d) = %v, want %v", i+1, got, w)
		}
	}
}

func TestFailuresBackOffAndRecover(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	unavailable := apierrors.NewServiceUnavailable("down")
	c := &fakeLeases{}
	repeated := 0
	r := newRenewer(t, c, clk, "u")
	r.cfg.OnRepeatedFailure = func() { repeated++ }
	r.Renew(ctx)

	// Every call fails for three attempts: each attempt is update (fails),
	// then get (fails).
	c.failNext = []error{unavailable, unavailable, unavailable, unavailable, unavailable, unavailable}
	var delays []time.Duration
	for range 3 {
		delays = append(delays, r.Renew(ctx))
	}
	want := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}
	for i := range want {
		if delays[i] != want[i] {
			t.Errorf("delay %d = %v, want %v", i, delays[i], want[i])
		}
	}
	if repeated != 2 {
		t.Errorf("repeated-failure hook ran %d times, want 2 (after the 2nd and 3rd failures)", repeated)
	}
	if d := r.Renew(ctx); d < 10*time.Second {
		t.Errorf("after recovery the next renewal is in %v, want the normal interval", d)
	}
	if s := r.Stats(); s.Failures != 0 || s.LastErr != nil {
		t.Errorf("stats after recovery = %+v", s)
	}
}

func TestConflictRereadsAndRenews(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	c := &fakeLeases{}
	r := newRenewer(t, c, clk, "u")
	r.Renew(ctx)
	// Someone else wrote the lease: our cached resourceVersion is stale.
	c.rv++
	c.stored.ResourceVersion = itoa(c.rv)
	clk.Step(10 * time.Second)
	if d := r.Renew(ctx); d < 10*time.Second {
		t.Fatalf("renewal after a conflict failed: next in %v, err %v", d, r.Stats().LastErr)
	}
	if !c.stored.Spec.RenewTime.Time.Equal(clk.Now()) {
		t.Errorf("renewTime not written after conflict")
	}
}

func TestNoLeaseIsCreatedForAnUnknownNodeButAnExistingOneIsRenewed(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	c := &fakeLeases{}
	r := newRenewer(t, c, clk, "")
	if d := r.Renew(ctx); d != FirstBackoff {
		t.Errorf("renew without a node: next in %v, want back-off %v", d, FirstBackoff)
	}
	if c.creates != 0 {
		t.Errorf("created a lease for a node that does not exist")
	}

	// A lease exists (e.g. from before a restart) but the Node is unknown:
	// it is still renewed, and gains the owner reference once the Node is known.
	holder := "n1"
	c.stored = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: Namespace, ResourceVersion: "x"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
	if d := r.Renew(ctx); d < 10*time.Second {
		t.Fatalf("existing lease not renewed: %v", r.Stats().LastErr)
	}
	if len(c.stored.OwnerReferences) != 0 {
		t.Errorf("owner reference set without a node UID")
	}
	r.cfg.NodeUID = func(context.Context) (types.UID, error) { return "late-uid", nil }
	r.Renew(ctx)
	if len(c.stored.OwnerReferences) != 1 || c.stored.OwnerReferences[0].UID != "late-uid" {
		t.Errorf("owner reference not added once the node is known: %+v", c.stored.OwnerReferences)
	}
}

func TestALeaseOwnedByADeletedNodeIsHandedToTheNewOne(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	c := &fakeLeases{}
	uid := types.UID("old-uid")
	r := newRenewer(t, c, clk, "")
	r.cfg.NodeUID = func(context.Context) (types.UID, error) { return uid, nil }
	r.Renew(ctx)
	if got := c.stored.OwnerReferences; len(got) != 1 || got[0].UID != "old-uid" {
		t.Fatalf("owner references = %+v, want the old node", got)
	}

	// The Node is deleted and registered again before the garbage
	// collector removes the lease.
	uid = "new-uid"
	r.Forget()
	gets := c.gets
	r.Renew(ctx)
	if c.gets != gets+1 {
		t.Errorf("renewal after Forget did %d reads, want 1", c.gets-gets)
	}
	if got := c.stored.OwnerReferences; len(got) != 1 || got[0].UID != "new-uid" || got[0].Kind != "Node" || got[0].Name != "n1" {
		t.Errorf("owner references = %+v, want only the new node", got)
	}
}

// After a server crash the in-memory lease store may have lost the lease:
// the renewal's update gets 404 and the same renewal creates it again.
func TestALeaseTheServerLostIsCreatedAgainInTheSameRenewal(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := &fakeLeases{}
	r := newRenewer(t, c, clk, "uid-1")
	next := r.Renew(ctx)
	if c.stored == nil {
		t.Fatal("first renewal created no lease")
	}

	c.stored = nil // the server restarted without it
	clk.Step(next)
	next = r.Renew(ctx)
	if c.stored == nil || c.creates != 2 {
		t.Fatalf("after the loss: creates = %d, stored = %v; want the lease created again", c.creates, c.stored)
	}
	if !c.stored.Spec.RenewTime.Time.Equal(clk.Now()) {
		t.Errorf("re-created lease renewTime %v, want %v", c.stored.Spec.RenewTime, clk.Now())
	}
	if next < 10*time.Second {
		t.Errorf("next renewal in %v after a successful re-create, want the normal interval", next)
	}
	clk.Step(next)
	upds := c.upds
	r.Renew(ctx)
	if c.upds != upds+1 || c.creates != 2 {
		t.Errorf("next renewal: %d updates, %d creates; want one update from the re-created lease", c.upds-upds, c.creates)
	}
}
