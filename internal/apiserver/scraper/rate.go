package scraper

import (
	"sort"
	"time"
)

// Usage is a CPU rate over a window ending at Timestamp, and the memory
// working set at Timestamp.
type Usage struct {
	Timestamp time.Time
	Window    time.Duration
	// CPU is in cores (core-seconds per second).
	CPU float64
	// Memory is in bytes.
	Memory int64
}

// ContainerUsage is one container's usage.
type ContainerUsage struct {
	Name string
	Usage
}

// PodUsage is a pod's containers' usage; Timestamp and Window are the
// containers' (the earliest timestamp, the longest window).
type PodUsage struct {
	Timestamp  time.Time
	Window     time.Duration
	Containers []ContainerUsage
}

// rate turns two samples of a counter into a rate: it needs cur taken after
// prev and a counter that did not go back (a restarted container or a
// reset counter yields nothing until the next pair).
func rate(prev, cur Sample) (Usage, bool) {
	window := cur.Time.Sub(prev.Time)
	if window <= 0 || cur.CPU < prev.CPU {
		return Usage{}, false
	}
	return Usage{
		Timestamp: cur.Time,
		Window:    window,
		CPU:       (cur.CPU - prev.CPU) / window.Seconds(),
		Memory:    cur.Memory,
	}, true
}

// Rates computes the usage of a node and of its pods from two successive
// scrapes of its agent. The node has usage when both scrapes measured it;
// a pod has usage only when every container in cur has a rate (as
// metrics-server: a pod is not reported half).
func Rates(prev, cur Scrape) (node *Usage, pods map[PodRef]PodUsage) {
	if prev.Node != nil && cur.Node != nil {
		if u, ok := rate(*prev.Node, *cur.Node); ok {
			node = &u
		}
	}
	pods = map[PodRef]PodUsage{}
	for ref, containers := range cur.Pods {
		before, ok := prev.Pods[ref]
		if !ok || len(containers) == 0 {
			continue
		}
		var pu PodUsage
		complete := true
		for name, c := range containers {
			p, ok := before[name]
			if !ok {
				complete = false
				break
			}
			u, ok := rate(p, c)
			if !ok {
				complete = false
				break
			}
			if pu.Timestamp.IsZero() || u.Timestamp.Before(pu.Timestamp) {
				pu.Timestamp = u.Timestamp
			}
			pu.Window = max(pu.Window, u.Window)
			pu.Containers = append(pu.Containers, ContainerUsage{Name: name, Usage: u})
		}
		if !complete {
			continue
		}
		sort.Slice(pu.Containers, func(i, j int) bool { return pu.Containers[i].Name < pu.Containers[j].Name })
		pods[ref] = pu
	}
	return node, pods
}
