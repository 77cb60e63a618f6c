package nodelifecycle

import (
	"context"
	"sync"
	"sync/atomic"
)

// dueBacklog bounds the due passes' writes on their way: past it a due
// pass waits to hand its writes over, and past dueBatches results waiting
// for their writes it waits to hand its result over.
const (
	dueBacklog = 4096
	dueBatches = 64
)

// dueWriter carries out the due passes' results without holding up the
// passes: their status writes go to dueWorkers writers of their own, in
// the order the passes judged them, and what follows a result's writes
// (pods, taints, logs, metrics: finish) is done in that order too, each
// once its own writes are done. Before, a due pass waited for its slowest
// write, and nodes that came due meanwhile waited for it as well.
type dueWriter struct {
	write   func(context.Context, StatusUpdate) bool // reports whether the write was made
	finish  func(ctx context.Context, res PassResult, failed map[string]bool)
	writes  chan dueWrite
	batches chan *dueBatch
}

// dueBatch is one due pass's result on its way.
type dueBatch struct {
	res    PassResult
	left   atomic.Int64  // writes not done yet
	done   chan struct{} // closed when left reaches 0
	mu     sync.Mutex
	failed map[string]bool // nodes whose write was not made
}

type dueWrite struct {
	b *dueBatch
	u StatusUpdate
}

func newDueWriter(write func(context.Context, StatusUpdate) bool, finish func(context.Context, PassResult, map[string]bool)) *dueWriter {
	return &dueWriter{write: write, finish: finish, writes: make(chan dueWrite, dueBacklog), batches: make(chan *dueBatch, dueBatches)}
}

// start runs the writers and the finisher until ctx ends.
func (d *dueWriter) start(ctx context.Context, wg *sync.WaitGroup) {
	for range dueWorkers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case w := <-d.writes:
					if !d.write(ctx, w.u) {
						w.b.mu.Lock()
						w.b.failed[w.u.Node.Name] = true
						w.b.mu.Unlock()
					}
					if w.b.left.Add(-1) == 0 {
						close(w.b.done)
					}
				}
			}
		})
	}
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case b := <-d.batches:
				select {
				case <-ctx.Done():
					return
				case <-b.done:
				}
				d.finish(ctx, b.res, b.failed)
			}
		}
	})
}

// submit hands res over: its batch first (the finisher takes batches in
// order), then its writes. It waits only when the backlog is full.
func (d *dueWriter) submit(ctx context.Context, res PassResult) {
	b := &dueBatch{res: res, done: make(chan struct{}), failed: map[string]bool{}}
	b.left.Store(int64(len(res.StatusUpdates)))
	if len(res.StatusUpdates) == 0 {
		close(b.done)
	}
	select {
	case d.batches <- b:
	case <-ctx.Done():
		return
	}
	for _, u := range res.StatusUpdates {
		select {
		case d.writes <- dueWrite{b, u}:
		case <-ctx.Done():
			return
		}
	}
}
