// Package serverapp is the `nodeplane server` command: its flags, their
// validation into a Config, and the wiring of storage, certificates, the API
// handler and the HTTPS listener.
package serverapp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodeplane/nodeplane/internal/logging"
)

// Options are the raw flag values.
type Options struct {
	DataDir    string
	Listen     string
	TLSSANs    []string
	TokenFile  string
	EtcdServer []string
	EtcdCA     string
	EtcdCert   string
	EtcdKey    string
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

	MaxRequestsInflight         int
	MaxMutatingRequestsInflight int
	Logging                     logging.Options
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{
		DataDir:                             "/var/lib/nodeplane/server",
		Listen:                              "0.0.0.0:6443",
		DefaultNotReadyTolerationSeconds:    300,
		DefaultUnreachableTolerationSeconds: 300,
		CompactionInterval:                  5 * time.Minute,
		ShutdownTimeout:                     30 * time.Second,
		BookmarkInterval:                    time.Minute,
		EventTTL:                            time.Hour,
		MaxRequestsInflight:                 400,
		MaxMutatingRequestsInflight:         200,
		Logging:                             logging.Options{Level: "info", Format: "text"},
	}
}

// AddFlags registers the server flags (upstream names where one exists).
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir, "Directory for the embedded etcd data, the cluster CA and keys, admin.kubeconfig and node-token")
	fs.StringVar(&o.Listen, "listen", o.Listen, "HTTPS listen address HOST:PORT; port 0 picks a free port (admin.kubeconfig records the real one)")
	fs.StringSliceVar(&o.TLSSANs, "tls-san", o.TLSSANs, "Extra DNS names or IP addresses for the serving certificate (repeatable, comma-separated)")
	fs.StringVar(&o.TokenFile, "token-auth-file", o.TokenFile, "CSV file of bearer tokens: token,user,uid,\"group1,group2\"")
	fs.StringSliceVar(&o.EtcdServer, "etcd-servers", o.EtcdServer, "External etcd client URLs (comma-separated); empty runs one embedded etcd member under --data-dir")
	fs.StringSliceVar(&o.EtcdOverrides, "etcd-servers-overrides", o.EtcdOverrides, "Per-resource etcd servers, group/resource#servers, servers separated by ';' (e.g. coordination.k8s.io/leases#https://10.0.0.9:2379); same TLS files as --etcd-servers")
	fs.BoolVar(&o.DurableLeases, "durable-leases", o.DurableLeases, "With the embedded etcd, keep leases in the main member with fsync on every write; by default leases (soft state: heartbeats, leader election) live in a second embedded member that does not wait for fsync")
	fs.StringVar(&o.EtcdCA, "etcd-cafile", o.EtcdCA, "CA bundle to verify the external etcd servers")
	fs.StringVar(&o.EtcdCert, "etcd-certfile", o.EtcdCert, "Client certificate for the external etcd servers")
	fs.StringVar(&o.EtcdKey, "etcd-keyfile", o.EtcdKey, "Client key for the external etcd servers")
	fs.Int64Var(&o.DefaultNotReadyTolerationSeconds, "default-not-ready-toleration-seconds", o.DefaultNotReadyTolerationSeconds, "tolerationSeconds of the not-ready:NoExecute toleration added to every pod that has none")
	fs.Int64Var(&o.DefaultUnreachableTolerationSeconds, "default-unreachable-toleration-seconds", o.DefaultUnreachableTolerationSeconds, "tolerationSeconds of the unreachable:NoExecute toleration added to every pod that has none")
	fs.DurationVar(&o.CompactionInterval, "etcd-compaction-interval", o.CompactionInterval, "How often storage history older than one interval is compacted; 0 disables compaction")
	fs.IntVar(&o.MaxRequestsInflight, "max-requests-inflight", o.MaxRequestsInflight, "Most non-mutating requests served at once (watches not counted); more get 429 with Retry-After; 0 means no limit")
	fs.IntVar(&o.MaxMutatingRequestsInflight, "max-mutating-requests-inflight", o.MaxMutatingRequestsInflight, "Most mutating requests (including lease renewals) served at once; more get 429 with Retry-After; 0 means no limit")
	fs.DurationVar(&o.EventTTL, "event-ttl", o.EventTTL, "Events are removed this long after their last update; 0 keeps them")
	fs.DurationVar(&o.BookmarkInterval, "watch-bookmark-interval", o.BookmarkInterval, "How often a watch that allows bookmarks receives one")
	fs.DurationVar(&o.ShutdownDelay, "shutdown-delay-duration", o.ShutdownDelay, "On SIGTERM, keep serving this long with /readyz failing so load balancers stop sending requests before the listener closes")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "How long a stop waits for in-flight requests to finish")
	o.Logging.AddFlags(fs)
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
	if o.EventTTL < 0 {
		errs = append(errs, fmt.Errorf("--event-ttl must be >= 0, got %v", o.EventTTL))
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
			return Run(cmd.Context(), Config{Options: o, Logger: logger})
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
