package etcd

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

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
