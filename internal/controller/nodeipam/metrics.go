package nodeipam

import "github.com/prometheus/client_golang/prometheus"

// Metrics are upstream's cidrset metrics (subsystem node_ipam_controller,
// label clusterCIDR). A nil *Metrics records nothing.
type Metrics struct {
	allocations *prometheus.CounterVec
	releases    *prometheus.CounterVec
	usage       *prometheus.GaugeVec
	maxCIDRs    *prometheus.GaugeVec
	triesPerReq *prometheus.HistogramVec
}

const metricsSubsystem = "node_ipam_controller"

// NewMetrics builds the metrics and registers them with reg (when not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	label := []string{"clusterCIDR"}
	m := &Metrics{
		allocations: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: metricsSubsystem, Name: "cidrset_cidrs_allocations_total",
			Help: "Counter measuring total number of CIDR allocations."}, label),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: metricsSubsystem, Name: "cidrset_cidrs_releases_total",
			Help: "Counter measuring total number of CIDR releases."}, label),
		usage: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: metricsSubsystem, Name: "cidrset_usage_cidrs",
			Help: "Gauge measuring percentage of allocated CIDRs."}, label),
		maxCIDRs: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: metricsSubsystem, Name: "cidrset_max_cidrs",
			Help: "Maximum number of CIDRs that can be allocated."}, label),
		triesPerReq: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: metricsSubsystem, Name: "cidrset_allocation_tries_per_request",
			Help: "Number of endpoints added on each Service sync", Buckets: prometheus.ExponentialBuckets(1, 5, 5)}, label),
	}
	if reg != nil {
		reg.MustRegister(m.allocations, m.releases, m.usage, m.maxCIDRs, m.triesPerReq)
	}
	return m
}

func (m *Metrics) allocated(label string, n int) {
	if m != nil && n > 0 {
		m.allocations.WithLabelValues(label).Add(float64(n))
	}
}

func (m *Metrics) released(label string, n int) {
	if m != nil && n > 0 {
		m.releases.WithLabelValues(label).Add(float64(n))
	}
}

func (m *Metrics) tries(label string, n int) {
	if m != nil {
		m.triesPerReq.WithLabelValues(label).Observe(float64(n))
	}
}

func (m *Metrics) setUsage(label string, v float64) {
	if m != nil {
		m.usage.WithLabelValues(label).Set(v)
	}
}

func (m *Metrics) setMax(label string, n int) {
	if m != nil {
		m.maxCIDRs.WithLabelValues(label).Set(float64(n))
	}
}
