package manager

import (
	"context"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// EventRecorder returns a recorder that writes events as component through
// client, and the function that flushes and stops it. The broadcaster
// outlives ctx until stop is called, so events of a sync still in flight
// when the term ends are not refused.
func EventRecorder(ctx context.Context, client kubernetes.Interface, component string) (record.EventRecorder, func()) {
	bcast := record.NewBroadcaster(record.WithContext(context.WithoutCancel(ctx)))
	bcast.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return bcast.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component}), bcast.Shutdown
}

// SyncFunc syncs one key. A returned duration > 0 asks for another sync
// that much later; an error retries with the queue's rate limiting.
type SyncFunc func(ctx context.Context, key string) (requeueAfter time.Duration, err error)

// RunWorkers runs workers goroutines that take keys from queue and sync
// them (the sample-controller loop: Get → sync → Forget or AddRateLimited →
// Done) until ctx ends; then it shuts the queue down and waits for them.
// Failures are logged with what (e.g. "replica set") naming the key.
func RunWorkers(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string], workers int, syncKey SyncFunc, log *slog.Logger, what string) {
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for processNext(ctx, queue, syncKey, log, what) {
			}
		}()
	}
	<-ctx.Done()
	queue.ShutDown()
	wg.Wait()
}

func processNext(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string], syncKey SyncFunc, log *slog.Logger, what string) bool {
	key, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(key)
	requeue, err := syncKey(ctx, key)
	switch {
	case err != nil && ctx.Err() == nil:
		log.Warn("sync "+what, "key", key, "err", err)
		queue.AddRateLimited(key)
	case err == nil:
		queue.Forget(key)
		if requeue > 0 {
			queue.AddAfter(key, requeue)
		}
	}
	return true
}

// NewQueue returns the work queue of string keys a controller shell uses:
// client-go's default controller rate limiting (per-item exponential back-off
// plus an overall token bucket), named for the workqueue metrics, on clk.
func NewQueue(name string, clk clock.WithTicker) workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name, Clock: clk})
}

// OnAddOrUpdate calls handle with every object inf adds or updates (the
// current version): the level-based controllers that enqueue a key for
// what they see and ignore deletions.
func OnAddOrUpdate(inf cache.SharedInformer, handle func(obj any)) error {
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, cur any) { handle(cur) },
	})
	return err
}
