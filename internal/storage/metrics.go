package storage

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Operation names one Interface method in metrics.
type Operation int

// The operations a backend records, one per Interface method but Close.
const (
	OpGet Operation = iota
	OpList
	OpCount
	OpCreate
	OpUpdate
	OpDelete
	OpWatch
	OpCurrentRevision
	OpCompact
	numOperations
)

var operationNames = [numOperations]string{
	OpGet:             "get",
	OpList:            "list",
	OpCount:           "count",
	OpCreate:          "create",
	OpUpdate:          "update",
	OpDelete:          "delete",
	OpWatch:           "watch",
	OpCurrentRevision: "current_revision",
	OpCompact:         "compact",
}

// String returns the operation's label value.
func (o Operation) String() string { return operationNames[o] }

// Metrics is the one request-latency histogram that every backend records
// into, nodeplane_storage_request_duration_seconds{backend, operation}: it
// is registered once (NewMetrics) and each store gets its backend's
// observers (Backend), so two backends never register the same name twice.
type Metrics struct {
	requestDuration *prometheus.HistogramVec
}

// NewMetrics creates the storage metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	vec := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "nodeplane",
		Subsystem: "storage",
		Name:      "request_duration_seconds",
		Help:      "Latency of storage requests by backend (etcd, memory) and operation, including failed ones.",
		// 5µs (the in-memory store's compare-and-swap) to ~10s (a stalled
		// etcd cluster).
		Buckets: prometheus.ExponentialBuckets(0.000005, 2, 22),
	}, []string{"backend", "operation"})
	if err := reg.Register(vec); err != nil {
		return nil, fmt.Errorf("register storage metrics: %w", err)
	}
	return &Metrics{requestDuration: vec}, nil
}

// Backend returns the observers of one backend, by the name the backend
// label shows ("etcd", "memory"). They are resolved here, one per
// operation, so that recording a request does no label lookup. Stores of
// the same backend may share them. A nil *Metrics returns nil, which
// records nothing.
func (m *Metrics) Backend(name string) *BackendMetrics {
	if m == nil {
		return nil
	}
	b := &BackendMetrics{}
	for op := range numOperations {
		b.requestDuration[op] = m.requestDuration.WithLabelValues(name, op.String())
	}
	return b
}

// BackendMetrics records how long one backend's requests take. Watch
// measures the time to establish the watch, not its lifetime.
type BackendMetrics struct {
	requestDuration [numOperations]prometheus.Observer
}

// Observe records one request of op that took d; it is a no-op on a nil
// *BackendMetrics.
func (b *BackendMetrics) Observe(op Operation, d time.Duration) {
	if b == nil {
		return
	}
	b.requestDuration[op].Observe(d.Seconds())
}
