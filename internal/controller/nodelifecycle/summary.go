package nodelifecycle

import (
	"container/heap"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Summary is one sample of the controller's picture, small whatever the
// number of nodes: per-zone counts and only the Worst nodes. The shell takes
// one after every monitor pass and hands it to its SummarySink (the zone
// view in the browser keeps a ring of them).
type Summary struct {
	// Time is the monitor pass's now.
	Time              time.Time     `json:"time"`
	Fresh             bool          `json:"fresh"`
	AllZonesDisrupted bool          `json:"allZonesDisrupted"`
	Nodes             int           `json:"nodes"`
	Zones             []ZoneSummary `json:"zones"`
	// Worst are the nodes longest without a sign of life, longest first.
	Worst []NodeAge `json:"worst"`
}

// ZoneSummary is one zone in a Summary. Size, Unhealthy and State are the
// disruption check's (nodes excluded from disruption checks not counted);
// Ready, NotReady, Unknown and Tainted count every node of the zone.
type ZoneSummary struct {
	Name      string    `json:"name"`
	State     ZoneState `json:"state"`
	Size      int       `json:"size"`
	Unhealthy int       `json:"unhealthy"`
	Ready     int       `json:"ready"`
	NotReady  int       `json:"notReady"`
	// Unknown counts Ready=Unknown and nodes without a Ready condition.
	Unknown int `json:"unknown"`
	// Tainted counts nodes with a controller NoExecute taint.
	Tainted   int     `json:"tainted"`
	TaintRate float64 `json:"taintRate"`
	Queued    int     `json:"queued"`
	// QueuedFirst are the first few queued nodes, in queue order.
	QueuedFirst []string `json:"queuedFirst,omitempty"`
	Evictions   int      `json:"evictions"`
}

// NodeAge is one node in Summary.Worst.
type NodeAge struct {
	Name                  string                 `json:"name"`
	Zone                  string                 `json:"zone"`
	Ready                 corev1.ConditionStatus `json:"ready"`
	SinceHeartbeatSeconds float64                `json:"sinceHeartbeatSeconds"`
	NoExecute             string                 `json:"noExecute,omitempty"`
}

// queuedFirst is how many queued node names a ZoneSummary carries.
const queuedFirst = 5

// Summary returns the picture at now with the worst nodes by time since
// their last sign of life. It reads every node once (O(nodes + zones·log
// zones), keeping the worst in a heap of that size), allocates only the
// result, and is meant to run once per monitor pass, not per reader.
func (c *Core) Summary(now time.Time, worst int) Summary {
	s := Summary{Time: now, Fresh: c.fresh, AllZonesDisrupted: c.disrupted, Nodes: len(c.nodes)}
	index := make(map[string]int, len(c.zones))
	keys := c.zoneKeys()
	s.Zones = make([]ZoneSummary, len(keys))
	for i, key := range keys {
		z := c.zones[key]
		index[key] = i
		s.Zones[i] = ZoneSummary{
			Name: ZoneName(key), State: z.state, Size: z.size, Unhealthy: z.unhealthy,
			TaintRate: z.bucket.rate, Queued: z.queue.len(), Evictions: z.evictions,
		}
		for e := z.queue.order.Front(); e != nil && len(s.Zones[i].QueuedFirst) < queuedFirst; e = e.Next() {
			s.Zones[i].QueuedFirst = append(s.Zones[i].QueuedFirst, e.Value.(string))
		}
	}
	h := make(ageHeap, 0, worst)
	for name, n := range c.nodes {
		if i, ok := index[n.zone]; ok {
			z := &s.Zones[i]
			switch n.status {
			case corev1.ConditionTrue:
				z.Ready++
			case corev1.ConditionFalse:
				z.NotReady++
			default:
				z.Unknown++
			}
			if n.noExecute() != 0 {
				z.Tainted++
			}
		}
		if worst <= 0 {
			continue
		}
		age := now.Sub(n.health.probe)
		if len(h) == worst && !older(age, name, h[0].age, h[0].name) {
			continue
		}
		e := ageEntry{name: name, age: age, node: n}
		if len(h) < worst {
			heap.Push(&h, e)
		} else {
			h[0] = e
			heap.Fix(&h, 0)
		}
	}
	sort.Slice(h, func(i, j int) bool { return older(h[i].age, h[i].name, h[j].age, h[j].name) })
	s.Worst = make([]NodeAge, len(h))
	for i, e := range h {
		s.Worst[i] = NodeAge{
			Name: e.name, Zone: ZoneName(e.node.zone), Ready: e.node.status,
			SinceHeartbeatSeconds: e.age.Seconds(), NoExecute: e.node.noExecute().key(),
		}
	}
	return s
}

// older orders nodes by time since their last sign of life, longest first,
// then by name, so that the worst list is the same whatever the map order.
func older(a time.Duration, an string, b time.Duration, bn string) bool {
	if a != b {
		return a > b
	}
	return an < bn
}

type ageEntry struct {
	name string
	age  time.Duration
	node *nodeState
}

// ageHeap keeps the worst nodes seen so far with the least bad on top.
type ageHeap []ageEntry

func (h ageHeap) Len() int           { return len(h) }
func (h ageHeap) Less(i, j int) bool { return older(h[j].age, h[j].name, h[i].age, h[i].name) }
func (h ageHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *ageHeap) Push(x any)        { *h = append(*h, x.(ageEntry)) }
func (h *ageHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
