// Package upapp is `nodeplane up`: the server and one agent for this machine
// in one process — the embedded default a new user starts with. The server
// keeps its data in --data-dir (default ./nodeplane-data) and the agent in
// <data-dir>/agent; the agent joins with the server's own join secret and
// trusts its CA directly.
package upapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/nodeplane/nodeplane/internal/app/agentapp"
	"github.com/nodeplane/nodeplane/internal/app/serverapp"
	"github.com/nodeplane/nodeplane/internal/logging"
	"github.com/nodeplane/nodeplane/internal/pki"
)

// DefaultDataDir is where `nodeplane up` keeps everything.
const DefaultDataDir = "./nodeplane-data"

// Command returns `nodeplane up`.
func Command(stdout, stderr io.Writer) *cobra.Command {
	so := serverapp.DefaultOptions()
	so.DataDir = DefaultDataDir
	ao := agentapp.DefaultOptions()
	var agentConfig string
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a server and an agent for this machine in one process (data in ./nodeplane-data)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := so.Validate(); err != nil {
				return err
			}
			ao.Server = "https://127.0.0.1:1" // replaced by the server's real URL below
			ao.ConfigFile = agentConfig
			ao.Logging = so.Logging
			ao.DataDir = filepath.Join(so.DataDir, "agent")
			if err := ao.Validate(); err != nil {
				return err
			}
			logger, err := logging.New(stderr, so.Logging)
			if err != nil {
				return err
			}
			changed := func(flag string) bool {
				switch flag {
				case "register-node", "register-with-taints", "max-pods", "node-status-update-frequency":
					return cmd.Flags().Changed(flag)
				}
				return false
			}
			ctx, stopSizing := serverapp.SizeProcs(cmd.Context(), so, logger)
			defer stopSizing()
			return run(ctx, so, ao, changed, stdout, logger)
		},
	}
	fs := cmd.Flags()
	so.AddFlags(fs)
	fs.StringVar(&ao.NodeName, "node-name", ao.NodeName, "Name of this machine's Node (default: the host name, lower-cased)")
	fs.StringToStringVar(&ao.NodeLabels, "node-labels", ao.NodeLabels, "Labels for this machine's Node, key=value,...")
	fs.StringSliceVar(&ao.NodeIPs, "node-ip", ao.NodeIPs, "IP address(es) of this machine's Node (default: detected)")
	fs.IntVar(&ao.Port, "agent-port", ao.Port, "Port of the agent's log endpoint (0 picks a free one)")
	fs.StringVar(&agentConfig, "agent-config", "", "KubeletConfiguration file for the agent (kubelet.config.k8s.io/v1beta1)")
	fs.Int32Var(&ao.MaxPods, "max-pods", ao.MaxPods, "Most pods this machine runs")
	return cmd
}

func run(ctx context.Context, so serverapp.Options, ao agentapp.Options, changed func(string) bool, stdout io.Writer, slogger *slog.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	urls := make(chan string, 1)
	serverErr := make(chan error, 1)
	go func() {
		serverErr <- serverapp.Run(ctx, serverapp.Config{Options: so, Logger: slogger, Ready: func(u string) { urls <- u }})
	}()
	var url string
	select {
	case url = <-urls:
	case err := <-serverErr:
		return err
	}
	token, err := os.ReadFile(filepath.Join(so.DataDir, serverapp.NodeTokenFile))
	if err != nil {
		return fmt.Errorf("read join secret: %w", err)
	}
	ca, err := os.ReadFile(filepath.Join(so.DataDir, "pki", pki.CACertFile))
	if err != nil {
		return fmt.Errorf("read cluster CA: %w", err)
	}
	kubeconfig, err := filepath.Abs(filepath.Join(so.DataDir, serverapp.AdminKubeconfigFile))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "nodeplane is up at %s. Point kubectl at it with:\n\n    export KUBECONFIG=%s\n\n", url, kubeconfig)

	ao.Server = url
	ao.Token = strings.TrimSpace(string(token))
	var wg sync.WaitGroup
	agentErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		agentErr <- agentapp.Run(ctx, agentapp.Config{Options: ao, Changed: changed, Logger: slogger.With("component", "agent"), CAPEM: ca})
	}()
	var first error
	select {
	case err := <-agentErr:
		first = err
		if first == nil && ctx.Err() == nil {
			first = errors.New("agent stopped")
		}
		cancel()
		if err := <-serverErr; err != nil && first == nil {
			first = err
		}
	case err := <-serverErr:
		first = err
		cancel()
		wg.Wait()
	}
	wg.Wait()
	return first
}
