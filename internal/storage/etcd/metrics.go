package etcd

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// operation names one Store method in metrics.
type operation int

const (
	opGet operation = iota
	opList
	opCount
	opCreate
	opUpdate
	opDelete
	opWatch
	opCurrentRevision
	opCompact
	numOperations
)

var operationNames = [numOperations]string{
	opGet:             "get",
	opList:            "list",
	opCount:           "count",
	opCreate:          "create",
	opUpdate:          "update",
	opDelete:          "delete",
	opWatch:           "watch",
	opCurrentRevision: "current_revision",
	opCompact:         "compact",
}

func (o operation) String() string { return operationNames[o] }

// Metrics records how long storage requests take. Create it with NewMetrics
// and pass it in Config; a Store without Metrics records nothing.
type Metrics struct {
	// requestDuration is nodeplane_storage_request_duration_seconds. Watch
	// measures the time to establish the watch, not its lifetime.
	requestDuration [numOperations]prometheus.Observer
}

// NewMetrics creates the storage metrics and registers them with reg. The
// observer for each operation is resolved here so the request path does no
// label lookups.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	vec := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "nodeplane",
		Subsystem: "storage",
		Name:      "request_duration_seconds",
		Help:      "Latency of storage requests to etcd by operation, including failed ones.",
		// 100µs (an in-process read) to ~13s (a stalled cluster).
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
	}, []string{"operation"})
	if err := reg.Register(vec); err != nil {
		return nil, fmt.Errorf("register storage metrics: %w", err)
	}
	m := &Metrics{}
	for op := range numOperations {
		m.requestDuration[op] = vec.WithLabelValues(op.String())
	}
	return m, nil
}

// observe records one request; it is a no-op on a nil *Metrics.
func (m *Metrics) observe(op operation, d time.Duration) {
	if m == nil {
		return
	}
	m.requestDuration[op].Observe(d.Seconds())
}

// WALFsyncs sums etcd's WAL fsync histogram (etcd_disk_wal_fsync_duration_seconds),
// which embedded members register with g (normally prometheus.DefaultGatherer):
// how many fsyncs ran and how long they took in all. Benchmarks divide it by
// the writes they made to show whether a write waited for an fsync.
func WALFsyncs(g prometheus.Gatherer) (count uint64, seconds float64, err error) {
	families, err := g.Gather()
	if err != nil {
		return 0, 0, fmt.Errorf("gather metrics: %w", err)
	}
	for _, f := range families {
		if f.GetName() != "etcd_disk_wal_fsync_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			count += m.GetHistogram().GetSampleCount()
			seconds += m.GetHistogram().GetSampleSum()
		}
	}
	return count, seconds, nil
}
