package loadgen

import (
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/pki"
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

// TestNodeConnectionsAgainstServer runs the lease mode with one connection
// and one certificate identity per node against a real server: the Node
// authorizer accepts each node's renewals of its own lease and both of its
// watches, which stay open for the run; a node presenting another node's
// identity is refused.
func TestNodeConnectionsAgainstServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir := t.TempDir()
	restCfg, stop, err := startServer(dir, io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	issuer, err := pki.LoadIssuer(filepath.Join(dir, "pki"), nil)
	if err != nil {
		t.Fatal(err)
	}
	setup, err := NewClients(restCfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	const nodes = 20
	tests := []struct {
		name      string
		prefix    string
		certFor   func(node string) string // the node named in the certificate
		watches   bool
		forbidden bool
	}{
		{name: "each node renews its own lease and holds its two watches", prefix: "own-", certFor: func(n string) string { return n }, watches: true},
		{name: "a node presenting another node's identity is refused", prefix: "other-", certFor: func(n string) string { return n + "-x" }, forbidden: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			names := make([]string, nodes)
			for i := range names {
				names[i] = NodeName(tt.prefix, i)
			}
			nc, err := NewNodeClients(restCfg, names, func(node string) ([]byte, []byte, error) {
				certPEM, keyPEM, _, err := issuer.IssueClientCert(pki.NodeUserPrefix+tt.certFor(node), []string{pki.NodesGroup}, time.Hour)
				return certPEM, keyPEM, err
			})
			if err != nil {
				t.Fatal(err)
			}
			cfg := DefaultConfig()
			cfg.Clients, cfg.NodeClients, cfg.NodeWatches = setup, nc, tt.watches
			cfg.Objects, cfg.Prefix, cfg.WithNodes = nodes, tt.prefix, true
			cfg.Interval, cfg.Duration = 200*time.Millisecond, time.Second
			cfg.Clock, cfg.Rand = clock.RealClock{}, rand.New(rand.NewPCG(1, 1))
			cfg.Logger = slog.New(slog.DiscardHandler)
			res, err := Run(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Requests == 0 {
				t.Fatal("no renewals measured")
			}
			if tt.forbidden {
				if res.Errors["Forbidden"] != res.Requests {
					t.Errorf("errors %v of %d renewals; want every renewal Forbidden", res.Errors, res.Requests)
				}
				return
			}
			if res.ErrorCount != 0 || res.Conflicts != 0 {
				t.Errorf("errors %v, %d conflicts; want none", res.Errors, res.Conflicts)
			}
			if c := res.NodeConnections; c == nil || c.Connections != nodes || c.Watches != 2*nodes || c.EndedEarly != 0 {
				t.Errorf("node connections %+v; want %d connections, %d watches, none ended early", c, nodes, 2*nodes)
			}
		})
	}
}
