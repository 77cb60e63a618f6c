package agentapp

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/internal/agent/shutdown"
)

type fakeController struct {
	shutdowns, cancels atomic.Int32
	result             error
}

func (f *fakeController) Shutdown(context.Context) error { f.shutdowns.Add(1); return f.result }
func (f *fakeController) CancelShutdown() bool           { f.cancels.Add(1); return true }

func startControl(t *testing.T, dataDir string, c controller) (done chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := serveControl(ctx, SocketPath(dataDir), c, func() { close(done) }, slog.New(slog.DiscardHandler)); err != nil {
			t.Errorf("serveControl: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-stopped })
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(SocketPath(dataDir)); err == nil {
			return done
		}
		if time.Now().After(deadline) {
			t.Fatal("control socket never appeared")
		}
		time.Sleep(10 * time.Millisecond) // polling for the socket file, with a deadline
	}
}

func runShutdownCommand(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := shutdownCommand(&out)
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestControlSocketIsOwnerOnly(t *testing.T) {
	dataDir := t.TempDir()
	// A control dir left group/world-accessible is tightened at start.
	if err := os.MkdirAll(filepath.Join(dataDir, ControlDir), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dataDir, ControlDir), 0o777); err != nil {
		t.Fatal(err)
	}
	startControl(t, dataDir, &fakeController{})
	for path, want := range map[string]os.FileMode{filepath.Join(dataDir, ControlDir): 0o700, SocketPath(dataDir): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s has mode %o, want %o (only the agent's user may reach the socket)", path, got, want)
		}
	}
}

func TestShutdownCommand(t *testing.T) {
	dataDir := t.TempDir()
	c := &fakeController{}
	done := startControl(t, dataDir, c)

	out, err := runShutdownCommand(t, "--data-dir", dataDir)
	if err != nil || !strings.Contains(out, "node shut down") {
		t.Fatalf("agent shutdown: %q, %v", out, err)
	}
	select {
	case <-done:
	default:
		t.Error("a completed shutdown did not stop the agent")
	}
	if out, err := runShutdownCommand(t, "--data-dir", dataDir, "--cancel"); err != nil || c.cancels.Load() != 1 {
		t.Errorf("agent shutdown --cancel: %q, %v (cancels %d)", out, err, c.cancels.Load())
	}
}

func TestShutdownCommandReportsCancellation(t *testing.T) {
	dataDir := t.TempDir()
	startControl(t, dataDir, &fakeController{result: shutdown.ErrCancelled})
	if _, err := runShutdownCommand(t, "--data-dir", dataDir); err == nil || !strings.Contains(err.Error(), "cancelled") {
		t.Errorf("error %v, want the cancellation reported", err)
	}
}

func TestShutdownCommandWithoutAgentNamesTheSocket(t *testing.T) {
	dataDir := t.TempDir()
	_, err := runShutdownCommand(t, "--data-dir", dataDir)
	if err == nil || !strings.Contains(err.Error(), SocketPath(dataDir)) {
		t.Errorf("error %v, want one naming %s", err, SocketPath(dataDir))
	}
}
