package serverapp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodeplane/nodeplane/internal/cloud"
	"github.com/nodeplane/nodeplane/internal/cloud/static"
	"github.com/nodeplane/nodeplane/internal/controller/cloudnode"
	"github.com/nodeplane/nodeplane/internal/controller/cloudnodelifecycle"
	"github.com/nodeplane/nodeplane/internal/controller/manager"
)

// Cloud are the cloud-controller-manager flags and nodeplane's automatic
// fencing.
type Cloud struct {
	// Provider is --cloud-provider: "" (none), external, static, docker.
	Provider string
	// Config is --cloud-config.
	Config string
	// ConfigReloadPeriod (nodeplane-only): how often the static
	// provider's file is checked for changes.
	ConfigReloadPeriod time.Duration
	// ConcurrentNodeSyncs, ConcurrentNodeStatusUpdates and
	// NodeStatusUpdateFrequency are the cloud node controller's flags.
	ConcurrentNodeSyncs         int
	ConcurrentNodeStatusUpdates int
	NodeStatusUpdateFrequency   time.Duration
	// EnableAutomaticFencing and AutomaticFencingDelay (nodeplane-only,
	// SPEC P3-5).
	EnableAutomaticFencing bool
	AutomaticFencingDelay  time.Duration
}

// DefaultCloud are the defaults (upstream's where upstream has the flag).
func DefaultCloud() Cloud {
	return Cloud{
		ConfigReloadPeriod:        static.DefaultReloadPeriod,
		ConcurrentNodeSyncs:       cloudnode.DefaultConcurrentNodeSyncs,
		NodeStatusUpdateFrequency: cloudnode.DefaultNodeStatusUpdateFrequency,
		AutomaticFencingDelay:     cloudnodelifecycle.DefaultAutomaticFencingDelay,
	}
}

// AddFlags registers the flags.
func (c *Cloud) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Provider, "cloud-provider", c.Provider, "Cloud provider whose machines back the nodes: static (a YAML file, --cloud-config), docker (containers on the local Docker engine), external (the cloud controllers run in a separate cloud-controller-manager), or empty for none; with static or docker the server runs cloud-node-controller and cloud-node-lifecycle-controller")
	fs.StringVar(&c.Config, "cloud-config", c.Config, "The cloud provider's configuration file (static: the YAML list of machines, re-read when it changes)")
	fs.DurationVar(&c.ConfigReloadPeriod, "cloud-config-reload-period", c.ConfigReloadPeriod, "nodeplane-only: how often the static provider checks --cloud-config for changes")
	fs.IntVar(&c.ConcurrentNodeSyncs, "concurrent-node-syncs", c.ConcurrentNodeSyncs, "Nodes the cloud node controller initialises at once")
	fs.IntVar(&c.ConcurrentNodeStatusUpdates, "concurrent-node-status-updates", c.ConcurrentNodeStatusUpdates, "Workers of the cloud node controller's periodic address sync (0: as many as --concurrent-node-syncs)")
	fs.DurationVar(&c.NodeStatusUpdateFrequency, "node-status-update-frequency", c.NodeStatusUpdateFrequency, "How often the cloud node controller syncs initialised nodes' addresses from the cloud provider")
	fs.BoolVar(&c.EnableAutomaticFencing, "enable-automatic-fencing", c.EnableAutomaticFencing, "nodeplane-only: put node.kubernetes.io/out-of-service=nodeshutdown:NoExecute on a node that has been NotReady longer than --automatic-fencing-delay and whose machine the cloud provider confirms shut down, and remove it once the node is Ready again (needs --cloud-provider static or docker)")
	fs.DurationVar(&c.AutomaticFencingDelay, "automatic-fencing-delay", c.AutomaticFencingDelay, "nodeplane-only: how long a node must have been NotReady before automatic fencing may act")
}

// Validate names the flag at fault.
func (c *Cloud) Validate() []error {
	var errs []error
	if err := cloud.Validate(c.Provider, c.Config); err != nil {
		errs = append(errs, err)
	}
	if c.EnableAutomaticFencing && !cloud.RunsControllers(c.Provider) {
		errs = append(errs, fmt.Errorf("--enable-automatic-fencing needs --cloud-provider static or docker (the provider must confirm a machine is shut down), got %q", c.Provider))
	}
	if c.AutomaticFencingDelay < 0 {
		errs = append(errs, fmt.Errorf("--automatic-fencing-delay must be >= 0, got %v", c.AutomaticFencingDelay))
	}
	if c.ConfigReloadPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--cloud-config-reload-period must be > 0, got %v", c.ConfigReloadPeriod))
	}
	if c.ConcurrentNodeSyncs <= 0 {
		errs = append(errs, fmt.Errorf("--concurrent-node-syncs must be > 0, got %d", c.ConcurrentNodeSyncs))
	}
	if c.ConcurrentNodeStatusUpdates < 0 {
		errs = append(errs, fmt.Errorf("--concurrent-node-status-updates must be >= 0, got %d", c.ConcurrentNodeStatusUpdates))
	}
	if c.NodeStatusUpdateFrequency <= 0 {
		errs = append(errs, fmt.Errorf("--node-status-update-frequency must be > 0, got %v", c.NodeStatusUpdateFrequency))
	}
	return errs
}

// buildCloud builds the --cloud-provider (static: the file must parse;
// docker: the engine must answer) and starts it until ctx ends.
func (s *server) buildCloud(ctx context.Context) error {
	o := s.opts.Controllers.Cloud
	if !cloud.RunsControllers(o.Provider) {
		return nil
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := cloud.New(pingCtx, cloud.Config{Name: o.Provider, ConfigFile: o.Config, ReloadPeriod: o.ConfigReloadPeriod, Clock: s.clock, Logger: s.log.With("cloud-provider", o.Provider)})
	if err != nil {
		return err
	}
	if _, ok := p.InstancesV2(); !ok {
		return fmt.Errorf("--cloud-provider %s: the provider does not implement InstancesV2", o.Provider)
	}
	p.Initialize(nil, ctx.Done())
	s.cloud = p
	s.log.Info("cloud provider ready", "cloud-provider", o.Provider, "automatic-fencing", o.EnableAutomaticFencing)
	return nil
}

// buildCloudControllers returns the enabled cloud controllers when a
// provider runs in this server.
func buildCloudControllers(d controllerDeps, sel manager.Selection) ([]manager.Controller, *cloudnodelifecycle.Controller, error) {
	if d.cloud == nil {
		return nil, nil, nil
	}
	o := d.opts.Cloud
	instances, ok := d.cloud.InstancesV2()
	if !ok {
		return nil, nil, errors.New("cloud provider without InstancesV2")
	}
	var out []manager.Controller
	var cnlc *cloudnodelifecycle.Controller
	if sel.Enabled(cloudnode.ControllerName) {
		c, err := cloudnode.NewController(cloudnode.Config{
			Provider: instances, Client: d.client, Clock: d.clock, Logger: d.logger,
			ConcurrentNodeSyncs: o.ConcurrentNodeSyncs, ConcurrentNodeStatusUpdates: o.ConcurrentNodeStatusUpdates,
			NodeStatusUpdateFrequency: o.NodeStatusUpdateFrequency,
		})
		if err != nil {
			return nil, nil, err
		}
		out = append(out, c)
	}
	if sel.Enabled(cloudnodelifecycle.ControllerName) {
		c, err := cloudnodelifecycle.NewController(cloudnodelifecycle.ControllerConfig{
			Core:     cloudnodelifecycle.Config{EnableFencing: o.EnableAutomaticFencing, FencingDelay: o.AutomaticFencingDelay},
			Period:   d.opts.NodeMonitorPeriod,
			Provider: instances, Client: d.client, Clock: d.clock, Logger: d.logger,
		})
		if err != nil {
			return nil, nil, err
		}
		out = append(out, c)
		cnlc = c
	}
	return out, cnlc, nil
}
