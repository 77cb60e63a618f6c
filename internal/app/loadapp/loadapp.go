// Package loadapp is the `nodeplane load` command: it turns flags into a
// loadgen.Config — clients built from a kubeconfig, the real clock, a
// seeded random source — runs it and prints the result. The load and its
// measurement live in internal/loadgen.
package loadapp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodeplane/nodeplane/internal/loadgen"
	"github.com/nodeplane/nodeplane/internal/logging"
	"github.com/nodeplane/nodeplane/internal/pki"
)

// Options are the raw flag values.
type Options struct {
	Kubeconfig       string
	Mode             string
	Clients          int
	Objects          int
	Duration         time.Duration
	Warmup           time.Duration
	Rate             float64
	Interval         time.Duration
	Jitter           float64
	WithNodes        bool
	Inflight         int
	Prefix           string
	ResourceVersion  string
	SetupConcurrency int
	Cleanup          bool
	ServerPID        int
	NodeConnections  bool
	NodeCADir        string
	NodeWatches      bool
	RequestTimeout   time.Duration
	Seed             uint64
	JSON             bool
	Logging          logging.Options
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	d := loadgen.DefaultConfig()
	return Options{
		Mode:             string(d.Mode),
		Clients:          10,
		Objects:          d.Objects,
		Duration:         d.Duration,
		Interval:         d.Interval,
		Jitter:           d.JitterFactor,
		Inflight:         d.Inflight,
		Prefix:           d.Prefix,
		SetupConcurrency: d.SetupConcurrency,
		RequestTimeout:   30 * time.Second,
		Seed:             1,
		Logging:          logging.Options{Level: "info", Format: "text"},
	}
}

// AddFlags registers the flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of the server to load (e.g. <data-dir>/admin.kubeconfig); empty uses $KUBECONFIG or ~/.kube/config")
	fs.StringVar(&o.Mode, "mode", o.Mode, "lease (heartbeat renewals), create, get, update (node status), list or watch (event delivery latency)")
	fs.IntVar(&o.Clients, "clients", o.Clients, "Client connections: each has its own transport, so its own TCP+TLS connection (HTTP/2). In watch mode, one watch per client")
	fs.IntVar(&o.Objects, "objects", o.Objects, "Leases (lease mode) or Nodes (other modes) to use; missing ones are created first")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "Length of the measured phase; in create mode 0 means until --objects are created")
	fs.DurationVar(&o.Warmup, "warmup", o.Warmup, "Load run before the measured phase")
	fs.Float64Var(&o.Rate, "rate", o.Rate, "Target requests/s over all clients. lease: sets the interval to objects/rate; create/get/update/list: 0 = closed loop, >0 = open loop; watch: writes/s (0 = 100)")
	fs.DurationVar(&o.Interval, "interval", o.Interval, "Lease renew interval per lease (kubelet: 10s, i.e. 0.25 × nodeLeaseDurationSeconds 40); ignored when --rate is set")
	fs.Float64Var(&o.Jitter, "jitter", o.Jitter, "Each renew interval is lengthened by rand[0, jitter × interval), as the kubelet's 0.04")
	fs.BoolVar(&o.WithNodes, "with-nodes", o.WithNodes, "lease mode: also create a realistic Node per lease (the lease is owned by it)")
	fs.IntVar(&o.Inflight, "inflight", o.Inflight, "Concurrent requests per client in create/get/update/list; concurrent writers in watch")
	fs.StringVar(&o.Prefix, "prefix", o.Prefix, "Prefix of object names (<prefix>node-000000 …)")
	fs.StringVar(&o.ResourceVersion, "resource-version", o.ResourceVersion, "get/list resourceVersion: \"\" = consistent read from storage, \"0\" = from the watch cache")
	fs.IntVar(&o.SetupConcurrency, "setup-concurrency", o.SetupConcurrency, "Concurrent creates while preparing objects")
	fs.BoolVar(&o.Cleanup, "cleanup", o.Cleanup, "Delete the objects this run created when it ends")
	fs.IntVar(&o.ServerPID, "server-pid", o.ServerPID, "PID of the server process on this host: report its CPU and RSS from /proc over the measured phase")
	fs.BoolVar(&o.NodeConnections, "node-connections", o.NodeConnections, "lease mode: every simulated node renews over its own connection (one TCP+TLS+HTTP/2 connection per lease), as a real fleet; setup still uses --clients")
	fs.StringVar(&o.NodeCADir, "node-ca-dir", o.NodeCADir, "With --node-connections: the server's PKI directory (<data-dir>/pki, holding ca.crt and ca.key); each node then authenticates with its own client certificate CN=system:node:<name>, O=system:nodes. Empty: nodes use the kubeconfig's identity")
	fs.BoolVar(&o.NodeWatches, "node-watches", o.NodeWatches, "With --node-connections: each node also holds an agent's two watches over its connection — its Node (metadata.name) and its pods (spec.nodeName)")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", o.RequestTimeout, "Timeout of each request (not applied in watch mode: it would cut the watch streams)")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "Seed of the jitter, start offsets and random keys")
	fs.BoolVar(&o.JSON, "json", o.JSON, "Print the result as JSON instead of a summary")
	o.Logging.AddFlags(fs)
}

// Validate checks the flags that loadgen.Config.Validate cannot name.
func (o *Options) Validate() error {
	var errs []error
	if !slices.Contains(loadgen.Modes, loadgen.Mode(o.Mode)) {
		errs = append(errs, fmt.Errorf("--mode %q: want one of %v", o.Mode, loadgen.Modes))
	}
	if o.Clients <= 0 {
		errs = append(errs, fmt.Errorf("--clients must be > 0, got %d", o.Clients))
	}
	if o.NodeConnections && o.Mode != string(loadgen.ModeLease) {
		errs = append(errs, fmt.Errorf("--node-connections needs --mode lease, got %q", o.Mode))
	}
	if (o.NodeCADir != "" || o.NodeWatches) && !o.NodeConnections {
		errs = append(errs, errors.New("--node-ca-dir and --node-watches need --node-connections"))
	}
	if o.RequestTimeout < 0 {
		errs = append(errs, fmt.Errorf("--request-timeout must be >= 0, got %v", o.RequestTimeout))
	}
	return errors.Join(errs...)
}

// Command returns `nodeplane load`.
func Command(stdout, stderr io.Writer) *cobra.Command {
	o := DefaultOptions()
	cmd := &cobra.Command{
		Use:   "load",
		Short: "Drive a nodeplane (or any Kubernetes) API server with agent-like load and measure it",
		Long: `load sends the requests a fleet of node agents would — lease renewals, Node creates, gets,
status updates, lists and watches — through client-go's typed clients (protobuf), and reports
achieved rate against target, latency percentiles, errors, and with --server-pid the server's
CPU and RSS.

  nodeplane load --kubeconfig DIR/admin.kubeconfig --mode lease --objects 10000 --clients 100 --interval 10s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			logger, err := logging.New(stderr, o.Logging)
			if err != nil {
				return err
			}
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			rules.ExplicitPath = o.Kubeconfig
			restCfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
			if err != nil {
				return fmt.Errorf("--kubeconfig: %w", err)
			}
			if loadgen.Mode(o.Mode) != loadgen.ModeWatch {
				// client-go applies Timeout to the whole response, which
				// would cut watch streams.
				restCfg.Timeout = o.RequestTimeout
			}
			wire := &loadgen.Wire{}
			wire.Wrap(restCfg)
			clients, err := loadgen.NewClients(restCfg, o.Clients)
			if err != nil {
				return err
			}
			cfg := loadgen.DefaultConfig()
			if o.NodeConnections {
				if cfg.NodeClients, err = nodeClients(restCfg, o); err != nil {
					return err
				}
				cfg.NodeWatches = o.NodeWatches
			}
			cfg.Mode = loadgen.Mode(o.Mode)
			cfg.Clients = clients
			cfg.Objects = o.Objects
			cfg.Duration = o.Duration
			cfg.Warmup = o.Warmup
			cfg.Rate = o.Rate
			cfg.Interval = o.Interval
			cfg.JitterFactor = o.Jitter
			cfg.WithNodes = o.WithNodes
			cfg.Inflight = o.Inflight
			cfg.Prefix = o.Prefix
			cfg.ResourceVersion = o.ResourceVersion
			cfg.SetupConcurrency = o.SetupConcurrency
			cfg.Cleanup = o.Cleanup
			cfg.ServerPID = o.ServerPID
			cfg.Wire = wire
			cfg.Rand = rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
			cfg.Logger = logger
			res, err := loadgen.Run(cmd.Context(), cfg)
			if res == nil {
				return err
			}
			if o.JSON {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				if jerr := enc.Encode(res); jerr != nil {
					return jerr
				}
			} else if werr := res.WriteSummary(stdout); werr != nil {
				return werr
			}
			return err
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// nodeClients builds one connection per simulated node, each with its own
// node certificate when --node-ca-dir names the server's CA.
func nodeClients(restCfg *rest.Config, o Options) ([]loadgen.NodeClient, error) {
	names := make([]string, o.Objects)
	for i := range names {
		names[i] = loadgen.NodeName(o.Prefix, i)
	}
	var identity loadgen.NodeIdentity
	if o.NodeCADir != "" {
		issuer, err := pki.LoadIssuer(o.NodeCADir, nil)
		if err != nil {
			return nil, fmt.Errorf("--node-ca-dir: %w", err)
		}
		identity = func(node string) ([]byte, []byte, error) {
			certPEM, keyPEM, _, err := issuer.IssueClientCert(pki.NodeUserPrefix+node, []string{pki.NodesGroup}, 24*time.Hour)
			return certPEM, keyPEM, err
		}
	}
	return loadgen.NewNodeClients(restCfg, names, identity)
}
