package shutdown

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// fakePods records what the manager asks for; each pod takes `takes` to
// stop (capped by its grace, as a runtime's SIGKILL caps it).
type fakePods struct {
	mu    sync.Mutex
	pods  []*corev1.Pod
	takes map[types.UID]time.Duration
	log   []string
	start time.Time
}

func (f *fakePods) Running() []*corev1.Pod { return f.pods }

func (f *fakePods) StopForShutdown(ctx context.Context, uid types.UID, grace time.Duration) error {
	f.note(fmt.Sprintf("stop %s grace=%v", uid, grace))
	select {
	case <-time.After(min(f.takes[uid], grace)):
	case <-ctx.Done():
		return ctx.Err()
	}
	f.note(fmt.Sprintf("stopped %s", uid))
	return nil
}

func (f *fakePods) note(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, fmt.Sprintf("%v %s", time.Since(f.start).Round(time.Millisecond), s))
}

func (f *fakePods) lines() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log)
}

func newFake() *fakePods {
	return &fakePods{
		start: time.Now(),
		pods: []*corev1.Pod{
			pod("crit", ptr.To(CriticalPriority), ptr.To[int64](60)),
			pod("low", ptr.To[int32](-5), ptr.To[int64](60)),
			pod("quick", nil, ptr.To[int64](60)),
		},
		takes: map[types.UID]time.Duration{"crit": time.Hour, "low": time.Hour, "quick": time.Second},
	}
}

// newTestManager returns a manager over f with the default 30 s / 10 s
// table that notes each node status sync (with the NotReady message) in f.
// statePath "" keeps no state file.
func newTestManager(t *testing.T, f *fakePods, statePath string) *Manager {
	t.Helper()
	var m *Manager
	m, err := New(Config{
		Table: Table(30*time.Second, 10*time.Second, nil),
		Pods:  f,
		SyncNodeStatus: func(context.Context) error {
			f.note(fmt.Sprintf("node status notReady=%v", m.NotReady()))
			return nil
		},
		StatePath: statePath,
		Clock:     clock.RealClock{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestManagerShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		m := newTestManager(t, f, filepath.Join(t.TempDir(), StateFileName))
		if err := m.Shutdown(context.Background()); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		want := []string{
			"0s node status notReady=[node is shutting down]",
			"0s stop low grace=20s", "0s stop quick grace=20s",
			"1s stopped quick",
			"20s stop crit grace=10s",
			"20s stopped low",
			"30s stopped crit",
		}
		got := f.lines()
		slices.Sort(got[1:3]) // same instant: either order
		slices.Sort(got[4:6])
		if !slices.Equal(got, want) {
			t.Errorf("shutdown did\n%q\nwant\n%q", got, want)
		}
		if !m.ShuttingDown() {
			t.Error("a finished shutdown no longer counts as shutting down")
		}
		st, err := ReadState(m.cfg.StatePath)
		if err != nil || st.EndTime.Sub(st.StartTime) != 30*time.Second {
			t.Errorf("state %+v, %v; want a 30 s shutdown recorded", st, err)
		}
	})
}

func TestManagerCancelMidGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		m := newTestManager(t, f, "")
		ctx, cancel := context.WithCancel(context.Background())
		defer synctest.Wait() // the stops still under way end with ctx
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- m.Shutdown(ctx) }()
		time.Sleep(5 * time.Second) // fake time inside the bubble
		if !m.Cancel() {
			t.Fatal("Cancel found nothing to cancel")
		}
		if err := <-done; !errors.Is(err, ErrCancelled) {
			t.Fatalf("Shutdown = %v, want ErrCancelled", err)
		}
		got := f.lines()
		if slices.ContainsFunc(got, func(s string) bool { return s == "20s stop crit grace=10s" }) {
			t.Errorf("the critical group was stopped after the cancellation: %q", got)
		}
		if last := got[len(got)-1]; last != "5s node status notReady=[]" {
			t.Errorf("last action %q, want the node status posted Ready again", last)
		}
		if m.ShuttingDown() {
			t.Error("still shutting down after the cancellation")
		}
		// The pods signalled before the cancellation go on stopping.
		time.Sleep(20 * time.Second)
		if got := f.lines(); !slices.Contains(got, "20s stopped low") {
			t.Errorf("the signalled pod's stop was abandoned at the cancellation: %q", got)
		}
	})
}

func TestManagerDisabledDoesNothing(t *testing.T) {
	m, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Shutdown(context.Background()); !errors.Is(err, ErrDisabled) || m.ShuttingDown() {
		t.Errorf("disabled Shutdown = %v, shutting down %v", err, m.ShuttingDown())
	}
}

// blockedPods never manage to post a final status (the API is gone).
type blockedPods struct{ fakePods }

func (b *blockedPods) StopForShutdown(ctx context.Context, uid types.UID, grace time.Duration) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestManagerShutdownIsBoundedWhenTheAPIIsGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &blockedPods{*newFake()}
		m, _ := New(Config{
			Table:          Table(30*time.Second, 10*time.Second, nil),
			Pods:           f,
			SyncNodeStatus: func(context.Context) error { return errors.New("connection refused") },
		})
		start := time.Now()
		err := m.Shutdown(context.Background())
		if took := time.Since(start); took != 50*time.Second {
			t.Errorf("Shutdown took %v (err %v), want the bound: 10 s NotReady wait + 30 s budgets + 10 s for statuses", took, err)
		}
	})
}
