// Package agent is the node agent (the kubelet's role): it registers the
// Node, keeps its Lease renewed, posts NodeStatus, runs the pods bound to it
// through a runtime, and serves their logs to the API server.
//
// This file wires the parts (register, lease, nodestatus, pods, logserver,
// events, shutdown), each of which owns one concern and talks to the API only through
// a small client interface satisfied by API. The agent reaches the server
// only through client-go; it never touches storage.
package agent

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
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/agent/config"
	"github.com/nodeplane/nodeplane/internal/agent/events"
	"github.com/nodeplane/nodeplane/internal/agent/eviction"
	"github.com/nodeplane/nodeplane/internal/agent/host"
	"github.com/nodeplane/nodeplane/internal/agent/lease"
	"github.com/nodeplane/nodeplane/internal/agent/logserver"
	"github.com/nodeplane/nodeplane/internal/agent/nodestatus"
	"github.com/nodeplane/nodeplane/internal/agent/pods"
	"github.com/nodeplane/nodeplane/internal/agent/register"
	"github.com/nodeplane/nodeplane/internal/agent/runtime"
	"github.com/nodeplane/nodeplane/internal/agent/shutdown"
	"github.com/nodeplane/nodeplane/internal/agent/volumes"
	"github.com/nodeplane/nodeplane/internal/version"
)

// Config configures an Agent.
type Config struct {
	// NodeName is the Node's name (validated by the caller).
	NodeName string
	Settings config.Settings
	// Labels from --node-labels (checked against nodelabels by the caller).
	Labels map[string]string
	// RegisterUnschedulable registers the Node cordoned
	// (--register-schedulable=false): spec.unschedulable and the
	// unschedulable taint, at first creation only.
	RegisterUnschedulable bool
	// NodeIPs from --node-ip (empty: detected).
	NodeIPs []net.IP
	// ExternalCloudProvider (--cloud-provider=external): the cloud node
	// controller owns the Node's addresses once it has set them.
	ExternalCloudProvider bool
	Host                  *host.Host
	Runtime               runtime.Runtime
	API                   API
	// ClientCAs verifies the API server when it fetches logs.
	ClientCAs *x509.CertPool
	// ServingCertificate returns the log endpoint's certificate (the
	// node's serving certificate from the cluster CA) at each handshake.
	ServingCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// Listen is the log endpoint's host:port (default 0.0.0.0:10250; port
	// 0 picks one and publishes it in status.daemonEndpoints).
	Listen string
	Clock  clock.WithTicker
	Rand   *rand.Rand
	Logger *slog.Logger
	// OnRepeatedFailure runs when heartbeats keep failing (close idle
	// connections so a dead one is not reused).
	OnRepeatedFailure func()
	// StateDir holds the graceful shutdown state file (empty: none).
	StateDir string
	// Metrics is the agent's registry: its metrics are registered there
	// and served at /metrics on the log endpoint (nil: neither).
	Metrics *prometheus.Registry
	// Volumes prepares pod volumes (nil: volumes are ignored, as in
	// nodeplane sim); the Runtime must then be a runtime.VolumeRuntime.
	Volumes *volumes.Manager
	// RuntimeHealth reports why the runtime cannot start or track pods
	// (nil error: it can); its error is the Ready=False message. Nil: the
	// runtime is always healthy.
	RuntimeHealth func() error
	// Usage measures what pods use, for eviction ranking and messages
	// (nil: every pod counts as using nothing).
	Usage *eviction.ProcUsage
	// Registered, when set, runs once the Node is registered (or found,
	// with registerNode false) at start: readiness for a supervisor
	// (systemd's READY=1).
	Registered func(*corev1.Node)
}

// Agent is a running node agent.
type Agent struct {
	cfg      Config
	recorder *events.Recorder
	manager  *pods.Manager
	updater  *nodestatus.Updater
	renewer  *lease.Renewer
	logs     *logserver.Server
	shutdown *shutdown.Manager
	eviction *eviction.Manager

	node      atomic.Pointer[corev1.Node]
	addresses atomic.Pointer[[]corev1.NodeAddress]
}

// New checks cfg and builds the agent's parts.
func New(cfg Config) (*Agent, error) {
	if cfg.NodeName == "" || cfg.Host == nil || cfg.Runtime == nil || cfg.API.Core == nil {
		return nil, errors.New("agent: NodeName, Host, Runtime and API are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Listen == "" {
		cfg.Listen = "0.0.0.0:10250"
	}
	a := &Agent{cfg: cfg}
	a.recorder = events.New(events.Config{Clock: cfg.Clock, Logger: cfg.Logger})

	var err error
	a.renewer, err = lease.New(lease.Config{
		NodeName:          cfg.NodeName,
		Duration:          time.Duration(cfg.Settings.NodeLeaseDurationSeconds) * time.Second,
		Client:            cfg.API.Leases(),
		NodeUID:           a.nodeUID,
		Clock:             cfg.Clock,
		Rand:              cfg.Rand,
		Logger:            cfg.Logger,
		OnRepeatedFailure: cfg.OnRepeatedFailure,
	})
	if err != nil {
		return nil, err
	}
	a.updater, err = nodestatus.NewUpdater(nodestatus.Config{
		NodeName:          cfg.NodeName,
		Client:            cfg.API,
		Observe:           a.observe,
		Cached:            a.cachedNode,
		Recorder:          nodeRecorder{a},
		Clock:             cfg.Clock,
		UpdateFrequency:   cfg.Settings.NodeStatusUpdateFrequency,
		ReportFrequency:   cfg.Settings.NodeStatusReportFrequency,
		OnRepeatedFailure: cfg.OnRepeatedFailure,
		Logger:            cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	var vols pods.Volumes
	if cfg.Volumes != nil {
		vols = cfg.Volumes
	}
	a.manager, err = pods.New(pods.Config{
		Volumes:       vols,
		NodeName:      cfg.NodeName,
		Runtime:       cfg.Runtime,
		Client:        cfg.API,
		Node:          a.cachedNode,
		HostIPs:       a.hostIPs,
		Recorder:      podRecorder{a},
		Clock:         cfg.Clock,
		Logger:        cfg.Logger,
		ShuttingDown:  func() bool { return a.shutdown.ShuttingDown() },
		PressureAdmit: func(p *corev1.Pod) (bool, string, string) { return a.eviction.Admit(p) },
	})
	if err != nil {
		return nil, err
	}
	var reg prometheus.Registerer
	if cfg.Metrics != nil {
		reg = cfg.Metrics
	}
	a.eviction, err = eviction.New(eviction.Config{
		Settings: cfg.Settings,
		Observe:  cfg.Host.Signals,
		Pods:     evictionPods{a},
		OnChange: a.updater.ReportNow,
		Metrics:  reg,
		Clock:    cfg.Clock,
		Logger:   cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	gauges, err := shutdown.NewGauges(reg)
	if err != nil {
		return nil, err
	}
	statePath := ""
	if cfg.StateDir != "" {
		statePath = filepath.Join(cfg.StateDir, shutdown.StateFileName)
	}
	s := cfg.Settings
	var byPriority []shutdown.Group
	for _, p := range s.ShutdownGracePeriodByPodPriority {
		byPriority = append(byPriority, shutdown.Group{Priority: p.Priority, GracePeriod: p.GracePeriod})
	}
	a.shutdown, err = shutdown.New(shutdown.Config{
		Table:          shutdown.Table(s.ShutdownGracePeriod, s.ShutdownGracePeriodCriticalPods, byPriority),
		Pods:           a.manager,
		SyncNodeStatus: a.updater.Sync,
		Recorder:       nodeRecorder{a},
		StatePath:      statePath,
		Gauges:         gauges,
		Clock:          cfg.Clock,
		Logger:         cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	if cfg.Metrics != nil {
		if err := a.registerMetrics(cfg.Metrics); err != nil {
			return nil, fmt.Errorf("agent metrics: %w", err)
		}
	}
	return a, nil
}

// Shutdown runs a graceful node shutdown (SPEC GNS-4/5, P3-4): Ready=False
// posted first, new pods refused, running pods stopped lowest priority
// first with their final statuses posted. It returns when done, with
// shutdown.ErrCancelled if CancelShutdown ended it, and at once with
// shutdown.ErrDisabled when graceful shutdown is configured off. The caller then stops the agent.
func (a *Agent) Shutdown(ctx context.Context) error { return a.shutdown.Shutdown(ctx) }

// CancelShutdown ends a running shutdown (GNS-7): the node returns to
// Ready and admits pods again; stopped pods stay stopped.
func (a *Agent) CancelShutdown() bool { return a.shutdown.Cancel() }

// ShutdownEnabled reports whether graceful node shutdown is configured on.
func (a *Agent) ShutdownEnabled() bool { return a.shutdown.Enabled() }

// ShutdownBudget is the sum of the shutdown priority table's budgets.
func (a *Agent) ShutdownBudget() time.Duration { return a.shutdown.Budget() }

// Notify is the runtime's change callback (wire it into the runtime's Config).
func (a *Agent) Notify(uid types.UID) {
	if a.manager != nil {
		a.manager.Notify(uid)
	}
}

// Run registers the node and runs every loop until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	log := a.cfg.Logger
	var metrics http.Handler
	if a.cfg.Metrics != nil {
		metrics = promhttp.HandlerFor(a.cfg.Metrics, promhttp.HandlerOpts{})
	}
	usage, err := a.resourceMetrics()
	if err != nil {
		return err
	}
	logs, err := logserver.Listen(logserver.Config{
		Listen: a.cfg.Listen, Runtime: a.cfg.Runtime, ClientCAs: a.cfg.ClientCAs,
		Certificate: a.cfg.ServingCertificate, Metrics: metrics, ResourceMetrics: usage,
		Clock: a.cfg.Clock, Logger: a.cfg.Logger,
	})
	if err != nil {
		return fmt.Errorf("log endpoint: %w", err)
	}
	a.logs = logs

	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := logs.Serve(ctx); err != nil {
			log.Error("log endpoint stopped", "err", err)
		}
	}()
	wg.Add(1)
	go func() { defer wg.Done(); a.recorder.Run(ctx) }()

	// The first status (sent with the Node) carries the pressure conditions.
	a.eviction.Synchronize(ctx)
	node, err := a.register(ctx)
	if err != nil {
		return fmt.Errorf("register node %q: %w", a.cfg.NodeName, err)
	}
	a.node.Store(node)
	a.updater.Remember(node)
	if a.cfg.Registered != nil {
		a.cfg.Registered(node)
	}

	presence := newPresence(presenceConfig{
		NodeName: a.cfg.NodeName,
		Register: a.register,
		Heartbeats: func(ctx context.Context) {
			var hb sync.WaitGroup
			hb.Add(2)
			go func() { defer hb.Done(); a.renewer.Run(ctx) }()
			go func() { defer hb.Done(); a.updater.Run(ctx) }()
			hb.Wait()
		},
		Registered: func(n *corev1.Node) {
			a.node.Store(n)
			a.updater.Remember(n)
			a.renewer.Forget()
		},
		Logger: log,
	}, node)
	wg.Add(3)
	go func() {
		defer wg.Done()
		ReflectNode(ctx, a.cfg.API.Core, a.cfg.NodeName, Handlers[*corev1.Node]{
			Upsert: func(n *corev1.Node) { a.storeNode(n); a.manager.NodeChanged() },
			Delete: presence.Deleted,
			Replace: func(ns []*corev1.Node) {
				a.replaceNode(ns)
				a.manager.NodeChanged()
				presence.Listed(ns)
			},
		})
	}()
	go func() { defer wg.Done(); presence.Run(ctx) }()
	go func() {
		defer wg.Done()
		ReflectPods(ctx, a.cfg.API.Core, a.cfg.NodeName, Handlers[*corev1.Pod]{
			Upsert: a.manager.Upsert, Delete: a.manager.Delete, Replace: a.manager.Replace,
		})
	}()
	wg.Add(1)
	go func() { defer wg.Done(); a.eviction.Run(ctx) }()
	log.Info("agent running", "logPort", logs.Port())
	a.manager.Run(ctx)
	return nil
}

// register creates the Node (registerNode=true) or waits for an admin to
// create it, retrying until it succeeds or ctx ends.
func (a *Agent) register(ctx context.Context) (*corev1.Node, error) {
	regCfg := register.Config{Client: a.cfg.API, Clock: a.cfg.Clock, Logger: a.cfg.Logger}
	if !a.cfg.Settings.RegisterNode {
		return register.Wait(ctx, regCfg, a.cfg.NodeName)
	}
	node, created, err := register.Ensure(ctx, regCfg, a.initialNode)
	if created {
		// The first status went out with the Node: announce its conditions.
		for _, e := range nodestatus.InitialEvents(node) {
			nodeRecorder{a}.NodeEvent(e.Type, e.Reason, e.Message)
		}
	}
	return node, err
}

// Renewer exposes the lease renewer (for tests and diagnostics).
func (a *Agent) Renewer() *lease.Renewer { return a.renewer }

func (a *Agent) replaceNode(ns []*corev1.Node) {
	for _, n := range ns {
		if n.Name == a.cfg.NodeName {
			a.storeNode(n)
		}
	}
}

// storeNode keeps the node as last seen. A change of spec.podCIDRs (the
// node IPAM controller assigned them) is reported at once: like the
// kubelet's, the next status update counts it as a change (SPEC IPAM-8).
func (a *Agent) storeNode(n *corev1.Node) {
	old := a.node.Swap(n)
	if old != nil && !slices.Equal(old.Spec.PodCIDRs, n.Spec.PodCIDRs) {
		a.cfg.Logger.Info("node pod CIDRs changed", "node", n.Name, "podCIDRs", n.Spec.PodCIDRs)
		a.updater.ReportNow()
	}
}

// PodCIDRs returns the node's spec.podCIDRs as last seen (nil before the
// node is registered or while it has none).
func (a *Agent) PodCIDRs() []string {
	if n := a.node.Load(); n != nil {
		return n.Spec.PodCIDRs
	}
	return nil
}

func (a *Agent) cachedNode() (*corev1.Node, bool) {
	n := a.node.Load()
	return n, n != nil
}

func (a *Agent) nodeUID(ctx context.Context) (types.UID, error) {
	if n := a.node.Load(); n != nil && n.UID != "" {
		return n.UID, nil
	}
	n, err := a.cfg.API.GetNode(ctx, a.cfg.NodeName)
	if err != nil {
		return "", err
	}
	return n.UID, nil
}

func (a *Agent) hostIPs() []string {
	var ips []string
	if p := a.addresses.Load(); p != nil {
		for _, addr := range *p {
			if addr.Type == corev1.NodeInternalIP {
				ips = append(ips, addr.Address)
			}
		}
	}
	return ips
}

// observe reads the host for one status pass.
func (a *Agent) observe(context.Context) (nodestatus.Observation, error) {
	s := a.cfg.Settings
	var obs nodestatus.Observation
	machine, err := a.cfg.Host.Machine()
	if err != nil {
		a.cfg.Logger.Debug("machine info incomplete", "err", err)
	}
	obs.Capacity = config.Capacity(machine, s)
	obs.Allocatable = config.Allocatable(obs.Capacity, s)
	info, err := a.cfg.Host.Info()
	if err != nil {
		a.cfg.Logger.Debug("node info incomplete", "err", err)
	}
	info.KubeletVersion = version.AgentVersion()
	info.ContainerRuntimeVersion = a.cfg.Runtime.Version()
	info.OperatingSystem, info.Architecture = goruntime.GOOS, goruntime.GOARCH
	obs.NodeInfo = info
	hostname, _ := a.cfg.Host.Hostname()
	if hostname == "" {
		hostname = a.cfg.NodeName
	}
	addrs, err := a.cfg.Host.Addresses(a.cfg.NodeIPs, hostname)
	if err != nil {
		return obs, fmt.Errorf("node addresses: %w", err)
	}
	a.addresses.Store(&addrs)
	obs.Addresses = addrs
	obs.ExternalCloudProvider = a.cfg.ExternalCloudProvider
	if a.logs != nil {
		obs.DaemonPort = a.logs.Port()
	}
	obs.MemoryPressure, obs.DiskPressure, obs.PIDPressure = a.eviction.Pressure()
	if a.cfg.Volumes != nil {
		obs.VolumesInUse = a.cfg.Volumes.VolumesInUse()
	}
	if a.cfg.RuntimeHealth != nil {
		if err := a.cfg.RuntimeHealth(); err != nil {
			obs.NotReady = append(obs.NotReady, strings.ReplaceAll(err.Error(), "\n", "; "))
		}
	}
	if a.shutdown != nil {
		obs.NotReady = append(obs.NotReady, a.shutdown.NotReady()...)
	}
	return obs, nil
}

func (a *Agent) initialNode() *corev1.Node {
	obs, err := a.observe(context.Background())
	if err != nil {
		a.cfg.Logger.Warn("initial node status incomplete", "err", err)
	}
	hostname, _ := a.cfg.Host.Hostname()
	if hostname == "" {
		hostname = a.cfg.NodeName
	}
	status, _ := nodestatus.Compute(nil, obs, a.cfg.Clock.Now())
	return register.InitialNode(register.Spec{
		Name: a.cfg.NodeName, Hostname: hostname, OS: goruntime.GOOS, Arch: goruntime.GOARCH,
		Labels: a.cfg.Labels, Taints: a.cfg.Settings.RegisterWithTaints,
		Unschedulable: a.cfg.RegisterUnschedulable, ProviderID: a.cfg.Settings.ProviderID,
	}, status)
}

type nodeRecorder struct{ a *Agent }

func (r nodeRecorder) NodeEvent(eventType, reason, message string) {
	r.a.recorder.Event(r.a.cfg.API, r.a.cfg.NodeName, events.NodeRef(r.a.cfg.NodeName), eventType, reason, message)
}

type podRecorder struct{ a *Agent }

func (r podRecorder) PodEvent(p *corev1.Pod, eventType, reason, message string) {
	r.a.recorder.Event(r.a.cfg.API, r.a.cfg.NodeName, events.PodRef(p), eventType, reason, message)
}

// evictionPods gives the eviction manager the running pods with their
// usage and carries out its evictions through the pod manager.
type evictionPods struct{ a *Agent }

func (e evictionPods) Active() []eviction.Pod {
	running := e.a.manager.Running()
	var measure func(runtime.PodStatus) eviction.Usage
	if e.a.cfg.Usage != nil {
		measure = e.a.cfg.Usage.Snapshot()
	}
	out := make([]eviction.Pod, 0, len(running))
	for _, p := range running {
		ep := eviction.Pod{Pod: p}
		if rs, ok := e.a.cfg.Runtime.PodStatus(p.UID); ok && measure != nil {
			ep.Usage = measure(rs)
		}
		out = append(out, ep)
	}
	return out
}

func (e evictionPods) Evict(ctx context.Context, ev eviction.Eviction) error {
	ctx, cancel := context.WithTimeout(ctx, ev.GracePeriod+podCleanupTimeout)
	defer cancel()
	return e.a.manager.Evict(ctx, ev.Pod.UID, ev.GracePeriod, ev.Message)
}

// podCleanupTimeout bounds the wait for an evicted pod to be gone, past its
// grace period (the kubelet's 30 s).
const podCleanupTimeout = 30 * time.Second
