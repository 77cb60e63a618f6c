package apiserver

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodeplane/nodeplane/internal/apiserver/registry"
)

func TestRequestMetricsCountEveryRequestUnderItsLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	leases := &registry.Resource{GroupVersion: schema.GroupVersion{Group: "coordination.k8s.io", Version: "v1"}, Resource: "leases"}
	nodes := &registry.Resource{GroupVersion: schema.GroupVersion{Version: "v1"}, Resource: "nodes"}
	renew := requestInfo{Verb: "update", Namespace: "kube-node-lease", Name: "n1", Resource: "leases"}
	for range 3 {
		m.observe(renew, leases, 200, 2*time.Millisecond)
	}
	m.observe(renew, leases, 409, 20*time.Millisecond)
	m.observe(requestInfo{Verb: "patch", Name: "n1", Resource: "nodes", Subresource: "status"}, nodes, 200, time.Millisecond)
	m.observe(requestInfo{Verb: "watch", Resource: "nodes"}, nodes, 200, 0)
	m.observe(requestInfo{Verb: "list", Resource: "nodes"}, nodes, 200, 3*time.Second)

	text := gatherText(t, reg)
	for _, want := range []string{
		`apiserver_request_total{code="200",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="UPDATE",version="v1"} 3`,
		`apiserver_request_total{code="409",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="UPDATE",version="v1"} 1`,
		`apiserver_request_duration_seconds_count{group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="UPDATE",version="v1"} 4`,
		`apiserver_request_duration_seconds_bucket{group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="UPDATE",version="v1",le="0.0025"} 3`,
		`apiserver_request_total{code="200",group="",resource="nodes",scope="resource",subresource="status",verb="PATCH",version="v1"} 1`,
		`apiserver_request_total{code="200",group="",resource="nodes",scope="cluster",subresource="",verb="WATCH",version="v1"} 1`,
		`apiserver_request_duration_seconds_count{group="",resource="nodes",scope="cluster",subresource="",verb="LIST",version="v1"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(text, `apiserver_request_duration_seconds_count{group="",resource="nodes",scope="cluster",subresource="",verb="WATCH"`) {
		t.Error("a watch's duration was observed")
	}
}

// A client choosing subresource names makes a new label combination per
// request: the looked-up series kept for reuse stay bounded, and every
// request is still counted.
func TestRequestMetricsKeepABoundedNumberOfSeriesAtHand(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	nodes := &registry.Resource{GroupVersion: schema.GroupVersion{Version: "v1"}, Resource: "nodes"}
	for i := range maxSeries + 500 {
		m.observe(requestInfo{Verb: "get", Name: "n", Resource: "nodes", Subresource: fmt.Sprintf("x%d", i)}, nodes, 404, time.Millisecond)
	}
	last := requestInfo{Verb: "get", Name: "n", Resource: "nodes", Subresource: fmt.Sprintf("x%d", maxSeries+499)}
	m.observe(last, nodes, 404, time.Millisecond)
	n := 0
	m.series.Range(func(any, any) bool { n++; return true })
	if n != maxSeries || int(m.nSeries.Load()) != maxSeries {
		t.Errorf("%d series kept (counted %d), want %d", n, m.nSeries.Load(), maxSeries)
	}
	want := fmt.Sprintf(`apiserver_request_total{code="404",group="",resource="nodes",scope="resource",subresource="x%d",verb="GET",version="v1"} 2`, maxSeries+499)
	if text := gatherText(t, reg); !strings.Contains(text, want) {
		t.Errorf("metrics lack %s", want)
	}
}

func BenchmarkRequestMetrics(b *testing.B) {
	m := NewMetrics(prometheus.NewRegistry())
	leases := &registry.Resource{GroupVersion: schema.GroupVersion{Group: "coordination.k8s.io", Version: "v1"}, Resource: "leases"}
	renew := requestInfo{Verb: "update", Namespace: "kube-node-lease", Name: "n1", Resource: "leases"}
	b.ReportAllocs()
	for b.Loop() {
		m.observe(renew, leases, 200, 2*time.Millisecond)
	}
}
