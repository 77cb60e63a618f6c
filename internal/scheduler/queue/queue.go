// Package queue is the scheduler's queue of pods waiting for a node. Pods
// live in one of three places:
//
//   - active: ready to be tried, highest priority first, then oldest first;
//   - back-off: tried and failed, waiting out a back-off that starts at
//     InitialBackoff and doubles per attempt up to MaxBackoff (1 s … 10 s,
//     as upstream);
//   - unschedulable: rejected by some plugins and waiting for a cluster event
//     one of those plugins registered for (a node added, a node's taints or
//     labels or allocatable changed, an assigned pod deleted, ...), or for
//     MaxInUnschedulable (5 min) to pass.
//
// Pods with scheduling gates wait among the unschedulable ones until an
// update removes the gates. The queue reads time only from its injected
// clock, owns no goroutine (Pop waits on a timer for the next back-off or
// flush deadline) and knows nothing about how pods are scheduled or bound.
package queue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
)

// ErrClosed is returned by Pop once the queue is closed.
var ErrClosed = errors.New("scheduling queue closed")

// ErrAlreadyQueued is returned by AddUnschedulable for a pod that is queued
// already (it must come from Pop and not have been re-added since).
var ErrAlreadyQueued = errors.New("pod is already queued")

// Config configures a Queue.
type Config struct {
	// Clock provides now and the timers Pop waits on.
	Clock clock.Clock
	// InitialBackoff is the back-off after a pod's first failed attempt; each
	// further attempt doubles it, up to MaxBackoff.
	InitialBackoff time.Duration
	// MaxBackoff caps the back-off.
	MaxBackoff time.Duration
	// MaxInUnschedulable is how long a pod may wait among the unschedulable
	// ones without a relevant event before it is retried anyway.
	MaxInUnschedulable time.Duration
	// PluginEvents lists, per plugin name, the events after which a pod that
	// plugin rejected may fit (framework.Framework.EventsToRegister). A pod
	// rejected by a plugin missing here moves on every event.
	PluginEvents map[string][]framework.ClusterEvent
	// PopFromBackoffQ lets Pop take a pod still backing off when no pod is
	// active, instead of idling (upstream's SchedulerPopFromBackoffQ, on by
	// default since v1.33). Pods backing off after an Error are never taken
	// early.
	PopFromBackoffQ bool
}

// DefaultConfig returns upstream's defaults with the real clock.
func DefaultConfig() Config {
	return Config{
		Clock:              clock.RealClock{},
		InitialBackoff:     time.Second,
		MaxBackoff:         10 * time.Second,
		MaxInUnschedulable: 5 * time.Minute,
		PopFromBackoffQ:    true,
	}
}

// QueuedPodInfo is a pod in the queue with its scheduling history.
type QueuedPodInfo struct {
	Pod *corev1.Pod
	// Timestamp is when the pod entered the queue or, after a failed
	// attempt, when it came back; it orders pods of equal priority and
	// starts the back-off.
	Timestamp time.Time
	// InitialAttemptTimestamp is when the pod was first popped.
	InitialAttemptTimestamp time.Time
	// Attempts counts the pops.
	Attempts int
	// UnschedulablePlugins are the plugins that rejected the pod in its last
	// attempt (framework.Diagnosis.UnschedulablePlugins); empty after an
	// internal error.
	UnschedulablePlugins sets.Set[string]

	key          string
	seq          uint64
	gated        bool
	errorBackoff bool
	backoffUntil time.Time
}

type inFlightPod struct {
	latest  *corev1.Pod // the newest version seen during the attempt
	updated bool
	deleted bool
}

// Stats counts the pods in each part of the queue.
type Stats struct {
	Active, Backoff, Unschedulable, Gated, InFlight int
}

// Queue is the scheduling queue. It is safe for concurrent use: informer
// handlers add, update and delete while the scheduling goroutine pops.
type Queue struct {
	clock              clock.Clock
	initialBackoff     time.Duration
	maxBackoff         time.Duration
	maxInUnschedulable time.Duration
	pluginEvents       map[string][]framework.ClusterEvent
	popFromBackoffQ    bool

	mu            sync.Mutex
	active        *podHeap
	backoff       *podHeap // after rejections; may be popped early
	errorBackoff  *podHeap // after internal errors; never popped early
	unschedulable map[string]*QueuedPodInfo
	// nextFlush is a lower bound of the earliest time a non-gated
	// unschedulable pod reaches MaxInUnschedulable; zero when there is none.
	nextFlush        time.Time
	inFlight         map[string]*inFlightPod
	schedulingCycle  int64
	moveRequestCycle int64
	seq              uint64
	wake             chan struct{}
	closed           bool
}

// New validates cfg and builds a Queue.
func New(cfg Config) (*Queue, error) {
	switch {
	case cfg.Clock == nil:
		return nil, errors.New("queue: nil clock")
	case cfg.InitialBackoff <= 0 || cfg.MaxBackoff < cfg.InitialBackoff:
		return nil, fmt.Errorf("queue: back-off %v…%v: need 0 < initial ≤ max", cfg.InitialBackoff, cfg.MaxBackoff)
	case cfg.MaxInUnschedulable <= 0:
		return nil, fmt.Errorf("queue: max time in unschedulable %v must be positive", cfg.MaxInUnschedulable)
	}
	byPriority := func(a, b *QueuedPodInfo) bool {
		pa, pb := priority(a.Pod), priority(b.Pod)
		if pa != pb {
			return pa > pb
		}
		if !a.Timestamp.Equal(b.Timestamp) {
			return a.Timestamp.Before(b.Timestamp)
		}
		return a.seq < b.seq
	}
	byExpiry := func(a, b *QueuedPodInfo) bool {
		if !a.backoffUntil.Equal(b.backoffUntil) {
			return a.backoffUntil.Before(b.backoffUntil)
		}
		return a.seq < b.seq
	}
	return &Queue{
		clock:              cfg.Clock,
		initialBackoff:     cfg.InitialBackoff,
		maxBackoff:         cfg.MaxBackoff,
		maxInUnschedulable: cfg.MaxInUnschedulable,
		pluginEvents:       cfg.PluginEvents,
		popFromBackoffQ:    cfg.PopFromBackoffQ,
		active:             newPodHeap(byPriority),
		backoff:            newPodHeap(byExpiry),
		errorBackoff:       newPodHeap(byExpiry),
		unschedulable:      make(map[string]*QueuedPodInfo),
		inFlight:           make(map[string]*inFlightPod),
		wake:               make(chan struct{}),
	}, nil
}

func priority(pod *corev1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	return 0
}

func isGated(pod *corev1.Pod) bool { return len(pod.Spec.SchedulingGates) > 0 }

// BackoffDuration is the back-off after attempts failed attempts:
// InitialBackoff doubled attempts−1 times, capped at MaxBackoff; 0 before
// any attempt.
func (q *Queue) BackoffDuration(attempts int) time.Duration {
	if attempts <= 0 {
		return 0
	}
	d := q.initialBackoff
	for i := 1; i < attempts; i++ {
		if d > q.maxBackoff-d {
			return q.maxBackoff
		}
		d += d
	}
	return min(d, q.maxBackoff)
}

// signal wakes every waiting Pop; called with mu held.
func (q *Queue) signal() {
	close(q.wake)
	q.wake = make(chan struct{})
}

func (q *Queue) newInfo(pod *corev1.Pod, now time.Time) *QueuedPodInfo {
	return &QueuedPodInfo{Pod: pod, Timestamp: now, key: framework.PodKey(pod)}
}

func (q *Queue) pushActive(p *QueuedPodInfo) {
	q.seq++
	p.seq = q.seq
	q.active.addOrUpdate(p)
}

func (q *Queue) pushBackoff(p *QueuedPodInfo) {
	q.seq++
	p.seq = q.seq
	p.backoffUntil = p.Timestamp.Add(q.BackoffDuration(p.Attempts))
	if p.errorBackoff {
		q.errorBackoff.addOrUpdate(p)
	} else {
		q.backoff.addOrUpdate(p)
	}
}

func (q *Queue) pushUnschedulable(p *QueuedPodInfo) {
	q.unschedulable[p.key] = p
	if p.gated {
		return
	}
	if due := p.Timestamp.Add(q.maxInUnschedulable); q.nextFlush.IsZero() || due.Before(q.nextFlush) {
		q.nextFlush = due
	}
}

// requeue puts a pod leaving the unschedulable set where it belongs: back-off
// if it is still backing off, else active.
func (q *Queue) requeue(p *QueuedPodInfo, now time.Time) {
	if p.Timestamp.Add(q.BackoffDuration(p.Attempts)).After(now) {
		q.pushBackoff(p)
		return
	}
	q.pushActive(p)
}

// Add queues a new pending pod (or treats it as an update if it is known).
func (q *Queue) Add(pod *corev1.Pod) {
	q.Update(nil, pod)
}

// Update records a new version of a pending pod. A pod waiting among the
// unschedulable ones is retried if its spec, labels or annotations changed,
// or once its scheduling gates are gone; elsewhere the new version just
// replaces the old. An unknown pod is added.
func (q *Queue) Update(oldPod, newPod *corev1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	key := framework.PodKey(newPod)
	if fl, ok := q.inFlight[key]; ok {
		if specChanged(fl.latest, newPod) {
			fl.updated = true
		}
		fl.latest = newPod
		return
	}
	for _, h := range []*podHeap{q.active, q.backoff, q.errorBackoff} {
		if p := h.get(key); p != nil {
			p.Pod = newPod
			h.addOrUpdate(p)
			return
		}
	}
	if p, ok := q.unschedulable[key]; ok {
		base := oldPod
		if base == nil {
			base = p.Pod
		}
		p.Pod = newPod
		if p.gated {
			if isGated(newPod) {
				return
			}
			p.gated = false
		} else if !specChanged(base, newPod) {
			return
		}
		delete(q.unschedulable, key)
		q.requeue(p, now)
		q.signal()
		return
	}
	p := q.newInfo(newPod, now)
	if isGated(newPod) {
		p.gated = true
		q.pushUnschedulable(p)
		return
	}
	q.pushActive(p)
	q.signal()
}

// specChanged reports whether an update can change scheduling: anything but
// status and bookkeeping metadata.
func specChanged(a, b *corev1.Pod) bool {
	return !maps.Equal(a.Labels, b.Labels) || !maps.Equal(a.Annotations, b.Annotations) ||
		!equality.Semantic.DeepEqual(a.Spec, b.Spec)
}

// Delete removes a pod wherever it is; a pod being scheduled is dropped when
// its attempt ends.
func (q *Queue) Delete(pod *corev1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	key := framework.PodKey(pod)
	if fl, ok := q.inFlight[key]; ok {
		fl.deleted = true
	}
	q.active.remove(key)
	q.backoff.remove(key)
	q.errorBackoff.remove(key)
	delete(q.unschedulable, key)
}

// Pop blocks until a pod is ready, ctx is done or the queue is closed, and
// returns the pod with its attempt counted. The pod is then in flight: end
// its attempt with Done (scheduled) or AddUnschedulable (not).
func (q *Queue) Pop(ctx context.Context) (*QueuedPodInfo, error) {
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return nil, ErrClosed
		}
		now := q.clock.Now()
		q.flush(now)
		p := q.active.pop()
		if p == nil && q.popFromBackoffQ {
			p = q.backoff.pop()
		}
		if p != nil {
			p.Attempts++
			if p.InitialAttemptTimestamp.IsZero() {
				p.InitialAttemptTimestamp = now
			}
			q.schedulingCycle++
			q.inFlight[p.key] = &inFlightPod{latest: p.Pod}
			q.mu.Unlock()
			return p, nil
		}
		wake := q.wake
		deadline, ok := q.nextDeadline()
		q.mu.Unlock()

		var timer clock.Timer
		var fired <-chan time.Time
		if ok {
			timer = q.clock.NewTimer(deadline.Sub(now))
			fired = timer.C()
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return nil, ctx.Err()
		case <-wake:
		case <-fired:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// flush moves pods whose back-off has ended to active, and pods that waited
// MaxInUnschedulable among the unschedulable ones on.
func (q *Queue) flush(now time.Time) {
	for _, h := range []*podHeap{q.backoff, q.errorBackoff} {
		for p := h.peek(); p != nil && !p.backoffUntil.After(now); p = h.peek() {
			h.pop()
			q.pushActive(p)
		}
	}
	if q.nextFlush.IsZero() || now.Before(q.nextFlush) {
		return
	}
	q.nextFlush = time.Time{}
	for key, p := range q.unschedulable {
		if p.gated {
			continue
		}
		due := p.Timestamp.Add(q.maxInUnschedulable)
		if due.After(now) {
			if q.nextFlush.IsZero() || due.Before(q.nextFlush) {
				q.nextFlush = due
			}
			continue
		}
		delete(q.unschedulable, key)
		q.requeue(p, now)
	}
}

// nextDeadline is when the next back-off ends or the next unschedulable pod
// is due.
func (q *Queue) nextDeadline() (time.Time, bool) {
	var next time.Time
	consider := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, h := range []*podHeap{q.backoff, q.errorBackoff} {
		if p := h.peek(); p != nil {
			consider(p.backoffUntil)
		}
	}
	if !q.nextFlush.IsZero() {
		consider(q.nextFlush)
	}
	return next, !next.IsZero()
}

// Done ends the attempt of a pod that was scheduled.
func (q *Queue) Done(pod *corev1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.inFlight, framework.PodKey(pod))
}

// AddUnschedulable ends the attempt of a pod that could not be scheduled in
// scheduling cycle podSchedulingCycle (SchedulingCycle() right after its
// Pop). p.UnschedulablePlugins says which plugins rejected it (empty after an
// internal error). The pod goes to back-off if it failed with an error, if it
// was updated during the attempt, or if a cluster event arrived since the
// cycle began (that event may already have made it fit); otherwise it waits
// among the unschedulable pods for a relevant event. A pod deleted during the
// attempt is dropped.
func (q *Queue) AddUnschedulable(p *QueuedPodInfo, podSchedulingCycle int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if p.key == "" {
		p.key = framework.PodKey(p.Pod)
	}
	fl := q.inFlight[p.key]
	delete(q.inFlight, p.key)
	if fl != nil && fl.deleted {
		return nil
	}
	if q.active.get(p.key) != nil || q.backoff.get(p.key) != nil || q.errorBackoff.get(p.key) != nil || q.unschedulable[p.key] != nil {
		return fmt.Errorf("add unschedulable pod %s/%s: %w", p.Pod.Namespace, p.Pod.Name, ErrAlreadyQueued)
	}
	updated := fl != nil && fl.updated
	if updated {
		p.Pod = fl.latest
	}
	p.Timestamp = q.clock.Now()
	p.errorBackoff = len(p.UnschedulablePlugins) == 0
	switch {
	case p.errorBackoff, updated, q.moveRequestCycle >= podSchedulingCycle:
		q.pushBackoff(p)
	default:
		q.pushUnschedulable(p)
	}
	q.signal()
	return nil
}

// SchedulingCycle returns the number of pops so far; the cycle of the pod
// just popped.
func (q *Queue) SchedulingCycle() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.schedulingCycle
}

// MoveAllToActiveOrBackoff reacts to a cluster event: every unschedulable pod
// rejected by a plugin interested in event moves to active (or to back-off
// if its back-off has not ended). Pods being scheduled right now will go to
// back-off rather than wait when their attempt fails.
func (q *Queue) MoveAllToActiveOrBackoff(event framework.ClusterEvent) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	moved := false
	for key, p := range q.unschedulable {
		if p.gated || !q.interested(p, event) {
			continue
		}
		delete(q.unschedulable, key)
		q.requeue(p, now)
		moved = true
	}
	q.moveRequestCycle = q.schedulingCycle
	if moved {
		q.signal()
	}
}

func (q *Queue) interested(p *QueuedPodInfo, event framework.ClusterEvent) bool {
	if event.Resource == framework.WildCard || len(p.UnschedulablePlugins) == 0 {
		return true
	}
	for name := range p.UnschedulablePlugins {
		events, ok := q.pluginEvents[name]
		if !ok {
			return true
		}
		for _, e := range events {
			if e.Match(event) {
				return true
			}
		}
	}
	return false
}

// Close makes Pop return ErrClosed.
func (q *Queue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		q.signal()
	}
}

// Stats counts the pods in each part of the queue, after moving the ones
// whose back-off or wait is over.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.flush(q.clock.Now())
	s := Stats{
		Active:   q.active.Len(),
		Backoff:  q.backoff.Len() + q.errorBackoff.Len(),
		InFlight: len(q.inFlight),
	}
	for _, p := range q.unschedulable {
		if p.gated {
			s.Gated++
		} else {
			s.Unschedulable++
		}
	}
	return s
}

// PendingPods returns every queued pod (not those in flight).
func (q *Queue) PendingPods() []*corev1.Pod {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []*corev1.Pod
	for _, h := range []*podHeap{q.active, q.backoff, q.errorBackoff} {
		for _, p := range h.items {
			out = append(out, p.Pod)
		}
	}
	for _, p := range q.unschedulable {
		out = append(out, p.Pod)
	}
	return out
}
