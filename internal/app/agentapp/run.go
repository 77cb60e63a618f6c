package agentapp

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"

	"github.com/nodeplane/nodeplane/internal/agent"
	"github.com/nodeplane/nodeplane/internal/agent/config"
	"github.com/nodeplane/nodeplane/internal/agent/eviction"
	"github.com/nodeplane/nodeplane/internal/agent/host"
	"github.com/nodeplane/nodeplane/internal/agent/runtime"
	"github.com/nodeplane/nodeplane/internal/agent/runtime/process"
	"github.com/nodeplane/nodeplane/internal/agent/shutdown/logind"
	"github.com/nodeplane/nodeplane/internal/agent/volumes"
	"github.com/nodeplane/nodeplane/internal/join"
	"github.com/nodeplane/nodeplane/internal/logging"
	"github.com/nodeplane/nodeplane/internal/sdnotify"
	"github.com/nodeplane/nodeplane/internal/version"
)

// ShimCommandName is the hidden subcommand the process runtime re-executes
// this binary as, to supervise one container.
const ShimCommandName = "agent-shim"

// Config is what Run needs.
type Config struct {
	Options Options
	// Changed reports whether a flag was set on the command line (flags
	// override the config file only then).
	Changed func(flag string) bool
	Logger  *slog.Logger
	Clock   clock.WithTicker
	// CAPEM, when set, is a cluster CA the caller already trusts (nodeplane
	// up runs the server in-process); the join skips the cluster-info step.
	CAPEM []byte
	// Registered, when set, runs once the agent has registered its Node.
	Registered func(nodeName string)
}

// Command returns `nodeplane agent`.
func Command(stderr io.Writer) *cobra.Command {
	o := DefaultOptions()
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent: join the cluster, register this machine as a Node, heartbeat, run pods as processes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			logger, err := logging.New(stderr, o.Logging)
			if err != nil {
				return err
			}
			return Run(cmd.Context(), Config{Options: o, Changed: cmd.Flags().Changed, Logger: logger, Registered: func(node string) {
				// Under systemd (Type=notify) the unit is started once the
				// Node is registered; elsewhere this sends nothing.
				if sent, err := sdnotify.Notify(sdnotify.Ready); err != nil {
					logger.Warn("could not tell systemd the agent is ready", "err", err)
				} else if sent {
					logger.Info("told systemd the agent is ready (READY=1)", "node", node)
				}
			}})
		},
	}
	o.AddFlags(cmd.Flags())
	cmd.AddCommand(shutdownCommand(cmd.OutOrStdout()))
	return cmd
}

// Settings resolves the KubeletConfiguration file and the flags that
// override it.
func Settings(o Options, changed func(string) bool) (config.Settings, error) {
	s := config.Defaults()
	fileSetsShutdown := false
	if o.ConfigFile != "" {
		file, err := config.Load(o.ConfigFile)
		if err != nil {
			return s, fmt.Errorf("--config: %w", err)
		}
		if s, err = config.Resolve(file); err != nil {
			return s, fmt.Errorf("--config %s: %w", o.ConfigFile, err)
		}
		if fileSetsShutdown, err = setsShutdown(o.ConfigFile); err != nil {
			return s, fmt.Errorf("--config: %w", err)
		}
	}
	if changed == nil {
		changed = func(string) bool { return false }
	}
	if !fileSetsShutdown {
		// nodeplane turns graceful shutdown on by default (upstream: off).
		s.ShutdownGracePeriod = DefaultShutdownGracePeriod
		s.ShutdownGracePeriodCriticalPods = DefaultShutdownGracePeriodCriticalPods
	}
	pairFlags := changed("shutdown-grace-period") || changed("shutdown-grace-period-critical-pods")
	if changed("shutdown-grace-period-by-pod-priority") {
		table, err := ParsePriorityGracePeriods(o.ShutdownGracePeriodByPodPriority)
		if err != nil {
			return s, err
		}
		s.ShutdownGracePeriodByPodPriority = table
		if !pairFlags {
			s.ShutdownGracePeriod, s.ShutdownGracePeriodCriticalPods = 0, 0
		}
	} else if pairFlags {
		s.ShutdownGracePeriodByPodPriority = nil
	}
	if changed("shutdown-grace-period") {
		s.ShutdownGracePeriod = o.ShutdownGracePeriod
		if o.ShutdownGracePeriod == 0 && !changed("shutdown-grace-period-critical-pods") {
			s.ShutdownGracePeriodCriticalPods = 0 // --shutdown-grace-period=0 alone turns shutdown off
		}
	}
	if changed("shutdown-grace-period-critical-pods") {
		s.ShutdownGracePeriodCriticalPods = o.ShutdownGracePeriodCriticalPods
	}
	if changed("register-node") {
		s.RegisterNode = o.RegisterNode
	}
	if changed("register-with-taints") {
		taints, err := ParseTaints(o.RegisterWithTaints)
		if err != nil {
			return s, fmt.Errorf("--register-with-taints: %w", err)
		}
		s.RegisterWithTaints = taints
	}
	if o.CloudProvider == CloudProviderExternal && !slices.ContainsFunc(s.RegisterWithTaints, func(t corev1.Taint) bool { return t.Key == TaintUninitialized }) {
		s.RegisterWithTaints = append(s.RegisterWithTaints, corev1.Taint{Key: TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule})
	}
	if changed("max-pods") {
		s.MaxPods = o.MaxPods
	}
	if changed("node-status-update-frequency") {
		s.NodeStatusUpdateFrequency = o.NodeStatusUpdateFrequency
	}
	if changed("eviction-monitoring-period") {
		s.EvictionMonitoringPeriod = o.EvictionMonitoringPeriod
	}
	if err := s.Validate(); err != nil {
		return s, err
	}
	return s, nil
}

// setsShutdown reports whether the KubeletConfiguration file names any of
// the graceful shutdown fields (an explicit 0 there turns shutdown off,
// which the decoded value alone cannot tell from "unset").
func setsShutdown(path string) (bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return false, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(j, &fields); err != nil {
		return false, err
	}
	for _, f := range []string{"shutdownGracePeriod", "shutdownGracePeriodCriticalPods", "shutdownGracePeriodByPodPriority"} {
		if _, ok := fields[f]; ok {
			return true, nil
		}
	}
	return false, nil
}

// Run joins the cluster and runs the agent until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	o := cfg.Options
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	settings, err := Settings(o, cfg.Changed)
	if err != nil {
		return err
	}
	nodeIPs, err := ParseNodeIPs(o.NodeIPs)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return fmt.Errorf("--data-dir %s: %w", o.DataDir, err)
	}
	hcfg := host.Config{Root: "/", DataDir: o.DataDir}
	if cfg.Changed != nil && cfg.Changed("hostname-override") {
		hcfg.HostnameOverride = &o.HostnameOverride
	}
	h := host.New(hcfg)
	nodeName, err := h.NodeName(o.NodeName)
	if err != nil {
		return err
	}
	token := o.Token
	if o.TokenFile != "" {
		b, err := os.ReadFile(o.TokenFile)
		if err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
		if token == "" {
			return fmt.Errorf("--token-file %s is empty", o.TokenFile)
		}
	}
	log = log.With("node", nodeName)

	id, err := join.Ensure(ctx, join.ClientConfig{
		Server: o.Server, Token: token, CAPEM: cfg.CAPEM, DataDir: o.DataDir, NodeName: nodeName,
		Clock: cfg.Clock, Logger: log,
	})
	if err != nil {
		return err
	}
	if err := id.EnsureServing(ctx, servingHosts(h, nodeIPs, log)); err != nil {
		return err
	}
	go id.RunRenewal(ctx)
	rc := id.RESTConfig()
	rc.QPS, rc.Burst = 50, 100
	rc.UserAgent = "nodeplane-agent/" + version.Version
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	core, err := corev1client.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("api client: %w", err)
	}
	coord, err := coordinationv1client.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("api client: %w", err)
	}
	caPool := x509.NewCertPool()
	if !caPool.AppendCertsFromPEM(id.CAPEM()) {
		return errors.New("cluster CA does not parse")
	}

	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable for the runtime shim: %w", err)
	}
	nodeIP := ""
	if len(nodeIPs) > 0 {
		nodeIP = nodeIPs[0].String()
	}
	var ag *agent.Agent
	notify := func(uid types.UID) {
		if ag != nil {
			ag.Notify(uid)
		}
	}
	// The runtime starts before the agent exists (it adopts running pods);
	// until then containers learn no pod ranges.
	var agentRef atomic.Pointer[agent.Agent]
	podCIDRs := func() []string {
		if a := agentRef.Load(); a != nil {
			return a.PodCIDRs()
		}
		return nil
	}
	rt, err := process.New(process.Config{
		StateDir:    filepath.Join(o.DataDir, "runtime"),
		ShimCommand: []string{exe, ShimCommandName},
		NodeName:    nodeName,
		NodeIP:      nodeIP,
		PodCIDRs:    podCIDRs,
		Clock:       cfg.Clock,
		Logger:      log,
		Notify:      notify,
	})
	if err != nil {
		return err
	}
	// Containers keep running after the agent stops (their shims are
	// detached); the next agent adopts them.
	defer rt.Close()
	if o.SharedVolumeRoot != "" {
		if err := os.MkdirAll(o.SharedVolumeRoot, 0o755); err != nil {
			return fmt.Errorf("--shared-volume-root %s: %w", o.SharedVolumeRoot, err)
		}
	}
	api := agent.API{Core: core, Coordination: coord}
	vols, err := volumes.NewManager(volumes.Config{
		Layout: volumes.Layout{PodsDir: filepath.Join(o.DataDir, "volumes", "pods"), SharedRoot: o.SharedVolumeRoot},
		Client: api,
		Logger: log,
	})
	if err != nil {
		return err
	}
	ag, err = agent.New(agent.Config{
		NodeName:              nodeName,
		Settings:              settings,
		Labels:                o.NodeLabels,
		RegisterUnschedulable: !o.RegisterSchedulable,
		NodeIPs:               nodeIPs,
		ExternalCloudProvider: o.CloudProvider == CloudProviderExternal,
		Host:                  h,
		Runtime:               rt,
		API:                   api,
		Volumes:               vols,
		ClientCAs:             caPool,
		ServingCertificate:    id.ServingCertificate,
		Listen:                net.JoinHostPort(o.Address, strconv.Itoa(o.Port)),
		Clock:                 cfg.Clock,
		Logger:                log,
		OnRepeatedFailure: func() {
			// A half-dead connection must not carry the next heartbeat.
			if c, ok := rc.Transport.(interface{ CloseIdleConnections() }); ok {
				c.CloseIdleConnections()
			}
		},
		StateDir:      o.DataDir,
		Metrics:       prometheus.NewRegistry(), // the agent's own, served at /metrics on its HTTPS port
		RuntimeHealth: agent.RuntimeHealth(filepath.Join(o.DataDir, "runtime", "pods"), exe),
		Usage: &eviction.ProcUsage{Proc: "/proc", PodDirs: func(rs runtime.PodStatus) []string {
			// A pod's disk use: its logs (runtime state) and emptyDir volumes.
			return []string{
				filepath.Join(o.DataDir, "runtime", "pods", string(rs.UID)),
				filepath.Join(o.DataDir, "volumes", "pods", string(rs.UID), "volumes", "kubernetes.io~empty-dir"),
			}
		}},
		Registered: func(n *corev1.Node) {
			if cfg.Registered != nil {
				cfg.Registered(n.Name)
			}
		},
	})
	if err != nil {
		return err
	}
	agentRef.Store(ag)
	return runAgent(ctx, ag, o, log)
}

// runAgent runs the agent until ctx ends or a graceful node shutdown is
// done. The agent runs on a context of its own: when ctx ends because of
// SIGTERM and SIGTERM means the node is going away (sigtermIsNodeShutdown),
// the agent first shuts the node down gracefully — it needs the API for
// that — and only then stops (its lease is not renewed after).
func runAgent(ctx context.Context, ag *agent.Agent, o Options, log *slog.Logger) error {
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	onSigterm := sigtermIsNodeShutdown(o) && ag.ShutdownEnabled()
	if onSigterm {
		log.Info("SIGTERM will shut this node down gracefully", "pid1", os.Getpid() == 1, "shutdownOnSigterm", o.ShutdownOnSigterm)
	}
	go func() {
		select {
		case <-runCtx.Done():
			return
		case <-ctx.Done():
		}
		if onSigterm && isSIGTERM(ctx) {
			log.Info("SIGTERM: the node is going away, shutting down gracefully")
			if err := ag.Shutdown(runCtx); err != nil {
				log.Warn("graceful node shutdown", "err", err)
			}
		}
		stop()
	}()
	if w := logindWatcher(ctx, ag, o, log); w != nil {
		go w.Run(runCtx)
	}
	go func() {
		err := serveControl(runCtx, SocketPath(o.DataDir), ag, stop, log)
		if err != nil {
			log.Warn("control socket not served: `nodeplane agent shutdown` cannot reach this agent", "err", err)
		}
	}()
	return ag.Run(runCtx)
}

// logindWatcher returns the logind trigger when it is to be used: graceful
// shutdown on, --shutdown-logind=auto, and logind answering on the bus now
// (checked once, at start; the watcher then reconnects by itself). After a
// logind-driven shutdown the agent keeps running (the inhibitor lock is
// released and the OS stops it), so a cancellation can bring the node back.
func logindWatcher(ctx context.Context, ag *agent.Agent, o Options, log *slog.Logger) *logind.Watcher {
	if !ag.ShutdownEnabled() || o.ShutdownLogind == "off" {
		return nil
	}
	if err := logind.Available(ctx, o.LogindBusAddress, 2*time.Second); err != nil {
		log.Info("logind not reachable: graceful node shutdown follows SIGTERM (when PID 1 or --shutdown-on-sigterm) and `nodeplane agent shutdown`", "reason", err)
		return nil
	}
	w, err := logind.New(logind.Config{
		Address: o.LogindBusAddress, ConfigDir: o.LogindConfigDir, Delay: ag.ShutdownBudget(),
		Shutdowner: ag, Logger: log.With("trigger", "logind"),
	})
	if err != nil {
		log.Warn("logind trigger not started", "err", err)
		return nil
	}
	log.Info("graceful node shutdown follows systemd-logind", "budget", ag.ShutdownBudget())
	return w
}

// servingHosts are the SANs the agent asks for in its serving certificate:
// the addresses it reports in its Node's status (InternalIPs, hostname).
// The server decides which it signs; the API server does not need any of
// them, as it checks the node's identity in the certificate.
func servingHosts(h *host.Host, nodeIPs []net.IP, log *slog.Logger) []string {
	hostname, _ := h.Hostname()
	addrs, err := h.Addresses(nodeIPs, hostname)
	if err != nil {
		log.Warn("node addresses for the serving certificate", "err", err)
	}
	var hosts []string
	for _, a := range addrs {
		hosts = append(hosts, a.Address)
	}
	return hosts
}
