// Package app builds the nodeplane command tree (cobra) and runs it. Each
// subcommand's flags, validation and wiring live in its own package under
// internal/app; nothing outside cmd/ imports this one.
package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/nodeplane/nodeplane/internal/agent/runtime/process"
	"github.com/nodeplane/nodeplane/internal/app/agentapp"
	"github.com/nodeplane/nodeplane/internal/app/clusterapp"
	"github.com/nodeplane/nodeplane/internal/app/installapp"
	"github.com/nodeplane/nodeplane/internal/app/kubeconfigapp"
	"github.com/nodeplane/nodeplane/internal/app/loadapp"
	"github.com/nodeplane/nodeplane/internal/app/serverapp"
	"github.com/nodeplane/nodeplane/internal/app/simapp"
	"github.com/nodeplane/nodeplane/internal/app/tokenapp"
	"github.com/nodeplane/nodeplane/internal/app/upapp"
	"github.com/nodeplane/nodeplane/internal/app/zonesapp"
	"github.com/nodeplane/nodeplane/internal/version"
)

// SignalContext is the context main runs commands under: cancelled on the
// first SIGINT or SIGTERM, with cause agentapp.Signaled naming the signal
// (the agent treats SIGTERM as a node shutdown in some settings). Later
// signals are absorbed until stop is called.
func SignalContext(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-ch:
			cancel(agentapp.Signaled{Signal: s})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(context.Canceled)
	}
}

// Run executes the command line and returns the process exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == agentapp.ShimCommandName {
		// The process runtime re-executes this binary to supervise one
		// container; it is not a user command.
		return process.ShimMain(args[1:])
	}
	root := &cobra.Command{
		Use:           "nodeplane",
		Short:         "nodeplane: a small, fast Kubernetes node-management plane",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(versionCommand(stdout), serverapp.Command(stderr), agentapp.Command(stderr),
		upapp.Command(stdout, stderr), simapp.Command(os.Stdin, stdout, stderr), zonesapp.Command(stdout), loadapp.Command(stdout, stderr),
		tokenapp.Command(stdout), kubeconfigapp.Command(stdout),
		installapp.Command(stdout), installapp.UninstallCommand(stdout),
		clusterapp.Command(stdout), clusterapp.NodeCommand(stdout))
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "nodeplane: %v\n", err)
		return 1
	}
	return 0
}

func versionCommand(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the nodeplane version, the commit it was built from, the Go version and the Kubernetes API version it serves",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			info := version.Info()
			_, err := fmt.Fprintf(stdout, "nodeplane %s (commit %s, %s, %s; Kubernetes API %s)\n",
				version.Version, version.BuildCommit(), info.GoVersion, info.Platform, info.GitVersion)
			return err
		},
	}
}
