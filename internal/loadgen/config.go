// Package loadgen drives a Kubernetes API server with the requests a fleet
// of node agents and controllers would send — lease renewals, Node creates,
// gets, status updates, lists and watches — through client-go's typed
// clients, and measures what the server sustains: achieved rate against
// target, latency percentiles, errors, and the server process's CPU and
// memory.
//
// It owns only the load and its measurement; it talks to the server through
// the API (never to storage) and never changes server behaviour. The
// pacing is driven by an injected clock and a seeded random source so its
// decisions can be tested without waiting; `nodeplane load` runs it in real
// time, and `nodeplane sim` can reuse the lease path for simulated nodes.
package loadgen

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Mode is what the load generator does.
type Mode string

// The modes.
const (
	// ModeLease renews Objects leases in kube-node-lease, each every
	// Interval plus jitter, spread over the clients: the heartbeat path.
	ModeLease Mode = "lease"
	// ModeCreate creates Objects Nodes (names NodeName(Prefix, i)).
	ModeCreate Mode = "create"
	// ModeGet reads random Nodes out of Objects.
	ModeGet Mode = "get"
	// ModeUpdate updates Nodes' status (condition heartbeats), each worker
	// writing its own Nodes from the last object it wrote.
	ModeUpdate Mode = "update"
	// ModeList lists all Nodes.
	ModeList Mode = "list"
	// ModeWatch opens one Node watch per client and measures how long
	// after a status update is acknowledged each watcher receives it.
	ModeWatch Mode = "watch"
)

// Modes lists every mode.
var Modes = []Mode{ModeLease, ModeCreate, ModeGet, ModeUpdate, ModeList, ModeWatch}

// Config configures one load run.
type Config struct {
	Mode Mode
	// Clients are the API connections; request i of a lease, or worker w,
	// uses Clients[i % len(Clients)]. Build them with NewClients.
	Clients []kubernetes.Interface

	// NodeClients, when set (lease mode), gives every lease's node its own
	// connection: lease i is renewed over NodeClients[i], as a real fleet
	// of agents would, while setup still uses Clients. Build them with
	// NewNodeClients; len must equal Objects.
	NodeClients []NodeClient
	// NodeWatches (with NodeClients) opens each node's two agent watches —
	// its Node and its pods — over its connection before the load starts,
	// and keeps them open for the run.
	NodeWatches bool

	// Objects is the number of leases (lease) or Nodes (other modes) the
	// run uses; they are created first when missing.
	Objects int
	// Duration of the measured phase. For create, 0 means "until Objects
	// are created"; other modes need a positive Duration.
	Duration time.Duration
	// Warmup runs the load for this long before measuring.
	Warmup time.Duration

	// Rate is the target requests per second, summed over all clients.
	// In lease mode, a positive Rate overrides Interval with
	// Objects/Rate (minus the jitter's mean), so 10,000 renewals/s can be
	// driven by 10,000 leases at a 1 s interval. In create, get, update
	// and list modes 0 means closed loop (every worker sends its next
	// request when the last one returns); a positive Rate is open loop
	// and latency is measured from each request's intended start time.
	// In watch mode it is the writer's rate (default 100/s).
	Rate float64
	// Interval between a lease's renewals (the kubelet's renew interval,
	// 0.25 × nodeLeaseDurationSeconds = 10 s).
	Interval time.Duration
	// JitterFactor adds rand[0, JitterFactor·Interval) to each interval;
	// the kubelet uses 0.04.
	JitterFactor float64
	// WithNodes also creates a Node per lease, owning it, as a kubelet
	// registers before its lease exists.
	WithNodes bool
	// Inflight is the number of concurrent requests per client in the
	// create, get, update and list modes, and the writer's concurrency in
	// watch mode.
	Inflight int
	// Prefix starts every object name, so runs can share a server.
	Prefix string
	// ResourceVersion of get and list requests: "" reads from storage
	// (a consistent read), "0" from the server's watch cache.
	ResourceVersion string
	// SetupConcurrency bounds concurrent creates while preparing objects.
	SetupConcurrency int
	// Cleanup deletes the objects the run created when it ends.
	Cleanup bool
	// ProgressInterval is how often the rate and latency of the last
	// interval are logged during the measured phase; 0 disables.
	ProgressInterval time.Duration
	// ServerPID, when positive, is the API server process whose CPU and
	// memory are sampled from /proc.
	ServerPID int
	// Wire, when set, is the response counter installed in the Clients'
	// configuration (Wire.Wrap); the measured phase's counts go into
	// Result.Wire.
	Wire *Wire

	// Clock paces the load and times requests.
	Clock clock.WithTicker
	// Rand draws jitter, start offsets and random keys.
	Rand *rand.Rand
	// Logger receives progress messages.
	Logger *slog.Logger
}

// DefaultConfig returns the defaults of `nodeplane load`: 1,000 leases
// renewed every 10 s by 10 clients for 60 s.
func DefaultConfig() Config {
	return Config{
		Mode:             ModeLease,
		Objects:          1000,
		Duration:         60 * time.Second,
		Interval:         10 * time.Second,
		JitterFactor:     0.04,
		Inflight:         1,
		Prefix:           "load-",
		SetupConcurrency: 64,
		ProgressInterval: 10 * time.Second,
		Clock:            clock.RealClock{},
		Rand:             rand.New(rand.NewPCG(1, 2)),
		Logger:           slog.Default(),
	}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	known := false
	for _, m := range Modes {
		known = known || c.Mode == m
	}
	if !known {
		errs = append(errs, fmt.Errorf("unknown mode %q (want one of %v)", c.Mode, Modes))
	}
	if len(c.Clients) == 0 {
		errs = append(errs, errors.New("need at least one client"))
	}
	if c.Objects <= 0 {
		errs = append(errs, fmt.Errorf("objects must be > 0, got %d", c.Objects))
	}
	if c.Duration < 0 || (c.Duration == 0 && c.Mode != ModeCreate) {
		errs = append(errs, fmt.Errorf("duration must be > 0 in %s mode, got %v", c.Mode, c.Duration))
	}
	if c.Warmup < 0 {
		errs = append(errs, fmt.Errorf("warmup must be >= 0, got %v", c.Warmup))
	}
	if c.Rate < 0 {
		errs = append(errs, fmt.Errorf("rate must be >= 0, got %v", c.Rate))
	}
	if c.Mode == ModeLease && c.Rate == 0 && c.Interval <= 0 {
		errs = append(errs, fmt.Errorf("interval must be > 0, got %v", c.Interval))
	}
	if c.JitterFactor < 0 {
		errs = append(errs, fmt.Errorf("jitter factor must be >= 0, got %v", c.JitterFactor))
	}
	if c.Inflight <= 0 {
		errs = append(errs, fmt.Errorf("inflight must be > 0, got %d", c.Inflight))
	}
	if c.NodeClients != nil && (c.Mode != ModeLease || len(c.NodeClients) != c.Objects) {
		errs = append(errs, fmt.Errorf("node clients need lease mode and one client per object, got %d for %d objects in %s mode", len(c.NodeClients), c.Objects, c.Mode))
	}
	if c.NodeWatches && c.NodeClients == nil {
		errs = append(errs, errors.New("node watches need node clients"))
	}
	if c.SetupConcurrency <= 0 {
		errs = append(errs, fmt.Errorf("setup concurrency must be > 0, got %d", c.SetupConcurrency))
	}
	if c.ResourceVersion != "" && c.ResourceVersion != "0" {
		errs = append(errs, fmt.Errorf("resource version must be \"\" or \"0\", got %q", c.ResourceVersion))
	}
	if c.Clock == nil || c.Rand == nil {
		errs = append(errs, errors.New("clock and rand are required"))
	}
	return errors.Join(errs...)
}

// leaseInterval is the renewal interval the run uses: Interval, or the one
// that makes Objects leases produce Rate renewals/s.
func (c *Config) leaseInterval() time.Duration {
	if c.Rate > 0 {
		return time.Duration(float64(c.Objects) / (c.Rate * (1 + c.JitterFactor/2)) * float64(time.Second))
	}
	return c.Interval
}
