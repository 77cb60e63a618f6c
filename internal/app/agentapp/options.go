// Package agentapp is the `nodeplane agent` command: its flags and
// KubeletConfiguration file, their validation (each error names its flag or
// field), joining the cluster, and the wiring of the agent's parts.
package agentapp

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodeplane/nodeplane/internal/agent/config"
	"github.com/nodeplane/nodeplane/internal/agent/shutdown/logind"
	"github.com/nodeplane/nodeplane/internal/logging"
	"github.com/nodeplane/nodeplane/internal/nodelabels"
)

// Options are the raw flag values.
type Options struct {
	Server    string
	Token     string
	TokenFile string
	DataDir   string
	NodeName  string
	// HostnameOverride (--hostname-override) replaces the machine's
	// hostname; only used when the flag is set.
	HostnameOverride string
	// RegisterSchedulable false registers the Node cordoned (upstream's
	// deprecated --register-schedulable).
	RegisterSchedulable bool
	NodeLabels          map[string]string
	NodeIPs             []string
	ConfigFile          string
	// Address and Port of the log endpoint the API server calls.
	Address string
	Port    int
	// Flags that override KubeletConfiguration fields when set.
	RegisterNode       bool
	RegisterWithTaints []string
	// CloudProvider is --cloud-provider: "" or external.
	CloudProvider             string
	MaxPods                   int32
	NodeStatusUpdateFrequency time.Duration
	// EvictionMonitoringPeriod is how often the eviction manager observes
	// the node (nodeplane's own flag; the kubelet's period is a fixed 10 s).
	EvictionMonitoringPeriod time.Duration
	// Graceful node shutdown (override the KubeletConfiguration fields of
	// the same names; nodeplane's default when neither sets them is 30 s,
	// 10 s of it for critical pods).
	ShutdownGracePeriod              time.Duration
	ShutdownGracePeriodCriticalPods  time.Duration
	ShutdownGracePeriodByPodPriority []string
	// ShutdownOnSigterm makes SIGTERM mean "the node is going away" even
	// when the agent is not PID 1.
	ShutdownOnSigterm bool
	// ShutdownLogind is "auto" (follow logind's shutdowns when the system
	// bus and org.freedesktop.login1 answer at start) or "off".
	ShutdownLogind string
	// LogindBusAddress is the D-Bus to find logind on (empty: the system
	// bus, DBUS_SYSTEM_BUS_ADDRESS or its standard socket);
	// LogindConfigDir is where the InhibitDelayMaxSec override goes.
	LogindBusAddress string
	LogindConfigDir  string
	// SharedVolumeRoot is where the nodeplane.io/shared-dir driver keeps
	// its volumes (one directory per volumeHandle); every node that may
	// run their pods must reach the same tree (NFS in production).
	SharedVolumeRoot string

	Logging logging.Options
}

// --cloud-provider=external and the taint it registers the Node with
// (SPEC KUB-2).
const (
	CloudProviderExternal = "external"
	TaintUninitialized    = "node.cloudprovider.kubernetes.io/uninitialized"
)

// nodeplane's graceful shutdown defaults, used when neither the config
// file nor a flag sets any of the shutdown fields (upstream's are 0: off).
const (
	DefaultShutdownGracePeriod             = 30 * time.Second
	DefaultShutdownGracePeriodCriticalPods = 10 * time.Second
)

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{
		DataDir:                         "/var/lib/nodeplane/agent",
		Address:                         "0.0.0.0",
		Port:                            10250,
		RegisterNode:                    true,
		RegisterSchedulable:             true,
		MaxPods:                         110,
		NodeStatusUpdateFrequency:       10 * time.Second,
		EvictionMonitoringPeriod:        10 * time.Second,
		ShutdownGracePeriod:             DefaultShutdownGracePeriod,
		ShutdownGracePeriodCriticalPods: DefaultShutdownGracePeriodCriticalPods,
		ShutdownLogind:                  "auto",
		LogindConfigDir:                 logind.DefaultConfigDir,
		Logging:                         logging.Options{Level: "info", Format: "text"},
	}
}

// AddFlags registers the agent flags (kubelet names where one exists).
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Server, "server", o.Server, "URL of the nodeplane server, e.g. https://10.0.0.1:6443")
	fs.StringVar(&o.Token, "token", o.Token, "Join secret (the server's <data-dir>/node-token); prefer --token-file")
	fs.StringVar(&o.TokenFile, "token-file", o.TokenFile, "File holding the join secret")
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir, "Directory for the agent's identity (certificate, key, CA) and pod state and logs")
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "Node name (default: the host name, lower-cased); must be a DNS subdomain")
	fs.StringVar(&o.HostnameOverride, "hostname-override", o.HostnameOverride, "Use this hostname instead of the machine's (trimmed, lower-cased): the HostName address, the kubernetes.io/hostname label and, without --node-name, the node name")
	fs.BoolVar(&o.RegisterSchedulable, "register-schedulable", o.RegisterSchedulable, "Register the node as schedulable; false registers it cordoned (spec.unschedulable and the node.kubernetes.io/unschedulable taint), first creation only")
	fs.StringToStringVar(&o.NodeLabels, "node-labels", o.NodeLabels, "Labels to add when registering, key=value,...; keys under kubernetes.io or k8s.io must be ones a node may set")
	fs.StringSliceVar(&o.NodeIPs, "node-ip", o.NodeIPs, "IP address(es) of the node (one, or an IPv4,IPv6 pair); default: the address of the default-route interface")
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "KubeletConfiguration file (kubelet.config.k8s.io/v1beta1); flags override its fields")
	fs.StringVar(&o.Address, "address", o.Address, "Address the log endpoint (called by the API server for kubectl logs) listens on")
	fs.IntVar(&o.Port, "port", o.Port, "Port of the log endpoint; 0 picks a free one (published in the Node's status.daemonEndpoints)")
	fs.BoolVar(&o.RegisterNode, "register-node", o.RegisterNode, "Create the Node object; false waits for an admin-created Node of this name (overrides registerNode)")
	fs.StringSliceVar(&o.RegisterWithTaints, "register-with-taints", o.RegisterWithTaints, "Taints to register the node with, key[=value]:Effect,... — first creation only (overrides registerWithTaints)")
	fs.StringVar(&o.CloudProvider, "cloud-provider", o.CloudProvider, "external: the node is initialised by a cloud node controller (the server's --cloud-provider, or a cloud-controller-manager): it registers with the taint node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule and keeps the addresses the controller sets; empty: none")
	fs.Int32Var(&o.MaxPods, "max-pods", o.MaxPods, "Most pods this node runs (overrides maxPods)")
	fs.DurationVar(&o.NodeStatusUpdateFrequency, "node-status-update-frequency", o.NodeStatusUpdateFrequency, "How often node status is recomputed (overrides nodeStatusUpdateFrequency)")
	fs.DurationVar(&o.EvictionMonitoringPeriod, "eviction-monitoring-period", o.EvictionMonitoringPeriod, "How often the eviction manager compares memory, disk and PID use with the eviction thresholds (nodeplane's own; the kubelet's is 10s)")
	fs.DurationVar(&o.ShutdownGracePeriod, "shutdown-grace-period", o.ShutdownGracePeriod, "Total time a graceful node shutdown may take; 0 turns graceful shutdown off (overrides shutdownGracePeriod)")
	fs.DurationVar(&o.ShutdownGracePeriodCriticalPods, "shutdown-grace-period-critical-pods", o.ShutdownGracePeriodCriticalPods, "Part of --shutdown-grace-period kept for critical pods (priority >= 2000000000) (overrides shutdownGracePeriodCriticalPods)")
	fs.StringSliceVar(&o.ShutdownGracePeriodByPodPriority, "shutdown-grace-period-by-pod-priority", o.ShutdownGracePeriodByPodPriority, "Shutdown budget per pod priority, priority=seconds,... (overrides shutdownGracePeriodByPodPriority; excludes the two flags above)")
	fs.BoolVar(&o.ShutdownOnSigterm, "shutdown-on-sigterm", o.ShutdownOnSigterm, "Treat SIGTERM as the node going away (graceful node shutdown) rather than an agent restart; on by itself when the agent is PID 1 (a container's init)")
	fs.StringVar(&o.ShutdownLogind, "shutdown-logind", o.ShutdownLogind, "auto: when systemd-logind answers on the system bus at start, hold a delay inhibitor lock and shut the node down gracefully when logind announces the machine's shutdown; off: never")
	fs.StringVar(&o.LogindBusAddress, "logind-bus-address", o.LogindBusAddress, "D-Bus address to reach logind on (default: $DBUS_SYSTEM_BUS_ADDRESS, else the system bus socket)")
	fs.StringVar(&o.LogindConfigDir, "logind-config-dir", o.LogindConfigDir, "logind drop-in directory where the agent raises InhibitDelayMaxSec to its shutdown budget when it is shorter")
	fs.StringVar(&o.SharedVolumeRoot, "shared-volume-root", o.SharedVolumeRoot, "Directory holding the volumes of the nodeplane.io/shared-dir CSI driver, one per volumeHandle; shared by every node (e.g. an NFS mount); created if absent. Empty: such volumes cannot be used on this node")
	o.Logging.AddFlags(fs)
}

// ParsePriorityGracePeriods parses --shutdown-grace-period-by-pod-priority:
// priority=seconds entries, priorities distinct, seconds >= 0.
func ParsePriorityGracePeriods(values []string) ([]config.PriorityGracePeriod, error) {
	var out []config.PriorityGracePeriod
	seen := map[int32]bool{}
	for _, v := range values {
		ps, ss, ok := strings.Cut(strings.TrimSpace(v), "=")
		p, perr := strconv.ParseInt(ps, 10, 32)
		sec, serr := strconv.ParseInt(ss, 10, 64)
		if !ok || perr != nil || serr != nil {
			return nil, fmt.Errorf("--shutdown-grace-period-by-pod-priority %q: want priority=seconds", v)
		}
		if sec < 0 {
			return nil, fmt.Errorf("--shutdown-grace-period-by-pod-priority %q: seconds must not be negative", v)
		}
		if seen[int32(p)] {
			return nil, fmt.Errorf("--shutdown-grace-period-by-pod-priority %q: priority %d appears twice", v, p)
		}
		seen[int32(p)] = true
		out = append(out, config.PriorityGracePeriod{Priority: int32(p), GracePeriod: time.Duration(sec) * time.Second})
	}
	return out, nil
}

// Validate checks the flags that can be checked without the host and names
// the flag at fault.
func (o *Options) Validate() error {
	var errs []error
	if o.Server == "" {
		errs = append(errs, errors.New("--server is required (the nodeplane server's URL)"))
	} else if u, err := url.Parse(o.Server); err != nil || u.Scheme != "https" || u.Host == "" {
		errs = append(errs, fmt.Errorf("--server %q: want an https:// URL", o.Server))
	}
	if o.Token != "" && o.TokenFile != "" {
		errs = append(errs, errors.New("--token and --token-file are mutually exclusive"))
	}
	if strings.TrimSpace(o.DataDir) == "" {
		errs = append(errs, errors.New("--data-dir must not be empty"))
	}
	if o.Port < 0 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("--port %d: want 0-65535", o.Port))
	}
	if net.ParseIP(o.Address) == nil {
		errs = append(errs, fmt.Errorf("--address %q is not an IP address", o.Address))
	}
	if _, err := ParseNodeIPs(o.NodeIPs); err != nil {
		errs = append(errs, err)
	}
	if err := ValidateNodeLabels(o.NodeLabels); err != nil {
		errs = append(errs, err)
	}
	if _, err := ParseTaints(o.RegisterWithTaints); err != nil {
		errs = append(errs, fmt.Errorf("--register-with-taints: %w", err))
	}
	if o.CloudProvider != "" && o.CloudProvider != CloudProviderExternal {
		errs = append(errs, fmt.Errorf("--cloud-provider %q: want %q or empty (the agent has no in-tree cloud providers)", o.CloudProvider, CloudProviderExternal))
	}
	if o.MaxPods <= 0 {
		errs = append(errs, fmt.Errorf("--max-pods must be > 0, got %d", o.MaxPods))
	}
	if o.NodeStatusUpdateFrequency <= 0 {
		errs = append(errs, fmt.Errorf("--node-status-update-frequency must be > 0, got %v", o.NodeStatusUpdateFrequency))
	}
	if o.EvictionMonitoringPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--eviction-monitoring-period must be > 0, got %v", o.EvictionMonitoringPeriod))
	}
	if o.ShutdownGracePeriod < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-grace-period must not be negative, got %v", o.ShutdownGracePeriod))
	}
	if o.ShutdownGracePeriodCriticalPods < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-grace-period-critical-pods must not be negative, got %v", o.ShutdownGracePeriodCriticalPods))
	}
	if _, err := ParsePriorityGracePeriods(o.ShutdownGracePeriodByPodPriority); err != nil {
		errs = append(errs, err)
	}
	if o.ShutdownLogind != "auto" && o.ShutdownLogind != "off" {
		errs = append(errs, fmt.Errorf("--shutdown-logind %q: want auto or off", o.ShutdownLogind))
	}
	if strings.TrimSpace(o.LogindConfigDir) == "" {
		errs = append(errs, errors.New("--logind-config-dir must not be empty"))
	}
	if o.SharedVolumeRoot != "" && !filepath.IsAbs(o.SharedVolumeRoot) {
		errs = append(errs, fmt.Errorf("--shared-volume-root %q must be an absolute path", o.SharedVolumeRoot))
	}
	return errors.Join(errs...)
}

// ParseNodeIPs parses --node-ip: one address or a dual-stack pair.
func ParseNodeIPs(values []string) ([]net.IP, error) {
	var ips []net.IP
	for _, v := range values {
		ip := net.ParseIP(strings.TrimSpace(v))
		if ip == nil {
			return nil, fmt.Errorf("--node-ip %q is not an IP address", v)
		}
		ips = append(ips, ip)
	}
	switch {
	case len(ips) > 2:
		return nil, fmt.Errorf("--node-ip: at most two addresses (an IPv4,IPv6 pair), got %d", len(ips))
	case len(ips) == 2 && (ips[0].To4() == nil) == (ips[1].To4() == nil):
		return nil, fmt.Errorf("--node-ip: two addresses must be one IPv4 and one IPv6, got %s and %s", ips[0], ips[1])
	}
	return ips, nil
}

// ValidateNodeLabels checks --node-labels: valid keys and values, and no key
// a node may not set on itself (the kubelet refuses to start on those).
func ValidateNodeLabels(labels map[string]string) error {
	var errs []error
	keys := make([]string, 0, len(labels))
	for k, v := range labels {
		keys = append(keys, k)
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, fmt.Errorf("--node-labels: key %q: %s", k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, fmt.Errorf("--node-labels: value %q of %q: %s", v, k, msg))
		}
	}
	sort.Strings(keys)
	if bad := nodelabels.Forbidden(keys); len(bad) > 0 {
		errs = append(errs, fmt.Errorf("--node-labels: a node may not set these labels on itself: %s (keys under kubernetes.io or k8s.io must be well-known kubelet labels or under kubelet.kubernetes.io or node.kubernetes.io; node-restriction.kubernetes.io is reserved for admins)", strings.Join(bad, ", ")))
	}
	return errors.Join(errs...)
}

// ParseTaints parses key[=value]:Effect entries.
func ParseTaints(specs []string) ([]corev1.Taint, error) {
	var out []corev1.Taint
	seen := map[string]bool{}
	for _, s := range specs {
		kv, effect, ok := strings.Cut(s, ":")
		if !ok {
			return nil, fmt.Errorf("%q: want key[=value]:Effect", s)
		}
		key, value, _ := strings.Cut(kv, "=")
		for _, msg := range validation.IsQualifiedName(key) {
			return nil, fmt.Errorf("%q: key: %s", s, msg)
		}
		for _, msg := range validation.IsValidLabelValue(value) {
			return nil, fmt.Errorf("%q: value: %s", s, msg)
		}
		e := corev1.TaintEffect(effect)
		switch e {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return nil, fmt.Errorf("%q: effect must be NoSchedule, PreferNoSchedule or NoExecute", s)
		}
		if seen[key+":"+effect] {
			return nil, fmt.Errorf("%q: duplicate taint %s:%s", s, key, effect)
		}
		seen[key+":"+effect] = true
		out = append(out, corev1.Taint{Key: key, Value: value, Effect: e})
	}
	return out, nil
}
