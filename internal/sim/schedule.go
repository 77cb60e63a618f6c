package sim

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// task is one node's recurring job (a lease renewal or a status pass).
type task struct {
	due time.Time
	run func(ctx context.Context) time.Duration // returns the wait until the next run
}

type taskHeap []*task

func (h taskHeap) Len() int           { return len(h) }
func (h taskHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h taskHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *taskHeap) Push(x any)        { *h = append(*h, x.(*task)) }
func (h *taskHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return t
}

// scheduler runs many nodes' recurring jobs on a fixed pool of workers
// instead of a goroutine (and timer) per node and job: it is what lets
// thousands of simulated nodes fit in one process.
type scheduler struct {
	clock clock.WithTicker

	mu    sync.Mutex
	tasks taskHeap
	wake  chan struct{}
	ready chan *task
}

func newScheduler(clk clock.WithTicker, workers int) *scheduler {
	return &scheduler{clock: clk, wake: make(chan struct{}, 1), ready: make(chan *task, workers)}
}

// add schedules run at due.
func (s *scheduler) add(due time.Time, run func(ctx context.Context) time.Duration) {
	s.mu.Lock()
	heap.Push(&s.tasks, &task{due: due, run: run})
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run dispatches due tasks to workers until ctx ends.
func (s *scheduler) run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case t := <-s.ready:
					next := t.run(ctx)
					if ctx.Err() != nil {
						return
					}
					t.due = s.clock.Now().Add(next)
					s.mu.Lock()
					heap.Push(&s.tasks, t)
					s.mu.Unlock()
					select {
					case s.wake <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	defer wg.Wait()
	for {
		s.mu.Lock()
		var wait time.Duration = time.Hour
		var due *task
		if len(s.tasks) > 0 {
			if d := s.tasks[0].due.Sub(s.clock.Now()); d <= 0 {
				due = heap.Pop(&s.tasks).(*task)
			} else {
				wait = d
			}
		}
		s.mu.Unlock()
		if due != nil {
			select {
			case s.ready <- due:
			case <-ctx.Done():
				return
			}
			continue
		}
		timer := s.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-s.wake:
			timer.Stop()
		case <-timer.C():
		}
	}
}
