// Package serverapp is the `nodeplane server` command: its flags, their
// validation into a Config, and the wiring of storage, certificates, the API
// handler and the HTTPS listener.
package serverapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodeplane/nodeplane/internal/apiserver/authz"
	"github.com/nodeplane/nodeplane/internal/apiserver/scraper"
	"github.com/nodeplane/nodeplane/internal/controller/manager"
	"github.com/nodeplane/nodeplane/internal/controller/nodeipam"
	"github.com/nodeplane/nodeplane/internal/logging"
	"github.com/nodeplane/nodeplane/internal/procs"
	"github.com/nodeplane/nodeplane/internal/sdnotify"
)

// Options are the raw flag values.
type Options struct {
	DataDir   string
	Listen    string
	TLSSANs   []string
	TokenFile string
	// AuthorizationModes is --authorization-mode (Node,RBAC).
	AuthorizationModes []string
	EtcdServer         []string
	EtcdCA             string
	EtcdCert           string
	EtcdKey            string
	// EtcdOverrides route resources to other etcd clusters:
	// "group/resource#url;url" (kube-apiserver's --etcd-servers-overrides).
	EtcdOverrides []string
	// DurableLeases stores leases in the main (fsynced) etcd member.
	DurableLeases bool

	DefaultNotReadyTolerationSeconds    int64
	DefaultUnreachableTolerationSeconds int64

	CompactionInterval time.Duration
	ShutdownTimeout    time.Duration
	ShutdownDelay      time.Duration
	BookmarkInterval   time.Duration
	EventTTL           time.Duration
	// MetricResolution is how often the agents are asked for resource
	// usage (metrics.k8s.io, kubectl top), as metrics-server's flag.
	MetricResolution time.Duration
	// MetricScrapesPerSecond bounds how many agents are scraped per second
	// (each scrape is a TLS handshake); 0 means no bound.
	MetricScrapesPerSecond float64

	MaxRequestsInflight         int
	MaxMutatingRequestsInflight int
	// HTTP2Server chooses what serves HTTP/2: "nodeplane" (internal/h2server)
	// or "go" (net/http's own).
	HTTP2Server string
	// HTTP2MaxStreamsPerConnection is the SETTINGS_MAX_CONCURRENT_STREAMS
	// the server announces: the requests one HTTP/2 connection may have
	// running at once (kube-apiserver's flag).
	HTTP2MaxStreamsPerConnection int
	// ElasticProcs sizes GOMAXPROCS to the load (internal/procs) unless
	// GOMAXPROCS is set in the environment.
	ElasticProcs bool
	// RequestTimeout bounds a request that is not long-running, reading
	// its body included (--request-timeout).
	RequestTimeout time.Duration
	// MinRequestTimeout: a watch without timeoutSeconds ends after a random
	// time in [MinRequestTimeout, 2·MinRequestTimeout) seconds.
	MinRequestTimeout int
	Logging           logging.Options

	Controllers Controllers
}

// Controllers are the kube-controller-manager flags of the built-in
// controllers (upstream names and defaults).
type Controllers struct {
	// Enabled is --controllers: *, name, -name.
	Enabled     []string
	LeaderElect bool
	// LeaseDuration, RenewDeadline and RetryPeriod of the leader election.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	NodeMonitorPeriod         time.Duration
	NodeMonitorGracePeriod    time.Duration
	NodeStartupGracePeriod    time.Duration
	NodeEvictionRate          float64
	SecondaryNodeEvictionRate float64
	UnhealthyZoneThreshold    float64
	LargeClusterSizeThreshold int
	TerminatedPodGCThreshold  int
	// PodGCPeriod (nodeplane-only) is how often pod GC runs a pass
	// (upstream: fixed gcCheckPeriod of 20s); shortened in tests.
	PodGCPeriod time.Duration

	// PVClaimBinderSyncPeriod is --pvclaimbinder-sync-period.
	PVClaimBinderSyncPeriod time.Duration
	// DisableAttachDetachReconcileSync, AttachDetachReconcileSyncPeriod and
	// DisableForceDetachOnTimeout are the attach/detach controller's flags.
	DisableAttachDetachReconcileSync bool
	AttachDetachReconcileSyncPeriod  time.Duration
	DisableForceDetachOnTimeout      bool
	// MaxWaitForUnmount (nodeplane-only) shortens upstream's fixed 6 min
	// maxWaitForUnmountDuration, for tests.
	MaxWaitForUnmount time.Duration
	// SharedVolumeRoot (nodeplane-only): where the server reaches the
	// nodeplane.io/shared-dir volumes, if it does.
	SharedVolumeRoot string

	// Cloud: --cloud-provider and the cloud controllers' flags.
	Cloud Cloud
	// IPAM are the node IPAM controller's flags (--allocate-node-cidrs,
	// --cluster-cidr, ...).
	IPAM nodeipam.Options
}

// DefaultControllers are the upstream defaults.
func DefaultControllers() Controllers {
	return Controllers{
		Enabled: []string{"*"}, LeaderElect: true,
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		NodeMonitorPeriod: 5 * time.Second, NodeMonitorGracePeriod: 50 * time.Second, NodeStartupGracePeriod: 60 * time.Second,
		NodeEvictionRate: 0.1, SecondaryNodeEvictionRate: 0.01, UnhealthyZoneThreshold: 0.55, LargeClusterSizeThreshold: 50,
		TerminatedPodGCThreshold: 12500, PodGCPeriod: 20 * time.Second,
		PVClaimBinderSyncPeriod: 15 * time.Second, AttachDetachReconcileSyncPeriod: time.Minute, MaxWaitForUnmount: 6 * time.Minute,
		Cloud: DefaultCloud(),
		IPAM:  nodeipam.DefaultOptions(),
	}
}

// AddFlags registers the controller flags.
func (c *Controllers) AddFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&c.Enabled, "controllers", c.Enabled, "Controllers to run: * for all, name to enable one, -name to disable one (e.g. *,-taint-eviction-controller); names: "+strings.Join(manager.Known, ", "))
	fs.BoolVar(&c.LeaderElect, "leader-elect", c.LeaderElect, "Elect one leader among servers (Lease kube-system/kube-controller-manager) to run the controllers")
	fs.DurationVar(&c.LeaseDuration, "leader-elect-lease-duration", c.LeaseDuration, "How long a non-leader waits after the last renewal before taking over")
	fs.DurationVar(&c.RenewDeadline, "leader-elect-renew-deadline", c.RenewDeadline, "How long the leader retries renewing before giving up leadership")
	fs.DurationVar(&c.RetryPeriod, "leader-elect-retry-period", c.RetryPeriod, "Wait between leader election attempts")
	fs.DurationVar(&c.NodeMonitorPeriod, "node-monitor-period", c.NodeMonitorPeriod, "How often the node lifecycle controller checks node health")
	fs.DurationVar(&c.NodeMonitorGracePeriod, "node-monitor-grace-period", c.NodeMonitorGracePeriod, "How long a node may go without a heartbeat before it is marked Unknown; must exceed the agents' lease renew interval")
	fs.DurationVar(&c.NodeStartupGracePeriod, "node-startup-grace-period", c.NodeStartupGracePeriod, "Grace period for a node that never posted Ready")
	fs.Float64Var(&c.NodeEvictionRate, "node-eviction-rate", c.NodeEvictionRate, "Nodes per second that get NoExecute taints in a healthy zone")
	fs.Float64Var(&c.SecondaryNodeEvictionRate, "secondary-node-eviction-rate", c.SecondaryNodeEvictionRate, "Nodes per second that get NoExecute taints in a partially disrupted large zone")
	fs.Float64Var(&c.UnhealthyZoneThreshold, "unhealthy-zone-threshold", c.UnhealthyZoneThreshold, "Fraction of not-Ready nodes (at least 3) that makes a zone partially disrupted")
	fs.IntVar(&c.LargeClusterSizeThreshold, "large-cluster-size-threshold", c.LargeClusterSizeThreshold, "Zones with more nodes than this are large (secondary rate in partial disruption; small ones stop)")
	fs.IntVar(&c.TerminatedPodGCThreshold, "terminated-pod-gc-threshold", c.TerminatedPodGCThreshold, "Terminated pods kept before the oldest are deleted; 0 disables")
	fs.DurationVar(&c.PodGCPeriod, "pod-gc-period", c.PodGCPeriod, "nodeplane-only, for tests: how often pod GC runs a pass (upstream: fixed at 20s)")
	fs.DurationVar(&c.PVClaimBinderSyncPeriod, "pvclaimbinder-sync-period", c.PVClaimBinderSyncPeriod, "How often the persistent volume controller syncs every claim and volume again")
	fs.BoolVar(&c.DisableAttachDetachReconcileSync, "disable-attach-detach-reconcile-sync", c.DisableAttachDetachReconcileSync, "Accepted for compatibility: the attach/detach controller reads its actual state from the VolumeAttachments, so there is nothing to resync")
	fs.DurationVar(&c.AttachDetachReconcileSyncPeriod, "attach-detach-reconcile-sync-period", c.AttachDetachReconcileSyncPeriod, "Accepted for compatibility (must be >= 1s): see --disable-attach-detach-reconcile-sync")
	fs.BoolVar(&c.DisableForceDetachOnTimeout, "disable-force-detach-on-timeout", c.DisableForceDetachOnTimeout, "Never force-detach a volume still mounted on an unhealthy node when the unmount wait runs out; such volumes are then detached only through the node.kubernetes.io/out-of-service taint")
	fs.DurationVar(&c.MaxWaitForUnmount, "max-wait-for-unmount-duration", c.MaxWaitForUnmount, "nodeplane-only, for tests: how long the attach/detach controller waits for an unhealthy node to unmount a volume before force-detaching it (upstream: fixed at 6m)")
	c.addIPAMFlags(fs)
	fs.StringVar(&c.SharedVolumeRoot, "shared-volume-root", c.SharedVolumeRoot, "nodeplane-only: where this server reaches the nodeplane.io/shared-dir volume root; when set, provisioning creates each volume's directory and deleting a provisioned volume removes it (empty: agents create directories on first mount and deleted volumes' data stays)")
	c.Cloud.AddFlags(fs)
}

// addIPAMFlags registers the node IPAM controller's flags.
func (c *Controllers) addIPAMFlags(fs *pflag.FlagSet) {
	o := &c.IPAM
	fs.BoolVar(&o.AllocateNodeCIDRs, "allocate-node-cidrs", o.AllocateNodeCIDRs, "Should CIDRs for Pods be allocated and set on the cloud provider. (node-ipam-controller: give each Node spec.podCIDRs from --cluster-cidr)")
	fs.StringVar(&o.CIDRAllocatorType, "cidr-allocator-type", o.CIDRAllocatorType, "Type of CIDR allocator to use (nodeplane implements RangeAllocator)")
	fs.StringVar(&o.ClusterCIDR, "cluster-cidr", o.ClusterCIDR, "CIDR Range for Pods in cluster. Requires --allocate-node-cidrs to be true; one range, or an IPv4,IPv6 pair for dual stack")
	fs.StringVar(&o.ServiceClusterIPRange, "service-cluster-ip-range", o.ServiceClusterIPRange, "CIDR Range for Services in cluster (at most an IPv4,IPv6 pair); the node IPAM controller never gives these addresses to nodes. Requires --allocate-node-cidrs to be true")
	fs.IntVar(&o.NodeCIDRMaskSize, "node-cidr-mask-size", o.NodeCIDRMaskSize, "Mask size for node cidr in cluster. Default is 24 for IPv4 and 64 for IPv6.")
	fs.IntVar(&o.NodeCIDRMaskSizeIPv4, "node-cidr-mask-size-ipv4", o.NodeCIDRMaskSizeIPv4, "Mask size for IPv4 node cidr in dual-stack cluster. Default is 24.")
	fs.IntVar(&o.NodeCIDRMaskSizeIPv6, "node-cidr-mask-size-ipv6", o.NodeCIDRMaskSizeIPv6, "Mask size for IPv6 node cidr in dual-stack cluster. Default is 64.")
}

// ipamEnabled: the node IPAM controller runs only with
// --allocate-node-cidrs and when --controllers selects it (SPEC IPAM-1).
func (c *Controllers) ipamEnabled(sel manager.Selection) bool {
	return c.IPAM.AllocateNodeCIDRs && sel.Enabled(nodeipam.ControllerName)
}

// Validate names the flag at fault.
func (c *Controllers) Validate() []error {
	var errs []error
	sel, err := manager.ParseSelection(c.Enabled)
	if err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.IPAM.Validate()...)
	if err == nil && c.ipamEnabled(sel) {
		if _, perr := c.IPAM.Parse(); perr != nil && len(c.IPAM.Validate()) == 0 {
			errs = append(errs, perr)
		}
	}
	if c.LeaderElect && (c.LeaseDuration <= c.RenewDeadline || c.RenewDeadline <= c.RetryPeriod || c.RetryPeriod <= 0) {
		errs = append(errs, fmt.Errorf("--leader-elect-lease-duration (%v) must exceed --leader-elect-renew-deadline (%v), which must exceed --leader-elect-retry-period (%v) > 0", c.LeaseDuration, c.RenewDeadline, c.RetryPeriod))
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--node-monitor-period", c.NodeMonitorPeriod}, {"--node-monitor-grace-period", c.NodeMonitorGracePeriod}, {"--node-startup-grace-period", c.NodeStartupGracePeriod}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be > 0, got %v", d.flag, d.v))
		}
	}
	if c.NodeEvictionRate < 0 || c.SecondaryNodeEvictionRate < 0 {
		errs = append(errs, fmt.Errorf("--node-eviction-rate and --secondary-node-eviction-rate must be >= 0, got %v and %v", c.NodeEvictionRate, c.SecondaryNodeEvictionRate))
	}
	if c.UnhealthyZoneThreshold <= 0 || c.UnhealthyZoneThreshold > 1 {
		errs = append(errs, fmt.Errorf("--unhealthy-zone-threshold must be in (0, 1], got %v", c.UnhealthyZoneThreshold))
	}
	if c.PVClaimBinderSyncPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--pvclaimbinder-sync-period must be > 0, got %v", c.PVClaimBinderSyncPeriod))
	}
	if c.AttachDetachReconcileSyncPeriod < time.Second {
		errs = append(errs, fmt.Errorf("--attach-detach-reconcile-sync-period must be >= 1s, got %v", c.AttachDetachReconcileSyncPeriod))
	}
	if c.PodGCPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--pod-gc-period must be > 0, got %v", c.PodGCPeriod))
	}
	if c.MaxWaitForUnmount <= 0 {
		errs = append(errs, fmt.Errorf("--max-wait-for-unmount-duration must be > 0, got %v", c.MaxWaitForUnmount))
	}
	errs = append(errs, c.Cloud.Validate()...)
	if c.LargeClusterSizeThreshold < 0 || c.TerminatedPodGCThreshold < 0 {
		errs = append(errs, fmt.Errorf("--large-cluster-size-threshold and --terminated-pod-gc-threshold must be >= 0, got %d and %d", c.LargeClusterSizeThreshold, c.TerminatedPodGCThreshold))
	}
	return errs
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{
		DataDir:                             "/var/lib/nodeplane/server",
		Listen:                              "0.0.0.0:6443",
		AuthorizationModes:                  authz.DefaultModes,
		DefaultNotReadyTolerationSeconds:    300,
		DefaultUnreachableTolerationSeconds: 300,
		CompactionInterval:                  5 * time.Minute,
		ShutdownTimeout:                     30 * time.Second,
		BookmarkInterval:                    time.Minute,
		EventTTL:                            time.Hour,
		MetricResolution:                    15 * time.Second,
		MetricScrapesPerSecond:              scraper.DefaultRate,
		MaxRequestsInflight:                 400,
		MaxMutatingRequestsInflight:         200,
		HTTP2Server:                         HTTP2Nodeplane,
		HTTP2MaxStreamsPerConnection:        DefaultHTTP2MaxStreams,
		ElasticProcs:                        true,
		RequestTimeout:                      time.Minute,
		MinRequestTimeout:                   1800,
		Logging:                             logging.Options{Level: "info", Format: "text"},
		Controllers:                         DefaultControllers(),
	}
}

// AddFlags registers the server flags (upstream names where one exists).
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir, "Directory for the embedded etcd data, the cluster CA and keys, admin.kubeconfig and node-token")
	fs.StringVar(&o.Listen, "listen", o.Listen, "HTTPS listen address HOST:PORT; port 0 picks a free port (admin.kubeconfig records the real one)")
	fs.StringSliceVar(&o.TLSSANs, "tls-san", o.TLSSANs, "Extra DNS names or IP addresses for the serving certificate (repeatable, comma-separated)")
	fs.StringSliceVar(&o.AuthorizationModes, "authorization-mode", o.AuthorizationModes, "Ordered list of authorizers after the fixed rules (administrators, the server's controllers): Node (node identities), RBAC (everyone else)")
	fs.StringVar(&o.TokenFile, "token-auth-file", o.TokenFile, "CSV file of bearer tokens: token,user,uid,\"group1,group2\"")
	fs.StringSliceVar(&o.EtcdServer, "etcd-servers", o.EtcdServer, "External etcd client URLs (comma-separated); empty runs one embedded etcd member under --data-dir")
	fs.StringSliceVar(&o.EtcdOverrides, "etcd-servers-overrides", o.EtcdOverrides, "Per-resource etcd servers, group/resource#servers, servers separated by ';' (e.g. coordination.k8s.io/leases#https://10.0.0.9:2379); same TLS files as --etcd-servers")
	fs.BoolVar(&o.DurableLeases, "durable-leases", o.DurableLeases, "With the embedded etcd, keep leases in the main member with fsync on every write; by default leases (soft state: heartbeats, leader election) live in memory, snapshotted to the data dir every minute and at shutdown (a crash may lose the renewals since the last snapshot; resourceVersions are never reused)")
	fs.StringVar(&o.EtcdCA, "etcd-cafile", o.EtcdCA, "CA bundle to verify the external etcd servers")
	fs.StringVar(&o.EtcdCert, "etcd-certfile", o.EtcdCert, "Client certificate for the external etcd servers")
	fs.StringVar(&o.EtcdKey, "etcd-keyfile", o.EtcdKey, "Client key for the external etcd servers")
	fs.Int64Var(&o.DefaultNotReadyTolerationSeconds, "default-not-ready-toleration-seconds", o.DefaultNotReadyTolerationSeconds, "tolerationSeconds of the not-ready:NoExecute toleration added to every pod that has none")
	fs.Int64Var(&o.DefaultUnreachableTolerationSeconds, "default-unreachable-toleration-seconds", o.DefaultUnreachableTolerationSeconds, "tolerationSeconds of the unreachable:NoExecute toleration added to every pod that has none")
	fs.DurationVar(&o.CompactionInterval, "etcd-compaction-interval", o.CompactionInterval, "How often storage history older than one interval is compacted; 0 disables compaction")
	fs.IntVar(&o.MaxRequestsInflight, "max-requests-inflight", o.MaxRequestsInflight, "Summed with --max-mutating-requests-inflight into the seats (requests served at once; watches and pod logs not counted) shared between priority levels: system controllers 20%, node heartbeats 20%, other node requests 20%, system:masters 30%, everyone else 10%; the controllers' leader election is never limited. Past a level's seats, or past one identity's share of them (a node: 5% of the heartbeat seats, 10% of the other node seats; other users: 25%), requests get 429 with Retry-After (the server's own controllers first wait up to 15s in a queue of 4x their seats); both 0 means no limit")
	fs.IntVar(&o.MaxMutatingRequestsInflight, "max-mutating-requests-inflight", o.MaxMutatingRequestsInflight, "Added to --max-requests-inflight: together they are the server's total seats, split between priority levels (see --max-requests-inflight)")
	fs.StringVar(&o.HTTP2Server, "http2-server", o.HTTP2Server, "What serves HTTP/2 connections: \"nodeplane\" (one goroutine per connection, a response in one write; docs/performance.md) or \"go\" (Go's net/http HTTP/2 server). HTTP/1.1 is served by net/http either way")
	fs.IntVar(&o.HTTP2MaxStreamsPerConnection, "http2-max-streams-per-connection", o.HTTP2MaxStreamsPerConnection, "Requests one HTTP/2 connection may have running at once (SETTINGS_MAX_CONCURRENT_STREAMS; a stream the client reset counts until its handler returns). A client that reaches it opens another connection, so a slow server would invite more connections and TLS handshakes: keep it above the requests a client has waiting")
	fs.BoolVar(&o.ElasticProcs, "elastic-procs", o.ElasticProcs, "Size the Go scheduler's processors (GOMAXPROCS) to the load, between one and the CPUs (or the container's CPU limit): they double when the server keeps 75% of them busy over 0.4 s (all of them over 0.2 s), and one goes after 2 s in which one fewer would have been less than 60% busy. A processor the server has but does not need costs CPU on every request (a quarter more per lease renewal at 2,500/s on two CPUs, docs/performance.md). false, or GOMAXPROCS set in the environment, keeps Go's fixed choice")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", o.RequestTimeout, "Longest time a request may take, reading its body included, before it is answered 504 Timeout; watches and pod logs are exempt (see --min-request-timeout)")
	fs.IntVar(&o.MinRequestTimeout, "min-request-timeout", o.MinRequestTimeout, "A watch without timeoutSeconds is ended (the client resumes it) after a random time between this many seconds and twice that")
	fs.DurationVar(&o.EventTTL, "event-ttl", o.EventTTL, "Events are removed this long after their last update; 0 keeps them")
	fs.DurationVar(&o.MetricResolution, "metric-resolution", o.MetricResolution, "The resolution at which the agents are scraped for resource usage (metrics.k8s.io, kubectl top); CPU is the rate between two scrapes")
	fs.Float64Var(&o.MetricScrapesPerSecond, "metric-scrapes-per-second", o.MetricScrapesPerSecond, "Agents scraped per second at most for resource usage: each scrape is a new TLS connection (about 0.5 ms of CPU), so in a fleet larger than this × --metric-resolution a pass takes longer than the resolution instead of more CPU (200/s at 15 s: 3,000 nodes); 0 means no bound")
	fs.DurationVar(&o.BookmarkInterval, "watch-bookmark-interval", o.BookmarkInterval, "How often a watch that allows bookmarks receives one")
	fs.DurationVar(&o.ShutdownDelay, "shutdown-delay-duration", o.ShutdownDelay, "On SIGTERM, keep serving this long with /readyz failing so load balancers stop sending requests before the listener closes")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "How long a stop waits for in-flight requests to finish")
	o.Logging.AddFlags(fs)
	o.Controllers.AddFlags(fs)
}

// Validate checks the flags and names the flag at fault.
func (o *Options) Validate() error {
	var errs []error
	if strings.TrimSpace(o.DataDir) == "" {
		errs = append(errs, errors.New("--data-dir must not be empty"))
	}
	if _, port, err := net.SplitHostPort(o.Listen); err != nil {
		errs = append(errs, fmt.Errorf("--listen %q: want HOST:PORT: %v", o.Listen, err))
	} else if _, err := net.LookupPort("tcp", port); err != nil {
		errs = append(errs, fmt.Errorf("--listen %q: bad port: %v", o.Listen, err))
	}
	if err := authz.ValidateModes(o.AuthorizationModes); err != nil {
		errs = append(errs, fmt.Errorf("--authorization-mode: %w", err))
	}
	if o.DefaultNotReadyTolerationSeconds < 0 {
		errs = append(errs, fmt.Errorf("--default-not-ready-toleration-seconds must be >= 0, got %d", o.DefaultNotReadyTolerationSeconds))
	}
	if o.DefaultUnreachableTolerationSeconds < 0 {
		errs = append(errs, fmt.Errorf("--default-unreachable-toleration-seconds must be >= 0, got %d", o.DefaultUnreachableTolerationSeconds))
	}
	if o.ShutdownDelay < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-delay-duration must be >= 0, got %v", o.ShutdownDelay))
	}
	if o.MaxRequestsInflight < 0 || o.MaxMutatingRequestsInflight < 0 {
		errs = append(errs, fmt.Errorf("--max-requests-inflight and --max-mutating-requests-inflight must be >= 0, got %d and %d", o.MaxRequestsInflight, o.MaxMutatingRequestsInflight))
	}
	if o.HTTP2Server != HTTP2Nodeplane && o.HTTP2Server != HTTP2Go {
		errs = append(errs, fmt.Errorf("--http2-server must be %q or %q, got %q", HTTP2Nodeplane, HTTP2Go, o.HTTP2Server))
	}
	if o.HTTP2MaxStreamsPerConnection < 1 || o.HTTP2MaxStreamsPerConnection > maxHTTP2MaxStreams {
		errs = append(errs, fmt.Errorf("--http2-max-streams-per-connection must be between 1 and %d, got %d", maxHTTP2MaxStreams, o.HTTP2MaxStreamsPerConnection))
	}
	if o.RequestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--request-timeout must be > 0, got %v", o.RequestTimeout))
	}
	if o.MinRequestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--min-request-timeout must be > 0, got %d", o.MinRequestTimeout))
	}
	if v := o.MetricScrapesPerSecond; !(v >= 0) || math.IsInf(v, 1) {
		errs = append(errs, fmt.Errorf("--metric-scrapes-per-second must be a finite number >= 0, got %v", v))
	}
	if o.MetricResolution < time.Second {
		errs = append(errs, fmt.Errorf("--metric-resolution must be at least 1s, got %v", o.MetricResolution))
	}
	if o.EventTTL < 0 || (o.EventTTL > 0 && o.EventTTL < time.Second) {
		errs = append(errs, fmt.Errorf("--event-ttl must be 0 or at least 1s, got %v", o.EventTTL))
	}
	if o.BookmarkInterval <= 0 {
		errs = append(errs, fmt.Errorf("--watch-bookmark-interval must be > 0, got %v", o.BookmarkInterval))
	}
	if o.CompactionInterval < 0 {
		errs = append(errs, fmt.Errorf("--etcd-compaction-interval must be >= 0, got %v", o.CompactionInterval))
	}
	if len(o.EtcdServer) == 0 && (o.EtcdCA != "" || o.EtcdCert != "" || o.EtcdKey != "") {
		errs = append(errs, errors.New("--etcd-cafile/--etcd-certfile/--etcd-keyfile need --etcd-servers"))
	}
	if (o.EtcdCert == "") != (o.EtcdKey == "") {
		errs = append(errs, errors.New("--etcd-certfile and --etcd-keyfile must be given together"))
	}
	for _, f := range []struct{ flag, path string }{{"--etcd-cafile", o.EtcdCA}, {"--etcd-certfile", o.EtcdCert}, {"--etcd-keyfile", o.EtcdKey}, {"--token-auth-file", o.TokenFile}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.flag, err))
		}
	}
	for _, ov := range o.EtcdOverrides {
		if _, _, err := parseOverride(ov); err != nil {
			errs = append(errs, fmt.Errorf("--etcd-servers-overrides: %w", err))
		}
	}
	if len(o.EtcdOverrides) > 0 && len(o.EtcdServer) == 0 {
		errs = append(errs, errors.New("--etcd-servers-overrides needs --etcd-servers"))
	}
	for _, u := range o.EtcdServer {
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			errs = append(errs, fmt.Errorf("--etcd-servers: %q is not an http:// or https:// URL", u))
		}
	}
	errs = append(errs, o.Controllers.Validate()...)
	return errors.Join(errs...)
}

// Command returns `nodeplane server`.
func Command(stderr io.Writer) *cobra.Command {
	o := DefaultOptions()
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the nodeplane API server (Kubernetes API over etcd, HTTPS)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			logger, err := logging.New(stderr, o.Logging)
			if err != nil {
				return err
			}
			ctx, stopSizing := SizeProcs(cmd.Context(), o, logger)
			defer stopSizing()
			return Run(ctx, Config{Options: o, Logger: logger, Ready: func(url string) {
				// Under systemd (Type=notify) the unit is started once
				// /readyz answers ok; elsewhere this sends nothing.
				if sent, err := sdnotify.Notify(sdnotify.Ready); err != nil {
					logger.Warn("could not tell systemd the server is ready", "err", err)
				} else if sent {
					logger.Info("told systemd the server is ready (READY=1)", "url", url)
				}
			}})
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// parseOverride parses one --etcd-servers-overrides entry.
func parseOverride(s string) (schema.GroupResource, []string, error) {
	gr, servers, ok := strings.Cut(s, "#")
	if !ok || gr == "" || servers == "" {
		return schema.GroupResource{}, nil, fmt.Errorf("%q: want group/resource#server;server", s)
	}
	group, resource, ok := strings.Cut(gr, "/")
	if !ok || resource == "" {
		return schema.GroupResource{}, nil, fmt.Errorf("%q: want group/resource (empty group for core, e.g. /events)", gr)
	}
	urls := strings.Split(servers, ";")
	for _, u := range urls {
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return schema.GroupResource{}, nil, fmt.Errorf("%q is not an http:// or https:// URL", u)
		}
	}
	return schema.GroupResource{Group: group, Resource: resource}, urls, nil
}

// SizeProcs sizes the process's GOMAXPROCS to its load (internal/procs)
// while ctx lasts, when o.ElasticProcs asks for it and GOMAXPROCS is not set
// in the environment. It returns the context to run under and a stop that
// ends the sizing, gives the process back its processors and waits.
func SizeProcs(ctx context.Context, o Options, logger *slog.Logger) (context.Context, func()) {
	if !procs.Enabled(o.ElasticProcs, os.Getenv) {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := procs.Run(ctx, procs.Config{Logger: logger.With("component", "procs")}); err != nil {
			logger.Warn("could not size the scheduler's processors to the load; GOMAXPROCS stays as Go chose", "err", err)
		}
	}()
	return ctx, func() { cancel(); <-done }
}
