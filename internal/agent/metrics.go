package agent

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/nodeplane/nodeplane/internal/agent/runtime"
)

// registerMetrics adds the agent's own metrics to reg: the kubelet's
// kubelet_node_name and kubelet_running_pods, nodeplane's heartbeat
// outcome counters, and the Go runtime and process collectors.
// (kubelet_evictions is the eviction manager's, the graceful shutdown
// gauges the shutdown manager's.)
func (a *Agent) registerMetrics(reg prometheus.Registerer) error {
	nodeName := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: "kubelet", Name: "node_name",
		Help: "The node's name. The count is always 1.",
	}, []string{"node"})
	nodeName.WithLabelValues(a.cfg.NodeName).Set(1)
	cs := []prometheus.Collector{
		nodeName,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Subsystem: "kubelet", Name: "running_pods",
			Help: "Number of pods that have a running pod sandbox (here: processes the runtime runs)",
		}, func() float64 {
			n := 0
			for _, rs := range a.cfg.Runtime.Pods() {
				if !rs.Killed && running(rs) {
					n++
				}
			}
			return float64(n)
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "node_status_patches_total",
			Help: "Node status patches the agent sent and the API accepted (nodeplane).",
		}, func() float64 { return float64(a.updater.Patches()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "node_lease_renewals_total",
			Help: "Successful renewals of the node's Lease (nodeplane).",
		}, func() float64 { return float64(a.renewer.Stats().Renewals) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "node_lease_renewal_failures_total",
			Help: "Failed attempts to renew the node's Lease (nodeplane).",
		}, func() float64 { return float64(a.renewer.Stats().FailedTotal) }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// running reports whether any of the pod's containers runs.
func running(rs runtime.PodStatus) bool {
	for _, c := range rs.Containers {
		if c.State.Running != nil {
			return true
		}
	}
	return false
}
