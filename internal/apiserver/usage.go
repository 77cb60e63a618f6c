package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/nodeplane/nodeplane/internal/apiserver/registry"
	"github.com/nodeplane/nodeplane/internal/apiserver/scraper"
	"github.com/nodeplane/nodeplane/internal/apiserver/store"
)

// ResourceUsage is where metrics.k8s.io answers come from: the latest
// usage of a node or a pod. *scraper.Scraper implements it.
type ResourceUsage interface {
	Node(node string) (scraper.Usage, bool)
	Pod(namespace, name string) (scraper.PodUsage, bool)
}

var (
	nodeMetricsGVR = metricsv1beta1.SchemeGroupVersion.WithResource("nodes")
	podMetricsGVR  = metricsv1beta1.SchemeGroupVersion.WithResource("pods")
)

// usageResources are the metrics.k8s.io/v1beta1 resources, for discovery
// and authorization: computed, never stored, get and list only.
func usageResources() []*registry.Resource {
	gv := metricsv1beta1.SchemeGroupVersion
	return []*registry.Resource{
		{GroupVersion: gv, Resource: "nodes", Singular: "", Kind: "NodeMetrics", ListKind: "NodeMetricsList", ReadOnly: true,
			New: func() runtime.Object { return &metricsv1beta1.NodeMetrics{} }},
		{GroupVersion: gv, Resource: "pods", Singular: "", Kind: "PodMetrics", ListKind: "PodMetricsList", Namespaced: true, ReadOnly: true,
			New: func() runtime.Object { return &metricsv1beta1.PodMetrics{} }},
	}
}

// serveUsage answers get and list of NodeMetrics and PodMetrics, as
// metrics-server does: the objects selected are the Nodes and Pods that
// match the request (name, namespace, label and field selectors, read from
// the watch cache), each with the labels of its object, and only those
// with usage are returned (a get of one without usage is 404).
func (h *resourceHandler) serveUsage(w http.ResponseWriter, r *http.Request, info requestInfo) {
	gr := h.r.GroupResource()
	if info.Subresource != "" {
		writeStatus(w, r, notFoundPath())
		return
	}
	if info.Verb != "get" && info.Verb != "list" {
		writeStatus(w, r, statusOf(apierrors.NewMethodNotSupported(gr, info.Verb)))
		return
	}
	srcGVR := nodesGVR
	if h.r.Namespaced {
		srcGVR = podsGVR
	}
	src := h.s.resources[srcGVR]
	if src == nil {
		writeStatus(w, r, statusOf(apierrors.NewServiceUnavailable("metrics.k8s.io is unavailable: the server does not serve "+srcGVR.Resource)))
		return
	}
	f, ok := negotiate(r, false)
	if !ok {
		writeStatus(w, r, notAcceptable("only application/json, application/yaml and application/vnd.kubernetes.protobuf are supported"))
		return
	}
	now := h.s.cfg.Clock.Now()
	if info.Verb == "get" {
		obj, err := src.current(r.Context(), requestInfo{Namespace: info.Namespace, Name: info.Name}, 0)
		if err != nil {
			writeError(w, r, err, gr, info.Name)
			return
		}
		out, ok := h.usageOf(obj, now)
		if !ok {
			writeError(w, r, apierrors.NewNotFound(gr, info.Name), gr, info.Name)
			return
		}
		writeRaw(w, http.StatusOK, f.info, out)
		return
	}
	p, err := src.parseListParams(r, info)
	if err != nil {
		writeError(w, r, err, gr, "")
		return
	}
	page, err := src.st.ListFromCache(r.Context(), p.pred, 0)
	if err != nil {
		writeError(w, r, err, gr, "")
		return
	}
	var out runtime.Object
	if h.r.Namespaced {
		list := &metricsv1beta1.PodMetricsList{TypeMeta: typeMeta(h.r.ListGVK())}
		for _, it := range page.Items {
			if m, ok := h.usageOf(it, now); ok {
				list.Items = append(list.Items, *m.(*metricsv1beta1.PodMetrics))
			}
		}
		if list.Items == nil {
			list.Items = []metricsv1beta1.PodMetrics{}
		}
		out = list
	} else {
		list := &metricsv1beta1.NodeMetricsList{TypeMeta: typeMeta(h.r.ListGVK())}
		for _, it := range page.Items {
			if m, ok := h.usageOf(it, now); ok {
				list.Items = append(list.Items, *m.(*metricsv1beta1.NodeMetrics))
			}
		}
		if list.Items == nil {
			list.Items = []metricsv1beta1.NodeMetrics{}
		}
		out = list
	}
	writeRaw(w, http.StatusOK, f.info, out)
}

func typeMeta(gvk schema.GroupVersionKind) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind}
}

// usageOf builds the NodeMetrics or PodMetrics of a Node or Pod.
func (h *resourceHandler) usageOf(obj runtime.Object, now time.Time) (runtime.Object, bool) {
	src := h.s.cfg.ResourceUsage
	switch o := obj.(type) {
	case *corev1.Node:
		u, ok := src.Node(o.Name)
		if !ok {
			return nil, false
		}
		return &metricsv1beta1.NodeMetrics{
			TypeMeta:   typeMeta(h.r.GVK()),
			ObjectMeta: metav1.ObjectMeta{Name: o.Name, Labels: o.Labels, CreationTimestamp: metav1.NewTime(now)},
			Timestamp:  metav1.NewTime(u.Timestamp),
			Window:     metav1.Duration{Duration: u.Window},
			Usage:      usageList(u.CPU, u.Memory),
		}, true
	case *corev1.Pod:
		u, ok := src.Pod(o.Namespace, o.Name)
		if !ok {
			return nil, false
		}
		m := &metricsv1beta1.PodMetrics{
			TypeMeta:   typeMeta(h.r.GVK()),
			ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace, Labels: o.Labels, CreationTimestamp: metav1.NewTime(now)},
			Timestamp:  metav1.NewTime(u.Timestamp),
			Window:     metav1.Duration{Duration: u.Window},
			Containers: []metricsv1beta1.ContainerMetrics{},
		}
		for _, c := range u.Containers {
			m.Containers = append(m.Containers, metricsv1beta1.ContainerMetrics{Name: c.Name, Usage: usageList(c.CPU, c.Memory)})
		}
		return m, true
	}
	return nil, false
}

// usageList renders CPU in nanocores and memory in bytes, as metrics-server.
func usageList(cores float64, memory int64) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewScaledQuantity(int64(cores*1e9), resource.Nano),
		corev1.ResourceMemory: *resource.NewQuantity(memory, resource.BinarySI),
	}
}

// AgentTargets lists the agents the resource-usage scraper asks: every
// Node in the watch cache that reports an address and an agent port.
func (s *Server) AgentTargets(ctx context.Context) ([]scraper.Target, error) {
	nodes := s.resources[nodesGVR]
	if nodes == nil {
		return nil, errors.New("the server does not serve nodes")
	}
	page, err := nodes.st.ListFromCache(ctx, store.Predicate{Label: labels.Everything(), Field: fields.Everything()}, 0)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var out []scraper.Target
	for _, it := range page.Items {
		n := it.(*corev1.Node)
		if host, err := agentAddress(n); err == nil {
			out = append(out, scraper.Target{Node: n.Name, Host: host})
		}
	}
	return out, nil
}
