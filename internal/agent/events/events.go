// Package events records core/v1 Events for the node agent (source
// "kubelet") without client-go's broadcaster: one bounded queue and one
// worker per Recorder, so nodeplane sim can share a recorder among thousands
// of simulated nodes. Events are best effort, as upstream's are: when the
// queue is full an event is dropped and counted, never blocking the caller.
//
// It owns only event construction and delivery; what to record is decided by
// the agent's status and pod code.
package events

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Component is the event source the agent reports, as the kubelet does.
const Component = "kubelet"

// Client creates events (a typed corev1.EventsGetter adapter satisfies it).
type Client interface {
	CreateEvent(ctx context.Context, namespace string, e *corev1.Event) error
}

// Config configures a Recorder.
type Config struct {
	Clock  clock.Clock
	Logger *slog.Logger
	// QueueSize bounds pending events (default 1000).
	QueueSize int
}

// Recorder sends events in the background.
type Recorder struct {
	cfg     Config
	queue   chan pending
	dropped atomic.Int64
}

type pending struct {
	client Client
	event  *corev1.Event
}

// New returns a Recorder; call Run to deliver.
func New(cfg Config) *Recorder {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 1000
	}
	return &Recorder{cfg: cfg, queue: make(chan pending, cfg.QueueSize)}
}

// Run delivers queued events until ctx ends.
func (r *Recorder) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-r.queue:
			if err := p.client.CreateEvent(ctx, p.event.Namespace, p.event); err != nil && ctx.Err() == nil {
				r.cfg.Logger.Debug("event not recorded", "reason", p.event.Reason, "object", p.event.InvolvedObject.Name, "err", err)
			}
		}
	}
}

// Dropped counts events discarded because the queue was full.
func (r *Recorder) Dropped() int64 { return r.dropped.Load() }

// NodeRef is how the kubelet refers to its Node in events: UID = node name
// (kubectl describe node looks events up by both).
func NodeRef(node string) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(node), APIVersion: "v1"}
}

// PodRef refers to a pod in events.
func PodRef(p *corev1.Pod) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID, APIVersion: "v1", ResourceVersion: p.ResourceVersion}
}

// Event queues one event about ref, reported by node, through client.
func (r *Recorder) Event(client Client, node string, ref *corev1.ObjectReference, eventType, reason, message string) {
	now := metav1.NewTime(r.cfg.Clock.Now())
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	e := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x", ref.Name, now.UnixNano()),
			Namespace: ns,
		},
		InvolvedObject:      *ref,
		Reason:              reason,
		Message:             message,
		Type:                eventType,
		Source:              corev1.EventSource{Component: Component, Host: node},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: Component,
		ReportingInstance:   node,
	}
	select {
	case r.queue <- pending{client: client, event: e}:
	default:
		r.dropped.Add(1)
	}
}
