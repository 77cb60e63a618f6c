package static

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/utils/clock"
)

// ProviderName is the --cloud-provider value and the providerID scheme.
const ProviderName = "static"

// DefaultReloadPeriod is how often the file is checked for changes.
const DefaultReloadPeriod = 5 * time.Second

// Config configures the provider.
type Config struct {
	// Path is --cloud-config.
	Path         string
	ReloadPeriod time.Duration
	Clock        clock.WithTicker
	Logger       *slog.Logger
}

// Provider answers from the last good version of the file.
type Provider struct {
	cfg Config

	mu      sync.RWMutex
	raw     []byte // content of the file last looked at (good or bad)
	byID    map[string]Instance
	byName  map[string]Instance
	lastErr error
}

var _ cloudprovider.Interface = (*Provider)(nil)
var _ cloudprovider.InstancesV2 = (*Provider)(nil)

// New reads and validates the file; an error here stops the server.
func New(cfg Config) (*Provider, error) {
	if cfg.ReloadPeriod <= 0 {
		cfg.ReloadPeriod = DefaultReloadPeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &Provider{cfg: cfg}
	if err := p.Reload(); err != nil {
		return nil, err
	}
	return p, nil
}

// Reload reads the file again if its content changed. A file that fails
// to read, parse or validate leaves the last good state in place and the
// error is returned (and kept for LastError).
func (p *Provider) Reload() error {
	data, err := os.ReadFile(p.cfg.Path)
	if err != nil {
		p.setErr(err)
		return err
	}
	p.mu.RLock()
	same := p.byID != nil && bytes.Equal(data, p.raw)
	p.mu.RUnlock()
	if same {
		return nil
	}
	f, err := Parse(data)
	if err != nil {
		err = fmt.Errorf("%s: %w", p.cfg.Path, err)
		p.mu.Lock()
		p.raw, p.lastErr = data, err
		p.mu.Unlock()
		return err
	}
	byID := make(map[string]Instance, len(f.Instances))
	byName := make(map[string]Instance, len(f.Instances))
	for _, in := range f.Instances {
		byID[in.ProviderID] = in
		byName[in.Name] = in
	}
	p.mu.Lock()
	p.raw, p.byID, p.byName, p.lastErr = data, byID, byName, nil
	p.mu.Unlock()
	return nil
}

func (p *Provider) setErr(err error) {
	p.mu.Lock()
	p.lastErr = err
	p.mu.Unlock()
}

// LastError is the error of the last reload, nil when it succeeded.
func (p *Provider) LastError() error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.lastErr
}

// Initialize starts the reload loop; it ends when stop closes.
func (p *Provider) Initialize(_ cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	go func() {
		t := p.cfg.Clock.NewTicker(p.cfg.ReloadPeriod)
		defer t.Stop()
		var reported string
		for {
			select {
			case <-stop:
				return
			case <-t.C():
			}
			err := p.Reload()
			switch {
			case err != nil && err.Error() != reported:
				p.cfg.Logger.Error("cloud config reload failed; keeping the last good machine list", "file", p.cfg.Path, "err", err)
				reported = err.Error()
			case err == nil && reported != "":
				p.cfg.Logger.Info("cloud config reloaded", "file", p.cfg.Path)
				reported = ""
			}
		}
	}()
}

// lookup finds the node's instance: by spec.providerID when set, else by
// the Node name.
func (p *Provider) lookup(node *corev1.Node) (Instance, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if node.Spec.ProviderID != "" {
		in, ok := p.byID[node.Spec.ProviderID]
		return in, ok
	}
	in, ok := p.byName[node.Name]
	return in, ok
}

// InstanceExists implements InstancesV2: listed in the file.
func (p *Provider) InstanceExists(_ context.Context, node *corev1.Node) (bool, error) {
	_, ok := p.lookup(node)
	return ok, nil
}

// InstanceShutdown implements InstancesV2: listed with state stopped.
func (p *Provider) InstanceShutdown(_ context.Context, node *corev1.Node) (bool, error) {
	in, ok := p.lookup(node)
	if !ok {
		return false, cloudprovider.InstanceNotFound
	}
	return in.State == StateStopped, nil
}

// InstanceMetadata implements InstancesV2.
func (p *Provider) InstanceMetadata(_ context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	in, ok := p.lookup(node)
	if !ok {
		return nil, cloudprovider.InstanceNotFound
	}
	md := &cloudprovider.InstanceMetadata{
		ProviderID: in.ProviderID, InstanceType: in.InstanceType, Zone: in.Zone, Region: in.Region,
		AdditionalLabels: maps.Clone(in.Labels),
	}
	for _, a := range in.Addresses {
		md.NodeAddresses = append(md.NodeAddresses, corev1.NodeAddress{Type: a.Type, Address: a.Address})
	}
	return md, nil
}

// ProviderName implements cloudprovider.Interface.
func (p *Provider) ProviderName() string { return ProviderName }

// InstancesV2 implements cloudprovider.Interface.
func (p *Provider) InstancesV2() (cloudprovider.InstancesV2, bool) { return p, true }

// HasClusterID implements cloudprovider.Interface: there is one cluster.
func (p *Provider) HasClusterID() bool { return true }

// LoadBalancer implements cloudprovider.Interface: not supported.
func (p *Provider) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return nil, false }

// Instances implements cloudprovider.Interface: only InstancesV2.
func (p *Provider) Instances() (cloudprovider.Instances, bool) { return nil, false }

// Zones implements cloudprovider.Interface: zones come with InstanceMetadata.
func (p *Provider) Zones() (cloudprovider.Zones, bool) { return nil, false }

// Clusters implements cloudprovider.Interface: not supported.
func (p *Provider) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// Routes implements cloudprovider.Interface: not supported.
func (p *Provider) Routes() (cloudprovider.Routes, bool) { return nil, false }
