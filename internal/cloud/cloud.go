package cloud

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/cloud/docker"
	"github.com/nodeplane/nodeplane/internal/cloud/static"
)

// Provider names accepted by --cloud-provider.
const (
	// External: the cloud controllers run elsewhere.
	External = "external"
	Static   = static.ProviderName
	Docker   = docker.ProviderName
)

// Names lists the values --cloud-provider accepts besides "" (none).
var Names = []string{External, Static, Docker}

// Config selects and configures a provider.
type Config struct {
	// Name is --cloud-provider.
	Name string
	// ConfigFile is --cloud-config.
	ConfigFile string
	// ReloadPeriod is how often the static provider looks at its file.
	ReloadPeriod time.Duration
	Clock        clock.WithTicker
	Logger       *slog.Logger
}

// Validate checks the flag pair without touching the file or the engine.
func Validate(name, configFile string) error {
	switch name {
	case "", External:
		if configFile != "" && name == "" {
			return fmt.Errorf("--cloud-config %q needs --cloud-provider", configFile)
		}
		return nil
	case Static:
		if configFile == "" {
			return fmt.Errorf("--cloud-provider=static needs --cloud-config (the file listing the machines)")
		}
		return nil
	case Docker:
		if configFile != "" {
			return fmt.Errorf("--cloud-config %q: --cloud-provider=docker takes no file (the engine is $DOCKER_HOST, else unix:///var/run/docker.sock)", configFile)
		}
		return nil
	}
	return fmt.Errorf("--cloud-provider %q: want one of %q, %q, %q or empty", name, External, Static, Docker)
}

// RunsControllers reports whether the server runs the cloud controllers
// for this --cloud-provider value (a provider of its own, not "" nor
// "external").
func RunsControllers(name string) bool { return name != "" && name != External }

// New builds the provider and checks it can answer: the static file
// parses, the Docker engine answers. The provider must then be started with
// Initialize (the static provider's reload loop runs until stop closes).
func New(ctx context.Context, cfg Config) (cloudprovider.Interface, error) {
	if err := Validate(cfg.Name, cfg.ConfigFile); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	switch cfg.Name {
	case Static:
		p, err := static.New(static.Config{Path: cfg.ConfigFile, ReloadPeriod: cfg.ReloadPeriod, Clock: cfg.Clock, Logger: cfg.Logger})
		if err != nil {
			return nil, fmt.Errorf("--cloud-config: %w", err)
		}
		return p, nil
	case Docker:
		p, err := docker.New(docker.Config{Host: os.Getenv("DOCKER_HOST")})
		if err != nil {
			return nil, fmt.Errorf("--cloud-provider=docker: %w", err)
		}
		if err := p.Ping(ctx); err != nil {
			return nil, fmt.Errorf("--cloud-provider=docker: %w", err)
		}
		return p, nil
	}
	return nil, fmt.Errorf("--cloud-provider %q: no provider runs in this process", cfg.Name)
}
