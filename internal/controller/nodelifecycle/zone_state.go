package nodelifecycle

import (
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ZoneState is a zone's health as the eviction pacing sees it (SPEC NLC-18).
type ZoneState string

const (
	// StateInitial is a zone seen for the first time (not yet judged).
	StateInitial ZoneState = "Initial"
	// StateNormal is a zone with few enough not-Ready nodes.
	StateNormal ZoneState = "Normal"
	// StatePartialDisruption is a zone with at least 3 not-Ready nodes making
	// up at least UnhealthyZoneThreshold of it.
	StatePartialDisruption ZoneState = "PartialDisruption"
	// StateFullDisruption is a zone with no Ready node.
	StateFullDisruption ZoneState = "FullDisruption"
)

// LabelExcludeDisruption on a node (any value, even empty) keeps it out of
// the zone statistics; it is still marked and tainted (SPEC NLC-17).
const LabelExcludeDisruption = "node.kubernetes.io/exclude-disruption"

// ZoneKey is the zone a node belongs to (SPEC NLC-16): region and zone from
// the deprecated failure-domain.beta labels when present, else from the
// topology.kubernetes.io ones; "" when both are empty, else
// region + ":\x00:" + zone.
func ZoneKey(node *corev1.Node) string {
	l := node.Labels
	region, ok := l[corev1.LabelFailureDomainBetaRegion]
	if !ok {
		region = l[corev1.LabelTopologyRegion]
	}
	zone, ok := l[corev1.LabelFailureDomainBetaZone]
	if !ok {
		zone = l[corev1.LabelTopologyZone]
	}
	if region == "" && zone == "" {
		return ""
	}
	return region + ":\x00:" + zone
}

// ZoneName is a zone key made printable: "region/zone" ("" stays "").
func ZoneName(key string) string {
	return strings.Replace(key, ":\x00:", "/", 1)
}

// excludedFromDisruption reports whether the node is left out of zone
// statistics (SPEC NLC-17).
func excludedFromDisruption(node *corev1.Node) bool {
	_, ok := node.Labels[LabelExcludeDisruption]
	return ok
}

// computeZoneState judges a zone from its counted nodes (SPEC NLC-18): no
// Ready node (and at least one not) → FullDisruption; more than 2 not-Ready
// making up at least threshold of the zone → PartialDisruption; else Normal.
// The ratio is compared in float32, as upstream does.
func computeZoneState(ready, notReady int, threshold float64) ZoneState {
	switch {
	case ready == 0 && notReady > 0:
		return StateFullDisruption
	case notReady > 2 && float32(notReady)/float32(notReady+ready) >= float32(threshold):
		return StatePartialDisruption
	default:
		return StateNormal
	}
}

// zone is the core's state for one zone key: its judged state, its taint
// limiter and queue, and the statistics of the last monitor pass.
type zone struct {
	key string
	// tracked: the zone had counted nodes at the last pass (upstream keeps
	// a state only for those); an untracked zone's state is Initial.
	tracked bool
	state   ZoneState
	bucket  tokenBucket
	queue   taintQueue
	// size and unhealthy are the counted nodes and the not-Ready ones among
	// them at the last pass.
	size, unhealthy int
	// evictions counts NoExecute taints handed out through the limiter
	// (node_collector_evictions_total{zone}), less those reported failed.
	evictions int
	// lastGrant is the latest token Taint handed out, so that a taint the
	// shell skipped can give it back (TaintNotApplied without retry).
	lastGrant grant
	// seeded: the limiter was aligned with the taints found on the zone's
	// nodes (first fresh pass after the zone appeared; Taint hands out
	// nothing before one).
	seeded bool
}

// grant records one token handed out: to which node, and the bucket's
// readyAt before and after.
type grant struct {
	node          string
	prev, readyAt time.Time
}

func (c *Core) newZone(key string, now time.Time) *zone {
	return &zone{
		key:    key,
		state:  StateInitial,
		bucket: newTokenBucket(c.cfg.NodeEvictionRate, now),
		queue:  newTaintQueue(),
	}
}

// rateFor is the limiter rate for a zone in state s with size counted nodes
// (SPEC NLC-20): Q1 when Normal or FullDisruption (in a cluster where some
// other zone is alive), Q2 when PartialDisruption and large, 0 when
// PartialDisruption and small (≤ LargeClusterSizeThreshold nodes).
func (c *Core) rateFor(s ZoneState, size int) float64 {
	if s == StatePartialDisruption {
		if size > c.cfg.LargeClusterSizeThreshold {
			return c.cfg.SecondaryNodeEvictionRate
		}
		return 0
	}
	return c.cfg.NodeEvictionRate
}

// ZoneChange is a zone whose state changed in a pass.
type ZoneChange struct {
	Zone     string
	From, To ZoneState
}

// Disruption says whether a pass entered or left "master disruption mode",
// the state where every zone is fully disrupted (SPEC NLC-20).
type Disruption int

const (
	DisruptionUnchanged Disruption = iota
	// DisruptionEntered: every zone is now fully disrupted; all NoExecute
	// taints are being removed and no new one is added. The shell logs
	// "Controller detected that all Nodes are not-Ready. Entering master
	// disruption mode".
	DisruptionEntered
	// DisruptionExited: some node is Ready again; every node got a fresh
	// grace period. The shell logs "Controller detected that some Nodes are
	// Ready. Exiting master disruption mode".
	DisruptionExited
)

// handleDisruption judges every zone from this pass's counts and sets the
// limiters (SPEC NLC-20). counts maps zone key → {ready, notReady} of the
// counted nodes; zones without counted nodes are absent.
//
// Unlike upstream, "master disruption mode" is remembered explicitly rather
// than re-derived from the stored zone states, so a zone that first appears
// while every other zone is down neither hides the end of the mode (which
// upstream then misses, leaving the other zones' limiters at 0 and skipping
// the fresh grace period) nor re-enters it.
func (c *Core) handleDisruption(counts map[string][2]int, now time.Time, res *PassResult) {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	newStates := make(map[string]ZoneState, len(counts))
	allFull := len(counts) > 0
	for _, k := range keys {
		n := counts[k]
		s := computeZoneState(n[0], n[1], c.cfg.UnhealthyZoneThreshold)
		newStates[k] = s
		if s != StateFullDisruption {
			allFull = false
		}
	}
	// Zones that lost all their counted nodes are forgotten (metrics reset);
	// zones that gained some start Initial.
	for _, k := range c.zoneKeys() {
		z := c.zones[k]
		_, present := newStates[k]
		switch {
		case z.tracked && !present:
			z.tracked, z.state = false, StateInitial
			if !c.disrupted {
				z.bucket.setRate(c.rateFor(StateInitial, 0), now)
			}
		case !z.tracked && present:
			z.tracked, z.state = true, StateInitial
		}
	}

	switch {
	case allFull && c.disrupted:
		// Still every zone down. A zone that joined meanwhile gets the
		// same treatment as the others.
		for _, k := range keys {
			z := c.zones[k]
			if z.state != StateFullDisruption {
				res.ZoneChanges = append(res.ZoneChanges, ZoneChange{Zone: k, From: z.state, To: StateFullDisruption})
				z.state = StateFullDisruption
				z.bucket.setRate(0, now)
			}
		}
	case allFull:
		c.disrupted = true
		res.Disruption = DisruptionEntered
		for _, k := range c.zoneKeys() {
			z := c.zones[k]
			z.bucket.setRate(0, now)
			if z.tracked && z.state != StateFullDisruption {
				res.ZoneChanges = append(res.ZoneChanges, ZoneChange{Zone: k, From: z.state, To: StateFullDisruption})
				z.state = StateFullDisruption
			}
		}
	case c.disrupted && len(counts) > 0:
		c.disrupted = false
		res.Disruption = DisruptionExited
		c.freshGrace(now)
		for _, k := range c.zoneKeys() {
			z := c.zones[k]
			s, present := newStates[k]
			if !present {
				z.bucket.setRate(c.rateFor(StateInitial, 0), now)
				continue
			}
			z.bucket.setRate(c.rateFor(s, counts[k][0]+counts[k][1]), now)
			if z.state != s {
				res.ZoneChanges = append(res.ZoneChanges, ZoneChange{Zone: k, From: z.state, To: s})
				z.state = s
			}
		}
	case !c.disrupted:
		for _, k := range keys {
			z := c.zones[k]
			s := newStates[k]
			if z.state == s {
				continue
			}
			res.ZoneChanges = append(res.ZoneChanges, ZoneChange{Zone: k, From: z.state, To: s})
			z.bucket.setRate(c.rateFor(s, counts[k][0]+counts[k][1]), now)
			z.state = s
		}
	}
}

// zoneKeys lists the known zones in order.
func (c *Core) zoneKeys() []string {
	keys := make([]string, 0, len(c.zones))
	for k := range c.zones {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
