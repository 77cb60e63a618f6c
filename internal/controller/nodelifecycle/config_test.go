package nodelifecycle

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestDefaultConfigHasTheUpstreamDefaults(t *testing.T) {
	got := DefaultConfig()
	want := Config{
		NodeMonitorPeriod:         5 * time.Second,
		NodeMonitorGracePeriod:    50 * time.Second,
		NodeStartupGracePeriod:    60 * time.Second,
		NodeEvictionRate:          0.1,
		SecondaryNodeEvictionRate: 0.01,
		UnhealthyZoneThreshold:    0.55,
		LargeClusterSizeThreshold: 50,
	}
	if got != want {
		t.Errorf("DefaultConfig() = %+v, want %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*Config)
		wantErr string // substring; "" means valid
	}{
		{"zero eviction rates are allowed", func(c *Config) { c.NodeEvictionRate, c.SecondaryNodeEvictionRate = 0, 0 }, ""},
		{"a threshold of 1 is allowed", func(c *Config) { c.UnhealthyZoneThreshold = 1 }, ""},
		{"a zero monitor period is refused", func(c *Config) { c.NodeMonitorPeriod = 0 }, "--node-monitor-period"},
		{"a negative grace period is refused", func(c *Config) { c.NodeMonitorGracePeriod = -time.Second }, "--node-monitor-grace-period"},
		{"a zero startup grace period is refused", func(c *Config) { c.NodeStartupGracePeriod = 0 }, "--node-startup-grace-period"},
		{"a negative eviction rate is refused", func(c *Config) { c.NodeEvictionRate = -0.1 }, "--node-eviction-rate"},
		{"a NaN secondary rate is refused", func(c *Config) { c.SecondaryNodeEvictionRate = math.NaN() }, "--secondary-node-eviction-rate"},
		{"an infinite eviction rate is refused", func(c *Config) { c.NodeEvictionRate = math.Inf(1) }, "--node-eviction-rate"},
		{"a threshold above 1 is refused", func(c *Config) { c.UnhealthyZoneThreshold = 1.5 }, "--unhealthy-zone-threshold"},
		{"a negative large cluster threshold is refused", func(c *Config) { c.LargeClusterSizeThreshold = -1 }, "--large-cluster-size-threshold"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.change(&cfg)
			err := cfg.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Validate() = %v, want an error naming %s", err, tt.wantErr)
			}
			if _, nerr := New(cfg); (nerr == nil) != (err == nil) {
				t.Errorf("New error %v disagrees with Validate error %v", nerr, err)
			}
		})
	}
}

func TestConfigValidateReportsEveryBadField(t *testing.T) {
	cfg := DefaultConfig()
	cfg.NodeMonitorPeriod, cfg.NodeEvictionRate = 0, -1
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "--node-monitor-period") || !strings.Contains(err.Error(), "--node-eviction-rate") {
		t.Errorf("Validate() = %v, want both fields named", err)
	}
}
