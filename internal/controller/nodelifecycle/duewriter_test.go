package nodelifecycle

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func dueResult(names ...string) PassResult {
	var res PassResult
	for _, n := range names {
		res.StatusUpdates = append(res.StatusUpdates, StatusUpdate{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}})
	}
	return res
}

// finished is what the due writer's finish saw, in its order.
type finished struct {
	mu      sync.Mutex
	results [][]string        // each result's nodes
	failed  []map[string]bool // each result's failed writes
	ch      chan struct{}     // one send per result
}

func (f *finished) finish(_ context.Context, res PassResult, failed map[string]bool) {
	var names []string
	for _, u := range res.StatusUpdates {
		names = append(names, u.Node.Name)
	}
	f.mu.Lock()
	f.results = append(f.results, names)
	f.failed = append(f.failed, failed)
	f.mu.Unlock()
	f.ch <- struct{}{}
}

// A due pass hands its writes over and goes on: the next pass's writes go
// out while an earlier one's slow write is still on its way, and what
// follows each pass's writes is done in the passes' order, once its own
// writes are done, knowing which of them failed.
func TestDueWritesDoNotHoldUpTheNextPass(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	slow := make(chan struct{})
	wrote := make(chan string, 16)
	write := func(_ context.Context, u StatusUpdate) bool {
		if u.Node.Name == "slow" {
			<-slow
		}
		wrote <- u.Node.Name
		return u.Node.Name != "refused"
	}
	f := &finished{ch: make(chan struct{}, 16)}
	d := newDueWriter(write, f.finish)
	var wg sync.WaitGroup
	d.start(ctx, &wg)

	submitted := make(chan struct{})
	go func() {
		d.submit(ctx, dueResult("slow", "a"))
		d.submit(ctx, dueResult("b", "refused"))
		d.submit(ctx, PassResult{}) // a pass with taints or logs only
		close(submitted)
	}()
	select {
	case <-submitted:
	case <-time.After(30 * time.Second):
		t.Fatal("submitting three passes waited for a write")
	}
	// Every write but the slow one is made while the slow one hangs.
	for range 3 {
		select {
		case <-wrote:
		case <-time.After(30 * time.Second):
			t.Fatal("the later passes' writes did not go out beside the slow one")
		}
	}
	// Nothing is finished while the first pass's slow write is out: the
	// finish of the later passes waits its turn. Watched for a bounded
	// window; the first sighting fails.
	select {
	case <-f.ch:
		t.Fatalf("a pass was finished before the first pass's writes were done: %v", f.results)
	case <-time.After(200 * time.Millisecond):
	}
	close(slow)
	for i := range 3 {
		select {
		case <-f.ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("pass %d was not finished", i)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if got := fmt.Sprint(f.results); got != "[[slow a] [b refused] []]" {
		t.Errorf("finished %s, want the passes in order", got)
	}
	if !f.failed[1]["refused"] || len(f.failed[1]) != 1 || len(f.failed[0]) != 0 {
		t.Errorf("failed writes %v, want only the second pass's refused one", f.failed)
	}
	cancel()
	wg.Wait()
}

// When the term ends the writers and the finisher stop, even with writes
// waiting and a pass unfinished.
func TestDueWriterStopsWithItsTerm(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	block := make(chan struct{})
	defer close(block)
	write := func(ctx context.Context, _ StatusUpdate) bool {
		select {
		case <-block:
		case <-ctx.Done():
		}
		return false
	}
	d := newDueWriter(write, func(context.Context, PassResult, map[string]bool) {})
	var wg sync.WaitGroup
	d.start(ctx, &wg)
	names := make([]string, 2*dueWorkers)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i)
	}
	d.submit(ctx, dueResult(names...))
	cancel()
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("the due writer did not stop with its term")
	}
}
