package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// ProviderName is the --cloud-provider value and the providerID scheme.
const ProviderName = "docker"

// Container labels read for metadata, and the label naming a container's
// Node when its name differs.
const (
	LabelZone         = "topology.kubernetes.io/zone"
	LabelRegion       = "topology.kubernetes.io/region"
	LabelInstanceType = "node.kubernetes.io/instance-type"
	LabelNodeName     = "nodeplane.io/node-name"
)

// DefaultSocket is the engine's usual socket.
const DefaultSocket = "/var/run/docker.sock"

// Config configures the provider.
type Config struct {
	// Host is unix:///path (as $DOCKER_HOST); empty means DefaultSocket.
	Host string
	// Timeout bounds one engine request (default 10 s).
	Timeout time.Duration
}

// Provider asks the engine on every call (no cache: the engine is local).
type Provider struct {
	socket string
	http   *http.Client
}

var _ cloudprovider.Interface = (*Provider)(nil)
var _ cloudprovider.InstancesV2 = (*Provider)(nil)

// New returns a provider for the engine at cfg.Host.
func New(cfg Config) (*Provider, error) {
	socket := DefaultSocket
	if cfg.Host != "" {
		path, ok := strings.CutPrefix(cfg.Host, "unix://")
		if !ok || path == "" {
			return nil, fmt.Errorf("DOCKER_HOST %q: only unix:///path is supported", cfg.Host)
		}
		socket = path
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns: 4,
	}
	return &Provider{socket: socket, http: &http.Client{Transport: tr, Timeout: cfg.Timeout}}, nil
}

// errNoContainer is a 404 from the engine.
var errNoContainer = errors.New("no such container")

func (p *Provider) get(ctx context.Context, path string, query url.Values, out any) error {
	u := "http://docker" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return fmt.Errorf("docker engine at unix://%s: %w", p.socket, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("docker engine at unix://%s: %w", p.socket, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return errNoContainer
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("docker engine at unix://%s: GET %s: %s: %s", p.socket, path, resp.Status, strings.TrimSpace(string(body)))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("docker engine at unix://%s: GET %s: %w", p.socket, path, err)
	}
	return nil
}

// Ping checks the engine answers.
func (p *Provider) Ping(ctx context.Context) error {
	return p.get(ctx, "/_ping", nil, nil)
}

// container is the part of GET /containers/{id}/json the provider reads.
type container struct {
	ID    string `json:"Id"`
	Name  string `json:"Name"`
	State struct {
		Status  string `json:"Status"`
		Running bool   `json:"Running"`
		Paused  bool   `json:"Paused"`
	} `json:"State"`
	Config struct {
		Hostname string            `json:"Hostname"`
		Labels   map[string]string `json:"Labels"`
	} `json:"Config"`
	NetworkSettings struct {
		Networks map[string]struct {
			IPAddress         string `json:"IPAddress"`
			GlobalIPv6Address string `json:"GlobalIPv6Address"`
		} `json:"Networks"`
	} `json:"NetworkSettings"`
}

// find returns the node's container, or errNoContainer.
func (p *Provider) find(ctx context.Context, node *corev1.Node) (*container, error) {
	if node.Spec.ProviderID != "" {
		id, ok := strings.CutPrefix(node.Spec.ProviderID, ProviderName+"://")
		if !ok || id == "" {
			// Another provider's machine: not one of ours, and not ours to
			// delete either.
			return nil, fmt.Errorf("provider ID %q is not docker://<container id>", node.Spec.ProviderID)
		}
		return p.inspect(ctx, id)
	}
	c, err := p.inspect(ctx, node.Name)
	if err == nil && strings.TrimPrefix(c.Name, "/") == node.Name {
		return c, nil
	}
	if err != nil && !errors.Is(err, errNoContainer) {
		return nil, err
	}
	var list []struct {
		ID string `json:"Id"`
	}
	filters, _ := json.Marshal(map[string][]string{"label": {LabelNodeName + "=" + node.Name}})
	if err := p.get(ctx, "/containers/json", url.Values{"all": {"1"}, "filters": {string(filters)}}, &list); err != nil {
		return nil, err
	}
	switch len(list) {
	case 0:
		return nil, errNoContainer
	case 1:
		return p.inspect(ctx, list[0].ID)
	}
	return nil, fmt.Errorf("%d containers are labelled %s=%s", len(list), LabelNodeName, node.Name)
}

func (p *Provider) inspect(ctx context.Context, id string) (*container, error) {
	if strings.ContainsAny(id, "/?#") {
		return nil, errNoContainer
	}
	var c container
	if err := p.get(ctx, "/containers/"+url.PathEscape(id)+"/json", nil, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// InstanceExists implements InstancesV2: the container exists.
func (p *Provider) InstanceExists(ctx context.Context, node *corev1.Node) (bool, error) {
	_, err := p.find(ctx, node)
	switch {
	case errors.Is(err, errNoContainer):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// InstanceShutdown implements InstancesV2: the container is not running.
func (p *Provider) InstanceShutdown(ctx context.Context, node *corev1.Node) (bool, error) {
	c, err := p.find(ctx, node)
	switch {
	case errors.Is(err, errNoContainer):
		return false, cloudprovider.InstanceNotFound
	case err != nil:
		return false, err
	}
	return !c.State.Running, nil
}

// InstanceMetadata implements InstancesV2.
func (p *Provider) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	c, err := p.find(ctx, node)
	switch {
	case errors.Is(err, errNoContainer):
		return nil, cloudprovider.InstanceNotFound
	case err != nil:
		return nil, err
	}
	return metadata(c), nil
}

func metadata(c *container) *cloudprovider.InstanceMetadata {
	md := &cloudprovider.InstanceMetadata{
		ProviderID:   ProviderName + "://" + c.ID,
		Zone:         c.Config.Labels[LabelZone],
		Region:       c.Config.Labels[LabelRegion],
		InstanceType: c.Config.Labels[LabelInstanceType],
	}
	nets := make([]string, 0, len(c.NetworkSettings.Networks))
	for name := range c.NetworkSettings.Networks {
		nets = append(nets, name)
	}
	sort.Strings(nets)
	for _, name := range nets {
		n := c.NetworkSettings.Networks[name]
		for _, ip := range []string{n.IPAddress, n.GlobalIPv6Address} {
			if ip != "" {
				md.NodeAddresses = append(md.NodeAddresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
			}
		}
	}
	if c.Config.Hostname != "" {
		md.NodeAddresses = append(md.NodeAddresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: c.Config.Hostname})
	}
	return md
}

// ProviderName implements cloudprovider.Interface.
func (p *Provider) ProviderName() string { return ProviderName }

// Initialize implements cloudprovider.Interface: nothing to start.
func (p *Provider) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}

// InstancesV2 implements cloudprovider.Interface.
func (p *Provider) InstancesV2() (cloudprovider.InstancesV2, bool) { return p, true }

// HasClusterID implements cloudprovider.Interface: one engine, one cluster.
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
