package apiserver

import (
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodeplane/nodeplane/internal/apiserver/registry"
)

// Metrics are the API server's request metrics, named as kube-apiserver's.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	watches  *prometheus.GaugeVec
}

// NewMetrics registers the request metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_request_total",
			Help: "Counter of API requests by verb, group, version, resource, subresource, scope and HTTP response code.",
		}, []string{"verb", "group", "version", "resource", "subresource", "scope", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_request_duration_seconds",
			Help:    "Response latency of API requests (watches excluded) by verb, group, version, resource, subresource and scope.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"verb", "group", "version", "resource", "subresource", "scope"}),
		watches: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_longrunning_requests",
			Help: "Number of open long-running requests (watches) by resource.",
		}, []string{"verb", "group", "version", "resource", "subresource", "scope"}),
	}
	reg.MustRegister(m.requests, m.latency, m.watches)
	return m
}

func scopeOf(info requestInfo) string {
	switch {
	case info.Name != "":
		return "resource"
	case info.Namespace != "":
		return "namespace"
	default:
		return "cluster"
	}
}

func (m *Metrics) observe(info requestInfo, r *registry.Resource, code int, d time.Duration) {
	verb := strings.ToUpper(info.Verb)
	scope := scopeOf(info)
	m.requests.WithLabelValues(verb, r.GroupVersion.Group, r.GroupVersion.Version, r.Resource, info.Subresource, scope, strconv.Itoa(code)).Inc()
	if info.Verb != "watch" {
		m.latency.WithLabelValues(verb, r.GroupVersion.Group, r.GroupVersion.Version, r.Resource, info.Subresource, scope).Observe(d.Seconds())
	}
}

func (m *Metrics) watchStarted(r *registry.Resource) {
	m.watches.WithLabelValues("WATCH", r.GroupVersion.Group, r.GroupVersion.Version, r.Resource, "", "").Inc()
}

func (m *Metrics) watchEnded(r *registry.Resource) {
	m.watches.WithLabelValues("WATCH", r.GroupVersion.Group, r.GroupVersion.Version, r.Resource, "", "").Dec()
}
