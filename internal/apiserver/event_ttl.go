package apiserver

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodeplane/nodeplane/internal/apiserver/store"
	"github.com/nodeplane/nodeplane/internal/storage"
)

var eventsResource = schema.GroupVersionResource{Version: "v1", Resource: "events"}

// eventExpired reports whether an event was last seen more than ttl before
// now (kube-apiserver's --event-ttl: events are removed an hour after their
// last write by default).
func eventExpired(e *corev1.Event, now time.Time, ttl time.Duration) bool {
	last := e.CreationTimestamp.Time
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time} {
		if t.After(last) {
			last = t
		}
	}
	if e.Series != nil && e.Series.LastObservedTime.After(last) {
		last = e.Series.LastObservedTime.Time
	}
	return now.Sub(last) > ttl
}

// runEventTTL deletes expired events every ttl/10 until ctx ends.
func (s *Server) runEventTTL(ctx context.Context) {
	h, ok := s.resources[eventsResource]
	if !ok || s.cfg.EventTTL <= 0 {
		return
	}
	period := s.cfg.EventTTL / 10
	if period < time.Second {
		period = time.Second
	}
	ticker := s.cfg.Clock.NewTicker(period)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
		page, err := h.st.ListFromCache(ctx, store.Predicate{}, 0)
		if err != nil {
			continue
		}
		now := s.cfg.Clock.Now()
		for _, obj := range page.Items {
			e := obj.(*corev1.Event)
			if !eventExpired(e, now, s.cfg.EventTTL) {
				continue
			}
			rv, _ := store.ObjectRV(e)
			if _, err := h.st.Delete(ctx, e.Namespace, e.Name, rv); err != nil && !errors.Is(err, storage.ErrNotFound) && !errors.Is(err, storage.ErrConflict) && ctx.Err() == nil {
				s.cfg.Logger.Warn("expire event", "namespace", e.Namespace, "event", e.Name, "err", err)
			}
		}
	}
}
