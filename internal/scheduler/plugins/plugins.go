// Package plugins assembles the default scheduling profile: upstream's
// in-tree plugins that matter without images or inter-pod affinity (of the
// volume plugins, VolumeBinding's filter only), in upstream's order and with upstream's score weights. Each plugin lives in
// its own sub-package; this package only wires them and must not add
// behaviour of its own.
package plugins

import (
	"fmt"

	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
	"github.com/nodeplane/nodeplane/internal/scheduler/plugins/nodeaffinity"
	"github.com/nodeplane/nodeplane/internal/scheduler/plugins/nodename"
	"github.com/nodeplane/nodeplane/internal/scheduler/plugins/noderesources"
	"github.com/nodeplane/nodeplane/internal/scheduler/plugins/nodeunschedulable"
	"github.com/nodeplane/nodeplane/internal/scheduler/plugins/podtopologyspread"
	"github.com/nodeplane/nodeplane/internal/scheduler/plugins/tainttoleration"
	"github.com/nodeplane/nodeplane/internal/scheduler/plugins/volumebinding"
)

// Config holds the plugins' own settings.
type Config struct {
	Fit noderesources.FitConfig
	// BalancedResources are the resources NodeResourcesBalancedAllocation
	// balances (default cpu and memory).
	BalancedResources []noderesources.ResourceSpec
	Spread            podtopologyspread.Config
	// Volumes, when set, enables VolumeBinding (claims must exist and not
	// be going; bound volumes' node affinity must select the node).
	Volumes volumebinding.Volumes
}

// DefaultConfig returns upstream's defaults.
func DefaultConfig() Config {
	return Config{
		Fit:               noderesources.DefaultFitConfig(),
		BalancedResources: noderesources.DefaultScoringResources(),
		Spread:            podtopologyspread.DefaultConfig(),
	}
}

// Default returns the default profile's plugins (VolumeBinding, a filter
// only, after NodeResourcesFit as upstream, when cfg.Volumes is set).
// Filters run in this order,
// which decides each node's reason in the FailedScheduling message (a
// cordoned node reads "were unschedulable", not "untolerated taint"). Score
// weights: TaintToleration 3, NodeAffinity 2, PodTopologySpread 2,
// NodeResourcesFit (LeastAllocated) 1, NodeResourcesBalancedAllocation 1.
func Default(cfg Config) ([]framework.WeightedPlugin, error) {
	fit, err := noderesources.NewFit(cfg.Fit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", noderesources.FitName, err)
	}
	balanced, err := noderesources.NewBalancedAllocation(cfg.BalancedResources)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", noderesources.BalancedAllocationName, err)
	}
	spread, err := podtopologyspread.New(cfg.Spread)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", podtopologyspread.Name, err)
	}
	out := []framework.WeightedPlugin{
		{Plugin: nodeunschedulable.New()},
		{Plugin: nodename.New()},
		{Plugin: tainttoleration.New(), Weight: 3},
		{Plugin: nodeaffinity.New(), Weight: 2},
		{Plugin: fit, Weight: 1},
	}
	if cfg.Volumes != nil {
		out = append(out, framework.WeightedPlugin{Plugin: volumebinding.New(cfg.Volumes)})
	}
	return append(out,
		framework.WeightedPlugin{Plugin: spread, Weight: 2},
		framework.WeightedPlugin{Plugin: balanced, Weight: 1},
	), nil
}
