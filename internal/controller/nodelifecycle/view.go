package nodelifecycle

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ViewPath is where the server serves the view (ViewResponse as JSON).
const ViewPath = "/debug/nodeplane/zones"

// ViewResponse is the body served at ViewPath.
type ViewResponse struct {
	// Leading is false on a server that is not running the controllers;
	// Leader then names the one that is (when known).
	Leading bool   `json:"leading"`
	Leader  string `json:"leader,omitempty"`
	View    View   `json:"view"`
	// Cloud is each node's cloud provider answer and fencing decision (the
	// cloud-node-lifecycle-controller's last pass), when a provider runs.
	Cloud []CloudNodeState `json:"cloud,omitempty"`
}

// CloudNodeState is one node's line of ViewResponse.Cloud.
type CloudNodeState struct {
	Node string `json:"node"`
	// Provider: running, shutdown, missing, error, or empty when the node
	// is Ready (the provider is not asked).
	Provider string `json:"provider,omitempty"`
	Error    string `json:"error,omitempty"`
	// Fencing is the automatic fencing decision in words.
	Fencing string `json:"fencing,omitempty"`
}

// View is the live picture behind `nodeplane zones` and
// /debug/nodeplane/zones.
type View struct {
	// Fresh is the view freshness given to the last monitor pass.
	Fresh bool `json:"fresh"`
	// AllZonesDisrupted: master disruption mode (no NoExecute taints).
	AllZonesDisrupted bool       `json:"allZonesDisrupted"`
	Zones             []ZoneView `json:"zones"`
}

// ZoneView is one zone. Size and Unhealthy count the nodes not excluded from
// disruption checks, at the last monitor pass.
type ZoneView struct {
	// Zone is the zone key (region ":\x00:" zone); Name its printable form.
	Zone      string    `json:"zone"`
	Name      string    `json:"name"`
	State     ZoneState `json:"state"`
	Size      int       `json:"size"`
	Unhealthy int       `json:"unhealthy"`
	// TaintRate is the current NoExecute taint rate in nodes per second.
	TaintRate float64 `json:"taintRate"`
	// Queued are the nodes waiting for a NoExecute taint, in order.
	Queued []string `json:"queued"`
	// Evictions counts the NoExecute taints the zone's limiter granted.
	Evictions int        `json:"evictions"`
	Nodes     []NodeView `json:"nodes"`
}

// NodeView is one node of a zone.
type NodeView struct {
	Name string `json:"name"`
	// Ready is the Ready status the controller holds ("" if none).
	Ready corev1.ConditionStatus `json:"ready"`
	// SinceHeartbeatSeconds is the time since the controller last saw a
	// sign of life (or last restarted the node's grace period).
	SinceHeartbeatSeconds float64 `json:"sinceHeartbeatSeconds"`
	// NoExecute names the controller's NoExecute taint on the node, if any.
	NoExecute string `json:"noExecute,omitempty"`
	Queued    bool   `json:"queued,omitempty"`
	Excluded  bool   `json:"excludedFromDisruption,omitempty"`
}

// View returns the current picture, zones and nodes sorted by name.
func (c *Core) View(now time.Time) View {
	v := View{Fresh: c.fresh, AllZonesDisrupted: c.disrupted}
	byZone := map[string][]NodeView{}
	for _, name := range c.nodeNames() {
		n := c.nodes[name]
		z := c.zones[n.zone]
		byZone[n.zone] = append(byZone[n.zone], NodeView{
			Name:                  name,
			Ready:                 n.status,
			SinceHeartbeatSeconds: now.Sub(n.health.probe).Seconds(),
			NoExecute:             n.noExecute().key(),
			Queued:                z != nil && z.queue.has(name),
			Excluded:              n.excluded,
		})
	}
	for _, key := range c.zoneKeys() {
		z := c.zones[key]
		v.Zones = append(v.Zones, ZoneView{
			Zone:      key,
			Name:      ZoneName(key),
			State:     z.state,
			Size:      z.size,
			Unhealthy: z.unhealthy,
			TaintRate: z.bucket.rate,
			Queued:    z.queue.names(),
			Evictions: z.evictions,
			Nodes:     byZone[key],
		})
	}
	return v
}
