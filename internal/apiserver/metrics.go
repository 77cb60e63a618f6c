package apiserver

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodeplane/nodeplane/internal/apiserver/registry"
)

// Metrics are the API server's request metrics, named as kube-apiserver's.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	watches  *prometheus.GaugeVec

	// series keeps each label combination's counter and histogram once
	// looked up (a seriesKey to a *series), so that a request costs a map
	// read instead of hashing seven label values twice; at most maxSeries
	// combinations are kept, the rest are looked up every time.
	series  sync.Map
	nSeries atomic.Int32
}

// maxSeries bounds Metrics.series: a client choosing subresource names
// must not grow it without end.
const maxSeries = 4096

// seriesKey is what the request metrics' labels are made of.
type seriesKey struct {
	r           *registry.Resource
	verb        string
	subresource string
	scope       string
	code        int
	watch       bool
}

// series is one label combination's counter and (not for watches) latency
// histogram.
type series struct {
	requests prometheus.Counter
	latency  prometheus.Observer
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
	k := seriesKey{r: r, verb: info.Verb, subresource: info.Subresource, scope: scopeOf(info), code: code, watch: info.Verb == "watch"}
	sr := m.seriesOf(k)
	sr.requests.Inc()
	if sr.latency != nil {
		sr.latency.Observe(d.Seconds())
	}
}

// seriesOf returns k's counter and histogram, looked up once.
func (m *Metrics) seriesOf(k seriesKey) *series {
	if v, ok := m.series.Load(k); ok {
		return v.(*series)
	}
	verb := strings.ToUpper(k.verb)
	g, v := k.r.GroupVersion.Group, k.r.GroupVersion.Version
	sr := &series{requests: m.requests.WithLabelValues(verb, g, v, k.r.Resource, k.subresource, k.scope, strconv.Itoa(k.code))}
	if !k.watch {
		sr.latency = m.latency.WithLabelValues(verb, g, v, k.r.Resource, k.subresource, k.scope)
	}
	// A place is taken before the series is stored, so that concurrent
	// first lookups cannot keep more than maxSeries.
	if m.nSeries.Add(1) > maxSeries {
		m.nSeries.Add(-1)
		return sr
	}
	if _, loaded := m.series.LoadOrStore(k, sr); loaded {
		m.nSeries.Add(-1)
	}
	return sr
}

func (m *Metrics) watchStarted(r *registry.Resource) {
	m.watches.WithLabelValues("WATCH", r.GroupVersion.Group, r.GroupVersion.Version, r.Resource, "", "").Inc()
}

func (m *Metrics) watchEnded(r *registry.Resource) {
	m.watches.WithLabelValues("WATCH", r.GroupVersion.Group, r.GroupVersion.Version, r.Resource, "", "").Dec()
}
