// Package simapp is `nodeplane sim`: flags → sim.Config, the control
// endpoint, stdin commands and the periodic progress line.
package simapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodeplane/nodeplane/internal/logging"
	"github.com/nodeplane/nodeplane/internal/sim"
)

// Options are the raw flag values.
type Options struct {
	Server                string
	Token                 string
	TokenFile             string
	Nodes                 int
	Zones                 string
	NamePrefix            string
	Control               string
	Workers               int
	Joiners               int
	WatchPods             bool
	LeaseDuration         time.Duration
	StatusUpdateFrequency time.Duration
	StatusReportFrequency time.Duration
	// Every node's graceful shutdown budgets (as the agent's flags).
	ShutdownGracePeriod             time.Duration
	ShutdownGracePeriodCriticalPods time.Duration
	Seed                            uint64
	ReportInterval                  time.Duration
	Duration                        time.Duration
	Stdin                           bool
	Logging                         logging.Options
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{
		Nodes: 100, NamePrefix: "sim-", Control: "127.0.0.1:0", Workers: 64, Joiners: 16, WatchPods: true,
		LeaseDuration: 40 * time.Second, StatusUpdateFrequency: 10 * time.Second, StatusReportFrequency: 5 * time.Minute,
		ReportInterval: 30 * time.Second, Stdin: true,
		ShutdownGracePeriod: 30 * time.Second, ShutdownGracePeriodCriticalPods: 10 * time.Second,
		Logging: logging.Options{Level: "info", Format: "text"},
	}
}

// Validate names the flag at fault.
func (o *Options) Validate() error {
	var errs []error
	if u, err := url.Parse(o.Server); o.Server == "" || err != nil || u.Scheme != "https" || u.Host == "" {
		errs = append(errs, fmt.Errorf("--server %q: want the server's https:// URL", o.Server))
	}
	if (o.Token == "") == (o.TokenFile == "") {
		errs = append(errs, errors.New("give exactly one of --token or --token-file"))
	}
	if o.Nodes <= 0 {
		errs = append(errs, fmt.Errorf("--nodes must be > 0, got %d", o.Nodes))
	}
	if o.Workers <= 0 || o.Joiners <= 0 {
		errs = append(errs, fmt.Errorf("--workers and --joiners must be > 0, got %d and %d", o.Workers, o.Joiners))
	}
	if o.LeaseDuration < time.Second {
		errs = append(errs, fmt.Errorf("--node-lease-duration must be >= 1s, got %v", o.LeaseDuration))
	}
	if o.StatusUpdateFrequency <= 0 || o.StatusReportFrequency < o.StatusUpdateFrequency {
		errs = append(errs, fmt.Errorf("--node-status-update-frequency must be > 0 and <= --node-status-report-frequency, got %v and %v", o.StatusUpdateFrequency, o.StatusReportFrequency))
	}
	if o.Control != "" {
		if _, _, err := net.SplitHostPort(o.Control); err != nil {
			errs = append(errs, fmt.Errorf("--control %q: want HOST:PORT: %v", o.Control, err))
		}
	}
	if o.ShutdownGracePeriod <= 0 || o.ShutdownGracePeriodCriticalPods < 0 || o.ShutdownGracePeriodCriticalPods > o.ShutdownGracePeriod {
		errs = append(errs, fmt.Errorf("--shutdown-grace-period must be > 0 and --shutdown-grace-period-critical-pods between 0 and it, got %v and %v",
			o.ShutdownGracePeriod, o.ShutdownGracePeriodCriticalPods))
	}
	if o.ReportInterval < 0 || o.Duration < 0 {
		errs = append(errs, errors.New("--report-interval and --duration must be >= 0"))
	}
	return errors.Join(errs...)
}

// Command returns `nodeplane sim`.
func Command(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	o := DefaultOptions()
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Simulate many nodes in one process against a nodeplane server (scale and what-if runs)",
		Long: `Simulate --nodes nodes against a server. Each joins with the join secret, registers,
renews its Lease and posts NodeStatus with the agent's own code; pods bound to it go Running.

Control it while it runs, on stdin or the --control endpoint:
  pause node N | pause zone Z | resume node N | resume zone Z | status | reset
  shutdown node N | shutdown zone Z | boot node N | boot zone Z
  GET /status   POST /pause?node=N|zone=Z[&count=K]   POST /resume?...   POST /reset
  POST /shutdown?node=N|zone=Z   POST /boot?node=N|zone=Z

shutdown runs a graceful node shutdown as the agent does (Ready=False "node is
shutting down", new pods rejected, pods stopped by priority within the
--shutdown-grace-period budgets with final statuses posted), then the node is
down: no more lease renewals or status. boot starts a down node's agent again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			logger, err := logging.New(stderr, o.Logging)
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
			}
			s, err := sim.New(sim.Config{
				Server: o.Server, Token: token, Nodes: o.Nodes, Zones: sim.ParseZones(o.Zones), NamePrefix: o.NamePrefix,
				LeaseDuration: o.LeaseDuration, StatusUpdateFrequency: o.StatusUpdateFrequency,
				StatusReportFrequency: o.StatusReportFrequency, Workers: o.Workers, Joiners: o.Joiners,
				WatchPods: o.WatchPods, Seed: o.Seed, Logger: logger,
				ShutdownGracePeriod: o.ShutdownGracePeriod, ShutdownGracePeriodCriticalPods: o.ShutdownGracePeriodCriticalPods,
			})
			if err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			if o.Control != "" {
				ln, err := net.Listen("tcp", o.Control)
				if err != nil {
					return fmt.Errorf("--control %s: %w", o.Control, err)
				}
				srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
				go func() { _ = srv.Serve(ln) }()
				defer srv.Close()
				fmt.Fprintf(stdout, "control endpoint: http://%s/status\n", ln.Addr())
			}
			if o.Stdin {
				go s.Commands(stdin, stdout)
			}
			ready := func() {
				fmt.Fprintf(stdout, "all %d nodes registered\n", o.Nodes)
				if o.Duration > 0 {
					s.ResetStats()
					time.AfterFunc(o.Duration, cancel)
				}
			}
			if o.ReportInterval > 0 {
				go report(ctx, s, o.ReportInterval, stdout)
			}
			err = s.Run(ctx, ready)
			b, _ := json.Marshal(s.Status())
			fmt.Fprintf(stdout, "final: %s\n", b)
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Server, "server", o.Server, "URL of the nodeplane server")
	fs.StringVar(&o.Token, "token", o.Token, "Join secret")
	fs.StringVar(&o.TokenFile, "token-file", o.TokenFile, "File holding the join secret (the server's <data-dir>/node-token)")
	fs.IntVar(&o.Nodes, "nodes", o.Nodes, "Number of simulated nodes")
	fs.StringVar(&o.Zones, "zones", o.Zones, "Zones, comma-separated; nodes are spread over them round-robin (topology.kubernetes.io/zone)")
	fs.StringVar(&o.NamePrefix, "name-prefix", o.NamePrefix, "Node name prefix (names are prefix + zero-padded index)")
	fs.StringVar(&o.Control, "control", o.Control, "Listen address of the HTTP control endpoint; empty disables it")
	fs.IntVar(&o.Workers, "workers", o.Workers, "Workers running renewals and status updates for all nodes")
	fs.IntVar(&o.Joiners, "joiners", o.Joiners, "Nodes joining and registering at once at start")
	fs.BoolVar(&o.WatchPods, "watch-pods", o.WatchPods, "Each node watches its pods (so bound pods go Running); false saves one watch per node")
	fs.DurationVar(&o.LeaseDuration, "node-lease-duration", o.LeaseDuration, "Lease duration of every node (renewed every quarter of it)")
	fs.DurationVar(&o.StatusUpdateFrequency, "node-status-update-frequency", o.StatusUpdateFrequency, "How often each node recomputes its status")
	fs.DurationVar(&o.StatusReportFrequency, "node-status-report-frequency", o.StatusReportFrequency, "Longest time between status patches when nothing changed")
	fs.DurationVar(&o.ShutdownGracePeriod, "shutdown-grace-period", o.ShutdownGracePeriod, "Total time a node's graceful shutdown (control command shutdown) may take")
	fs.DurationVar(&o.ShutdownGracePeriodCriticalPods, "shutdown-grace-period-critical-pods", o.ShutdownGracePeriodCriticalPods, "Part of --shutdown-grace-period kept for critical pods (priority >= 2000000000)")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "Seed for start offsets and jitter")
	fs.DurationVar(&o.ReportInterval, "report-interval", o.ReportInterval, "How often a progress line is printed; 0 disables")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "Stop this long after all nodes registered (0: run until interrupted); statistics are reset at registration end")
	fs.BoolVar(&o.Stdin, "stdin", o.Stdin, "Read control commands from stdin")
	o.Logging.AddFlags(fs)
	return cmd
}

func report(ctx context.Context, s *sim.Sim, every time.Duration, out io.Writer) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			st := s.Status()
			fmt.Fprintf(out, "registered=%d/%d renewals/s=%.0f (target %.0f) p50=%s p99=%s late=%d maxGap=%s failures=%d paused=%d pods=%d\n",
				st.Registered, st.Nodes, st.RenewalsPerSecond, st.TargetPerSecond, st.RenewP50, st.RenewP99, st.Late, st.MaxGap, st.Failures, len(st.Paused), st.Pods)
		}
	}
}
