package agentapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodeplane/nodeplane/internal/agent/shutdown"
)

// ControlDir and SocketName place the agent's control socket,
// <data-dir>/control/agent.sock, which `nodeplane agent shutdown
// [--cancel]` talks to. The directory is forced to 0700 and the socket to
// 0600: only the agent's own user (root) can connect.
const (
	ControlDir = "control"
	SocketName = "agent.sock"
)

// SocketPath is the control socket of the agent with dataDir.
func SocketPath(dataDir string) string { return filepath.Join(dataDir, ControlDir, SocketName) }

// Signaled is the cause a command's context is cancelled with when the
// process gets a signal (see app.SignalContext), so the agent can tell
// SIGTERM (maybe: the node is going away) from SIGINT.
type Signaled struct{ Signal os.Signal }

func (s Signaled) Error() string { return s.Signal.String() + " received" }

// Is makes a Signaled cause count as context.Canceled.
func (s Signaled) Is(target error) bool { return target == context.Canceled }

// sigtermIsNodeShutdown decides what SIGTERM means: the node is going
// away when asked with --shutdown-on-sigterm or when the agent is PID 1 —
// a container's init, whose SIGTERM comes from `docker stop` or the
// container's own shutdown. Otherwise it is an agent restart (pods keep
// running), as under systemd, where logind announces real shutdowns.
func sigtermIsNodeShutdown(o Options) bool {
	return o.ShutdownOnSigterm || os.Getpid() == 1
}

func isSIGTERM(ctx context.Context) bool {
	var s Signaled
	return errors.As(context.Cause(ctx), &s) && s.Signal == syscall.SIGTERM
}

// controller is what the control socket drives.
type controller interface {
	Shutdown(ctx context.Context) error
	CancelShutdown() bool
}

// serveControl serves the control socket until ctx ends. POST /shutdown
// runs a graceful node shutdown and answers when it is done (then calls
// done); POST /cancel cancels one under way.
func serveControl(ctx context.Context, path string, c controller, done func(), log *slog.Logger) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	// The directory is the gate (connecting needs search permission on
	// it); tighten one that exists with a looser mode.
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("control socket %s: %w", path, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return fmt.Errorf("control socket %s: %w", path, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /shutdown", func(w http.ResponseWriter, r *http.Request) {
		log.Info("graceful node shutdown requested on the control socket")
		err := c.Shutdown(ctx)
		switch {
		case errors.Is(err, shutdown.ErrCancelled):
			http.Error(w, "shutdown cancelled", http.StatusConflict)
		case errors.Is(err, shutdown.ErrDisabled):
			http.Error(w, err.Error(), http.StatusConflict)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		default:
			fmt.Fprintln(w, "node shut down: pods stopped, final statuses posted")
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
			done()
		}
	})
	mux.HandleFunc("POST /cancel", func(w http.ResponseWriter, r *http.Request) {
		if !c.CancelShutdown() {
			http.Error(w, "no shutdown to cancel", http.StatusConflict)
			return
		}
		log.Info("graceful node shutdown cancelled on the control socket")
		fmt.Fprintln(w, "shutdown cancelled: the node returns to Ready")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("control socket: %w", err)
	}
	return nil
}

// shutdownCommand returns `nodeplane agent shutdown [--cancel]`.
func shutdownCommand(stdout io.Writer) *cobra.Command {
	dataDir := DefaultOptions().DataDir
	cancel := false
	cmd := &cobra.Command{
		Use:   "shutdown",
		Short: "Shut this node down gracefully: the local agent marks the Node NotReady, stops its pods by priority and posts their final statuses, then exits",
		Long: "Asks the agent running with --data-dir to shut the node down gracefully and waits until it is done " +
			"(for shutdown scripts). --cancel ends a shutdown under way: the node returns to Ready; pods already stopped stay stopped.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := SocketPath(dataDir)
			client := &http.Client{Transport: &http.Transport{
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, "unix", path)
				},
			}}
			op := "shutdown"
			if cancel {
				op = "cancel"
			}
			req, err := http.NewRequestWithContext(cmd.Context(), http.MethodPost, "http://agent/"+op, nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return fmt.Errorf("reach the agent on %s (is it running with --data-dir %s, and are you its user?): %w", path, dataDir, err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			msg := strings.TrimSpace(string(body))
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("agent: %s", msg)
			}
			_, err = fmt.Fprintln(stdout, msg)
			return err
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", dataDir, "The agent's --data-dir (its control socket is there)")
	cmd.Flags().BoolVar(&cancel, "cancel", false, "Cancel a shutdown under way")
	return cmd
}
