package loadgen

import (
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"k8s.io/utils/clock"
)

// TestModesAgainstServer runs every mode briefly against a real in-process
// server (HTTPS, embedded etcd): the requests are well-formed, the server
// accepts them, and every watcher sees every write.
func TestModesAgainstServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	restCfg, stop, err := startServer(t.TempDir(), io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	clients, err := NewClients(restCfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		mode Mode
		tune func(*Config)
	}{
		{ModeCreate, func(c *Config) { c.Duration = 0; c.Prefix = "created-" }},
		{ModeLease, func(c *Config) { c.WithNodes = true; c.Interval = 200 * time.Millisecond }},
		{ModeGet, nil},
		{ModeGet, func(c *Config) { c.ResourceVersion = "0" }},
		{ModeUpdate, nil},
		{ModeList, nil},
		{ModeWatch, func(c *Config) { c.Rate = 50 }},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Mode, cfg.Clients, cfg.Objects, cfg.Duration = tt.mode, clients, 30, time.Second
			cfg.Clock, cfg.Rand = clock.RealClock{}, rand.New(rand.NewPCG(1, 1))
			cfg.Logger = slog.New(slog.DiscardHandler)
			if tt.tune != nil {
				tt.tune(&cfg)
			}
			res, err := Run(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.ErrorCount != 0 || res.Conflicts != 0 || res.Requests == 0 {
				t.Errorf("%d requests, errors %v, %d conflicts; want requests without errors or conflicts", res.Requests, res.Errors, res.Conflicts)
			}
			if w := res.Watch; w != nil && (w.Received != w.Expected || w.Expected == 0 || w.Closed != 0) {
				t.Errorf("watch received %d of %d events, %d watches closed; want all, none closed", w.Received, w.Expected, w.Closed)
			}
			if tt.mode == ModeList && res.ListItems != 60 {
				t.Errorf("list returned %d items, want the 30 created and the 30 load nodes", res.ListItems)
			}
		})
	}
}
