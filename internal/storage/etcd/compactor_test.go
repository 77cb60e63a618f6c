package etcd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeplane/nodeplane/internal/storage"
)

// fakeCompacter serves scripted revisions and records compactions.
type fakeCompacter struct {
	mu         sync.Mutex
	revisions  []int64 // returned by successive CurrentRevision calls; 0 fails
	compacted  []int64
	compactErr error
}

func (f *fakeCompacter) CurrentRevision(context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.revisions) == 0 {
		return 0, errors.New("script exhausted")
	}
	rev := f.revisions[0]
	f.revisions = f.revisions[1:]
	if rev == 0 {
		return 0, fmt.Errorf("read revision: %w", storage.ErrUnavailable)
	}
	return rev, nil
}

func (f *fakeCompacter) Compact(_ context.Context, rev int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.compacted = append(f.compacted, rev)
	return f.compactErr
}

func TestRunCompactor(t *testing.T) {
	const interval = 5 * time.Minute
	tests := []struct {
		name       string
		revisions  []int64 // at start, then after each tick
		compactErr error
		ticks      int
		want       []int64
		wantLog    string // "" means nothing logged
	}{
		{
			name:      "nothing is compacted before the first interval has passed",
			revisions: []int64{10},
			ticks:     0,
		},
		{
			name:      "each tick compacts to the revision read one interval earlier",
			revisions: []int64{10, 25, 40, 41},
			ticks:     3,
			want:      []int64{10, 25, 40},
		},
		{
			name:      "a failed revision read keeps the older target for the next tick",
			revisions: []int64{10, 0, 40},
			ticks:     3,
			want:      []int64{10, 10, 40},
			wantLog:   "storage revision read failed",
		},
		{
			name:      "a failed read at start compacts nothing on the first tick",
			revisions: []int64{0, 25, 40},
			ticks:     2,
			want:      []int64{25},
			wantLog:   "storage revision read failed",
		},
		{
			name:       "a compaction another server already did is not an error",
			revisions:  []int64{10, 25},
			compactErr: fmt.Errorf("compact: %w", storage.ErrCompacted),
			ticks:      1,
			want:       []int64{10},
		},
		{
			name:       "a failed compaction is logged and retried with the next target",
			revisions:  []int64{10, 25, 40},
			compactErr: fmt.Errorf("compact: %w", storage.ErrUnavailable),
			ticks:      2,
			want:       []int64{10, 25},
			wantLog:    "storage compaction failed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logs bytes.Buffer
				store := &fakeCompacter{revisions: tt.revisions, compactErr: tt.compactErr}
				clk := clocktesting.NewFakeClock(time.Unix(0, 0))
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() {
					defer close(done)
					RunCompactor(ctx, store, CompactorConfig{Interval: interval, Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
				}()
				synctest.Wait()
				for range tt.ticks {
					clk.Step(interval)
					synctest.Wait()
				}
				clk.Step(interval - time.Second) // not yet a full interval
				synctest.Wait()
				cancel()
				<-done

				if !slices.Equal(store.compacted, tt.want) {
					t.Errorf("compacted to %v, want %v", store.compacted, tt.want)
				}
				got := logs.String()
				if tt.wantLog == "" && got != "" || !strings.Contains(got, tt.wantLog) {
					t.Errorf("logs = %q, want %q", got, tt.wantLog)
				}
			})
		})
	}
}

func TestRunCompactorCompactsARealStore(t *testing.T) {
	s := newTestStore(t, startMember(t, EmbeddedConfig{}))
	old, err := s.Create(t.Context(), "/compactor/k", []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(t.Context(), "/compactor/k", []byte("v2"), old); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go RunCompactor(ctx, s, CompactorConfig{Interval: time.Minute, Clock: clk, Logger: testLogger(t)})

	// The compactor reads the revision at start, then compacts to it one
	// interval later. Step until it has, bounded, since the compactor runs
	// on its own goroutine against a real store.
	wait, stop := context.WithTimeout(t.Context(), 10*time.Second)
	defer stop()
	for {
		if _, err := s.List(t.Context(), "/compactor/", storage.ListOptions{Revision: old}); errors.Is(err, storage.ErrCompacted) {
			break
		}
		if wait.Err() != nil {
			t.Fatal("history before the revision read at start was not compacted")
		}
		if clk.HasWaiters() {
			clk.Step(time.Minute)
		}
		runtime.Gosched()
	}
	got, err := s.Get(t.Context(), "/compactor/k")
	if err != nil || string(got.Value) != "v2" {
		t.Errorf("Get after compaction = %+v, %v; want v2", got, err)
	}
}
