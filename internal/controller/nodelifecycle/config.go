package nodelifecycle

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Config holds the node lifecycle controller's tuning, with the field names of
// kube-controller-manager's NodeLifecycleControllerConfiguration and the
// defaults of its flags (SPEC §1.1). Symbols in the comments: P is
// NodeMonitorPeriod, G NodeMonitorGracePeriod, S NodeStartupGracePeriod.
type Config struct {
	// NodeMonitorPeriod (--node-monitor-period, 5 s) is how often the shell
	// runs a monitor pass (Core.Monitor). A dead kubelet is marked Unknown
	// between G and G + 2P after its last heartbeat, so P should be well
	// below G. The core also uses it to give up on a NoExecute taint write
	// that has not shown up on the node after two periods.
	NodeMonitorPeriod time.Duration
	// NodeMonitorGracePeriod (--node-monitor-grace-period, 50 s) is how long
	// a node that has posted a Ready condition may stay silent (no lease
	// renewal, no Ready heartbeat) before its conditions become Unknown. It
	// should exceed the agent's lease renew interval (10 s) several times
	// over, and the HTTP/2 ping + read-idle timeouts (30 s + 15 s).
	NodeMonitorGracePeriod time.Duration
	// NodeStartupGracePeriod (--node-startup-grace-period, 60 s) replaces G
	// for a node that has never posted a Ready condition.
	NodeStartupGracePeriod time.Duration
	// NodeEvictionRate (--node-eviction-rate, 0.1 nodes/s) is the pace at
	// which a zone's nodes get NoExecute taints while the zone is Normal, or
	// FullDisruption with another zone still alive. Burst is 1: a zone's
	// first taint is immediate, the next ones 1/rate apart (10 s).
	NodeEvictionRate float64
	// SecondaryNodeEvictionRate (--secondary-node-eviction-rate, 0.01
	// nodes/s) is the pace in a PartialDisruption zone larger than
	// LargeClusterSizeThreshold; a smaller such zone gets no new taints.
	SecondaryNodeEvictionRate float64
	// UnhealthyZoneThreshold (--unhealthy-zone-threshold, 0.55) is the
	// fraction of not-Ready nodes (with at least 3 of them) at which a zone
	// is in PartialDisruption. Between 0 and 1.
	UnhealthyZoneThreshold float64
	// LargeClusterSizeThreshold (--large-cluster-size-threshold, 50) is the
	// zone size (counted nodes) above which — strictly — a zone is large.
	LargeClusterSizeThreshold int
}

// Upstream defaults (SPEC §1.1).
const (
	DefaultNodeMonitorPeriod         = 5 * time.Second
	DefaultNodeMonitorGracePeriod    = 50 * time.Second
	DefaultNodeStartupGracePeriod    = 60 * time.Second
	DefaultNodeEvictionRate          = 0.1
	DefaultSecondaryNodeEvictionRate = 0.01
	DefaultUnhealthyZoneThreshold    = 0.55
	DefaultLargeClusterSizeThreshold = 50
)

// DefaultConfig returns the upstream defaults.
func DefaultConfig() Config {
	return Config{
		NodeMonitorPeriod:         DefaultNodeMonitorPeriod,
		NodeMonitorGracePeriod:    DefaultNodeMonitorGracePeriod,
		NodeStartupGracePeriod:    DefaultNodeStartupGracePeriod,
		NodeEvictionRate:          DefaultNodeEvictionRate,
		SecondaryNodeEvictionRate: DefaultSecondaryNodeEvictionRate,
		UnhealthyZoneThreshold:    DefaultUnhealthyZoneThreshold,
		LargeClusterSizeThreshold: DefaultLargeClusterSizeThreshold,
	}
}

// Validate reports every invalid field, named by its flag.
func (c Config) Validate() error {
	var errs []error
	positive := func(flag string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("--%s must be positive, got %s", flag, d))
		}
	}
	positive("node-monitor-period", c.NodeMonitorPeriod)
	positive("node-monitor-grace-period", c.NodeMonitorGracePeriod)
	positive("node-startup-grace-period", c.NodeStartupGracePeriod)
	rate := func(flag string, r float64) {
		if math.IsNaN(r) || math.IsInf(r, 0) || r < 0 {
			errs = append(errs, fmt.Errorf("--%s must be a finite number ≥ 0, got %v", flag, r))
		}
	}
	rate("node-eviction-rate", c.NodeEvictionRate)
	rate("secondary-node-eviction-rate", c.SecondaryNodeEvictionRate)
	if t := c.UnhealthyZoneThreshold; math.IsNaN(t) || t < 0 || t > 1 {
		errs = append(errs, fmt.Errorf("--unhealthy-zone-threshold must be between 0 and 1, got %v", t))
	}
	if c.LargeClusterSizeThreshold < 0 {
		errs = append(errs, fmt.Errorf("--large-cluster-size-threshold must be ≥ 0, got %d", c.LargeClusterSizeThreshold))
	}
	return errors.Join(errs...)
}
