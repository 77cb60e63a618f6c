// Package sim runs many simulated nodes in one process against a real
// nodeplane server (`nodeplane sim`): each node joins with the real join
// exchange, registers, renews its Lease and posts NodeStatus with the
// agent's own register, lease and nodestatus code, and runs the pods bound
// to it with the fake runtime. Heartbeats of a node or a zone can be stopped
// and resumed while it runs, to play out failures.
//
// What is simulated is only the host (fixed capacity, made-up addresses) and
// the containers. To fit thousands of nodes in one process, nodes share a
// fixed pool of workers driven by one timer heap (schedule.go) instead of
// goroutines per node, and share a few HTTP/2 connections, each node
// authenticating with its own node bearer token from the join exchange (a
// client certificate would bind a connection to one node).
//
// Nodes can also be shut down gracefully (shutdown.go), one or a zone at a
// time, with the agent's own shutdown manager, to rehearse a rolling
// maintenance at scale.
package sim

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/agent"
	"github.com/nodeplane/nodeplane/internal/agent/events"
	"github.com/nodeplane/nodeplane/internal/agent/lease"
	"github.com/nodeplane/nodeplane/internal/agent/nodestatus"
	"github.com/nodeplane/nodeplane/internal/agent/pods"
	"github.com/nodeplane/nodeplane/internal/agent/register"
	"github.com/nodeplane/nodeplane/internal/agent/runtime/fake"
	"github.com/nodeplane/nodeplane/internal/agent/shutdown"
	"github.com/nodeplane/nodeplane/internal/join"
	"github.com/nodeplane/nodeplane/internal/nodelabels"
	"github.com/nodeplane/nodeplane/internal/version"
)

// eventWorkers deliver the nodes' events (a registering node records four).
const eventWorkers = 8

// Config configures a simulation.
type Config struct {
	// Server is the nodeplane server URL; Token the join secret.
	Server string
	Token  string
	// Nodes is how many nodes to simulate, named NamePrefix + index
	// (zero-padded), spread round-robin over Zones (none: no zone label).
	Nodes      int
	Zones      []string
	NamePrefix string
	// Capacity of every node (default 4 CPU, 16Gi, 110 pods).
	Capacity corev1.ResourceList
	// LeaseDuration, StatusUpdateFrequency and StatusReportFrequency are
	// the kubelet settings of every node (defaults 40 s, 10 s, 5 min).
	LeaseDuration         time.Duration
	StatusUpdateFrequency time.Duration
	StatusReportFrequency time.Duration
	// Workers run renewals and status passes (default 64); Joiners
	// register nodes at start (default 16).
	Workers int
	Joiners int
	// WatchPods runs each node's pod watch (field selector spec.nodeName)
	// so pods bound to it start; off saves one watch per node.
	WatchPods bool
	// ShutdownGracePeriod and ShutdownGracePeriodCriticalPods are every
	// node's graceful shutdown budgets (defaults 30 s and 10 s, as the
	// agent's); a node's shutdown stops its pods in priority order within
	// them.
	ShutdownGracePeriod             time.Duration
	ShutdownGracePeriodCriticalPods time.Duration
	Clock                           clock.WithTicker
	// Seed makes start offsets and jitter reproducible.
	Seed   uint64
	Logger *slog.Logger
}

// Sim is a running simulation.
type Sim struct {
	cfg      Config
	sched    *scheduler
	recorder *events.Recorder
	renew    histogram
	start    time.Time

	mu    sync.RWMutex
	nodes []*node

	registered atomic.Int64
	late       atomic.Int64
	renewals   atomic.Int64
	failures   atomic.Int64
	maxGap     atomic.Int64
	transport  *http.Transport
	tokens     *join.TokenClient
	// ctx is Run's: node shutdowns run on it (set before any node exists).
	ctx context.Context
	wg  sync.WaitGroup // node shutdowns
}

type node struct {
	name, zone string
	index      int
	paused     atomic.Bool
	api        agent.API
	renewer    *lease.Renewer
	updater    *nodestatus.Updater
	manager    *pods.Manager
	uid        atomic.Value // types.UID
	lastRenew  atomic.Int64 // unix nanos of the last successful renewal
	// shutdown is the node's graceful shutdown, from its start (nil: none);
	// down is set when it has ended: the node's agent is gone (no more
	// renewals or status updates) until it boots again.
	shutdown atomic.Pointer[shutdown.Manager]
	down     atomic.Bool
}

// New checks cfg.
func New(cfg Config) (*Sim, error) {
	if cfg.Server == "" || cfg.Token == "" {
		return nil, errors.New("sim: Server and Token are required")
	}
	if cfg.Nodes <= 0 {
		return nil, fmt.Errorf("sim: --nodes must be > 0, got %d", cfg.Nodes)
	}
	if cfg.NamePrefix == "" {
		cfg.NamePrefix = "sim-"
	}
	if cfg.Capacity == nil {
		cfg.Capacity = corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("4"),
			corev1.ResourceMemory: resource.MustParse("16Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
		}
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = lease.DefaultDuration
	}
	if cfg.StatusUpdateFrequency == 0 {
		cfg.StatusUpdateFrequency = nodestatus.DefaultUpdateFrequency
	}
	if cfg.StatusReportFrequency == 0 {
		cfg.StatusReportFrequency = nodestatus.DefaultReportFrequency
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 64
	}
	if cfg.Joiners <= 0 {
		cfg.Joiners = 16
	}
	if cfg.ShutdownGracePeriod == 0 && cfg.ShutdownGracePeriodCriticalPods == 0 {
		cfg.ShutdownGracePeriod, cfg.ShutdownGracePeriodCriticalPods = 30*time.Second, 10*time.Second
	}
	if cfg.ShutdownGracePeriod < 0 || cfg.ShutdownGracePeriodCriticalPods < 0 || cfg.ShutdownGracePeriodCriticalPods > cfg.ShutdownGracePeriod {
		return nil, fmt.Errorf("sim: --shutdown-grace-period-critical-pods (%v) must be between 0 and --shutdown-grace-period (%v)",
			cfg.ShutdownGracePeriodCriticalPods, cfg.ShutdownGracePeriod)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Sim{
		cfg:      cfg,
		sched:    newScheduler(cfg.Clock, cfg.Workers),
		recorder: events.New(events.Config{Clock: cfg.Clock, Logger: cfg.Logger, QueueSize: 10000}),
	}, nil
}

// Name returns the name of node i.
func (s *Sim) Name(i int) string {
	width := len(fmt.Sprint(s.cfg.Nodes - 1))
	return fmt.Sprintf("%s%0*d", s.cfg.NamePrefix, width, i)
}

// Run joins and registers every node, then keeps them heartbeating until
// ctx ends. ready, if set, is called once all nodes are registered.
func (s *Sim) Run(ctx context.Context, ready func()) error {
	s.start = s.cfg.Clock.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.ctx = ctx
	defer s.wg.Wait()
	tokens, err := join.NewTokenClient(ctx, join.ClientConfig{Server: s.cfg.Server, Token: s.cfg.Token, NodeName: s.Name(0), Logger: s.cfg.Logger})
	if err != nil {
		return err
	}
	defer tokens.Close()
	s.tokens = tokens
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() { defer wg.Done(); s.sched.run(ctx, s.cfg.Workers) }()
	for range eventWorkers {
		wg.Add(1)
		go func() { defer wg.Done(); s.recorder.Run(ctx) }()
	}

	jobs := make(chan int)
	errs := make(chan error, s.cfg.Joiners)
	var joinWG sync.WaitGroup
	rng := rand.New(rand.NewPCG(s.cfg.Seed, s.cfg.Seed^0x5eed))
	offsets := make([]time.Duration, 2*s.cfg.Nodes)
	interval := time.Duration(float64(s.cfg.LeaseDuration) * lease.RenewFraction)
	for i := range s.cfg.Nodes {
		offsets[2*i] = time.Duration(rng.Int64N(int64(interval)))
		offsets[2*i+1] = time.Duration(rng.Int64N(int64(s.cfg.StatusUpdateFrequency)))
	}
	for range s.cfg.Joiners {
		joinWG.Add(1)
		go func() {
			defer joinWG.Done()
			for i := range jobs {
				n, err := s.join(ctx, i, rand.New(rand.NewPCG(s.cfg.Seed, uint64(i))))
				if err != nil {
					select {
					case errs <- fmt.Errorf("node %s: %w", s.Name(i), err):
					default:
					}
					cancel()
					return
				}
				s.schedule(ctx, n, offsets[2*i], offsets[2*i+1], &wg)
			}
		}()
	}
feed:
	for i := range s.cfg.Nodes {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	joinWG.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	if ctx.Err() != nil {
		return nil
	}
	s.cfg.Logger.Info("all simulated nodes registered", "nodes", s.cfg.Nodes, "took", s.cfg.Clock.Since(s.start).Round(time.Millisecond))
	if ready != nil {
		ready()
	}
	<-ctx.Done()
	return nil
}

// join gets node i a token and clients, and builds it.
func (s *Sim) join(ctx context.Context, i int, rng *rand.Rand) (*node, error) {
	n := &node{name: s.Name(i), index: i}
	if len(s.cfg.Zones) > 0 {
		n.zone = s.cfg.Zones[i%len(s.cfg.Zones)]
	}
	token, err := s.tokens.Token(ctx, n.name)
	if err != nil {
		return nil, err
	}
	rc, err := s.restConfig(token, s.tokens.CAPEM())
	if err != nil {
		return nil, err
	}
	core, err := corev1client.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	coord, err := coordinationv1client.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return n, s.build(ctx, n, agent.API{Core: core, Coordination: coord}, rng)
}

// build gives node n its parts over api, registers it and adds it to the
// simulation.
func (s *Sim) build(ctx context.Context, n *node, api agent.API, rng *rand.Rand) error {
	var err error
	n.api = api
	n.renewer, err = lease.New(lease.Config{
		NodeName: n.name, Duration: s.cfg.LeaseDuration, Client: n.api.Leases(), Clock: s.cfg.Clock, Rand: rng,
		NodeUID: func(context.Context) (types.UID, error) {
			if uid, ok := n.uid.Load().(types.UID); ok && uid != "" {
				return uid, nil
			}
			return "", errors.New("node not registered")
		},
	})
	if err != nil {
		return err
	}
	n.updater, err = nodestatus.NewUpdater(nodestatus.Config{
		NodeName: n.name, Client: n.api, Observe: s.observer(n), Recorder: simRecorder{s, n},
		Clock: s.cfg.Clock, UpdateFrequency: s.cfg.StatusUpdateFrequency, ReportFrequency: s.cfg.StatusReportFrequency,
	})
	if err != nil {
		return err
	}
	rt := fake.New(fake.Config{NodeName: n.name, Clock: s.cfg.Clock})
	n.manager, err = pods.New(pods.Config{
		NodeName: n.name, Runtime: rt, Client: n.api, Node: n.updater.Last,
		HostIPs: func() []string { return []string{n.ip()} }, Clock: s.cfg.Clock, Inline: true,
		ShuttingDown: func() bool {
			m := n.shutdown.Load()
			return m != nil && m.ShuttingDown()
		},
	})
	if err != nil {
		return err
	}

	obs, _ := s.observer(n)(ctx)
	status, _ := nodestatus.Compute(nil, obs, s.cfg.Clock.Now())
	labels := map[string]string{}
	if n.zone != "" {
		labels[nodelabels.Zone] = n.zone
	}
	registered, created, err := register.Ensure(ctx, register.Config{Client: n.api, Clock: s.cfg.Clock}, func() *corev1.Node {
		return register.InitialNode(register.Spec{Name: n.name, Hostname: n.name, OS: "linux", Arch: "amd64", Labels: labels}, status)
	})
	if err != nil {
		return err
	}
	if created {
		for _, e := range nodestatus.InitialEvents(registered) {
			simRecorder{s, n}.NodeEvent(e.Type, e.Reason, e.Message)
		}
	}
	n.uid.Store(registered.UID)
	n.updater.Remember(registered)
	s.mu.Lock()
	s.nodes = append(s.nodes, n)
	s.mu.Unlock()
	s.registered.Add(1)
	return nil
}

// schedule starts node n's heartbeats (after the given offsets, so renewals
// spread over the interval as real nodes' do) and its pod watch.
func (s *Sim) schedule(ctx context.Context, n *node, leaseOffset, statusOffset time.Duration, wg *sync.WaitGroup) {
	now := s.cfg.Clock.Now()
	s.sched.add(now.Add(leaseOffset), func(ctx context.Context) time.Duration {
		if n.paused.Load() || n.down.Load() {
			n.lastRenew.Store(0)
			return n.renewer.Interval()
		}
		start := s.cfg.Clock.Now()
		next := n.renewer.Renew(ctx)
		end := s.cfg.Clock.Now()
		if next < n.renewer.Interval() {
			s.failures.Add(1)
			return next
		}
		s.renew.observe(end.Sub(start))
		s.renewals.Add(1)
		if last := n.lastRenew.Swap(end.UnixNano()); last != 0 {
			gap := time.Duration(end.UnixNano() - last)
			if gap > time.Duration(float64(n.renewer.Interval())*(1+lease.MaxJitter))+time.Second {
				s.late.Add(1)
			}
			for {
				m := s.maxGap.Load()
				if int64(gap) <= m || s.maxGap.CompareAndSwap(m, int64(gap)) {
					break
				}
			}
		}
		return next
	})
	s.sched.add(now.Add(statusOffset), func(ctx context.Context) time.Duration {
		if !n.paused.Load() && !n.down.Load() {
			if err := n.updater.Sync(ctx); err != nil && ctx.Err() == nil {
				s.cfg.Logger.Debug("simulated node status failed", "node", n.name, "err", err)
			}
		}
		return s.cfg.StatusUpdateFrequency
	})
	if s.cfg.WatchPods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			watchPods(ctx, n, s.cfg.Clock, agent.Handlers[*corev1.Pod]{
				Upsert: n.manager.Upsert, Delete: n.manager.Delete, Replace: n.manager.Replace,
			})
		}()
	}
}

// ip is the node's made-up InternalIP: 10.<zone>.<i/256>.<i%256>.
func (n *node) ip() string {
	return fmt.Sprintf("10.%d.%d.%d", 100+n.index/65536%100, n.index/256%256, n.index%256)
}

func (s *Sim) observer(n *node) func(context.Context) (nodestatus.Observation, error) {
	return func(context.Context) (nodestatus.Observation, error) {
		var notReady []string
		if m := n.shutdown.Load(); m != nil {
			notReady = m.NotReady()
		}
		return nodestatus.Observation{
			NotReady:    notReady,
			Capacity:    s.cfg.Capacity,
			Allocatable: s.cfg.Capacity,
			NodeInfo: corev1.NodeSystemInfo{
				MachineID: n.name, SystemUUID: n.name, BootID: "sim-boot-" + n.name,
				KernelVersion: "sim", OSImage: "nodeplane sim", OperatingSystem: "linux", Architecture: "amd64",
				ContainerRuntimeVersion: "nodeplane-sim://" + version.Version, KubeletVersion: version.AgentVersion(),
			},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: n.ip()},
				{Type: corev1.NodeHostName, Address: n.name},
			},
			DaemonPort: 10250,
		}, nil
	}
}

// restConfig builds a node's client config over the shared transport.
func (s *Sim) restConfig(token string, caPEM []byte) (*rest.Config, error) {
	s.mu.Lock()
	if s.transport == nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			s.mu.Unlock()
			return nil, errors.New("cluster CA from the join exchange does not parse")
		}
		s.transport = &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2:   true,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
		}
	}
	t := s.transport
	s.mu.Unlock()
	return &rest.Config{
		Host:        s.cfg.Server,
		BearerToken: token,
		Transport:   t,
		RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter(),
		UserAgent:   "nodeplane-sim/" + version.Version,
		ContentConfig: rest.ContentConfig{
			ContentType:        "application/vnd.kubernetes.protobuf",
			AcceptContentTypes: "application/vnd.kubernetes.protobuf,application/json",
		},
	}, nil
}

// Selector picks nodes: by name or by zone. Count, with Zone, narrows a
// zone to its first Count nodes by index (0: all of them), so a what-if can
// silence part of a zone (a partial disruption) with one command.
type Selector struct {
	Node  string `json:"node,omitempty"`
	Zone  string `json:"zone,omitempty"`
	Count int    `json:"count,omitempty"`
}

// SetPaused stops (true) or resumes (false) the heartbeats — lease renewals
// and status updates — of the selected nodes, returning how many matched.
func (s *Sim) SetPaused(sel Selector, paused bool) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, nd := range s.nodes {
		if s.selects(sel, nd) {
			if nd.paused.Swap(paused) && !paused {
				// Simulated nodes do not watch their Node; a kubelet
				// coming back would see the controller's Unknown through
				// its informer and re-post at once. Do the same.
				nd.updater.ReportNow()
			}
			n++
		}
	}
	return n
}

// Status is a snapshot of the simulation.
type Status struct {
	Nodes      int            `json:"nodes"`
	Registered int64          `json:"registered"`
	Paused     []string       `json:"paused,omitempty"`
	Zones      map[string]int `json:"zones,omitempty"`
	Renewals   int64          `json:"renewals"`
	// RenewalsPerSecond since the start (or the last ResetStats).
	RenewalsPerSecond float64 `json:"renewalsPerSecond"`
	// TargetPerSecond is what the nodes should achieve: running nodes
	// divided by the mean renew interval (with jitter).
	TargetPerSecond float64 `json:"targetPerSecond"`
	RenewP50        string  `json:"renewP50"`
	RenewP99        string  `json:"renewP99"`
	RenewMax        string  `json:"renewMax"`
	// Late counts renewals that came more than 1 s after they were due;
	// MaxGap is the longest time between two renewals of one node.
	Late          int64  `json:"late"`
	MaxGap        string `json:"maxGap"`
	Failures      int64  `json:"failedAttempts"`
	StatusPatches int64  `json:"statusPatches"`
	Pods          int    `json:"pods"`
	// ShuttingDown counts nodes in a graceful shutdown; Down those whose
	// shutdown ended (their agents are gone).
	ShuttingDown   int   `json:"shuttingDown,omitempty"`
	Down           int   `json:"down,omitempty"`
	EventsDropped  int64 `json:"eventsDropped"`
	ElapsedSeconds int64 `json:"elapsedSeconds"`
}

// Status reports progress.
func (s *Sim) Status() Status {
	s.mu.RLock()
	defer s.mu.RUnlock()
	elapsed := s.cfg.Clock.Since(s.start)
	st := Status{
		Nodes: s.cfg.Nodes, Registered: s.registered.Load(), Renewals: s.renewals.Load(),
		RenewP50: s.renew.quantile(0.5).String(), RenewP99: s.renew.quantile(0.99).String(),
		RenewMax: time.Duration(s.renew.max.Load()).String(),
		Late:     s.late.Load(), MaxGap: time.Duration(s.maxGap.Load()).String(), Failures: s.failures.Load(),
		EventsDropped: s.recorder.Dropped(), ElapsedSeconds: int64(elapsed / time.Second),
	}
	if elapsed > 0 {
		st.RenewalsPerSecond = float64(st.Renewals) / elapsed.Seconds()
	}
	running := 0
	for _, n := range s.nodes {
		switch {
		case n.down.Load():
			st.Down++
		case n.paused.Load():
			st.Paused = append(st.Paused, n.name)
		default:
			running++
		}
		if m := n.shutdown.Load(); m != nil && !n.down.Load() && m.ShuttingDown() {
			st.ShuttingDown++
		}
		if n.zone != "" {
			if st.Zones == nil {
				st.Zones = map[string]int{}
			}
			st.Zones[n.zone]++
		}
		st.StatusPatches += n.updater.Patches()
		b, _ := n.manager.Count()
		st.Pods += b
	}
	sort.Strings(st.Paused)
	// Renewals come every interval plus 0–4 % jitter: 2 % on average.
	interval := time.Duration(float64(s.cfg.LeaseDuration) * lease.RenewFraction * (1 + lease.MaxJitter/2))
	st.TargetPerSecond = float64(running) / interval.Seconds()
	return st
}

// ResetStats starts a new measuring window (renewal counts, latencies,
// late renewals and the max gap).
func (s *Sim) ResetStats() {
	s.renew.reset()
	s.renewals.Store(0)
	s.late.Store(0)
	s.maxGap.Store(0)
	s.failures.Store(0)
	s.mu.Lock()
	s.start = s.cfg.Clock.Now()
	s.mu.Unlock()
}

type simRecorder struct {
	s *Sim
	n *node
}

func (r simRecorder) NodeEvent(eventType, reason, message string) {
	r.s.recorder.Event(r.n.api, r.n.name, events.NodeRef(r.n.name), eventType, reason, message)
}

// ParseZones splits a --zones value.
func ParseZones(s string) []string {
	var out []string
	for _, z := range strings.Split(s, ",") {
		if z = strings.TrimSpace(z); z != "" {
			out = append(out, z)
		}
	}
	return out
}
