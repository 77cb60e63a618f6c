package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// agentProc is one running `nodeplane agent`.
type agentProc struct {
	t       *testing.T
	name    string
	dataDir string
	args    []string
	cmd     *exec.Cmd
	logPath string
	done    chan error
}

type agentOptions struct {
	name    string
	dataDir string
	// config is the KubeletConfiguration YAML body (apiVersion/kind added).
	config string
	// tokenFile replaces the server's node-token.
	tokenFile string
	args      []string
}

// startAgent starts an agent joined to s. It does not wait for the Node.
func startAgent(t *testing.T, s *serverProc, o agentOptions) *agentProc {
	t.Helper()
	if o.dataDir == "" {
		o.dataDir = filepath.Join(t.TempDir(), "agent-"+o.name)
	}
	if o.tokenFile == "" {
		o.tokenFile = filepath.Join(s.dataDir, "node-token")
	}
	args := []string{"agent", "--server", s.restConfig().Host, "--token-file", o.tokenFile,
		"--data-dir", o.dataDir, "--node-name", o.name, "--port", "0", "--log-level", "debug"}
	if o.config != "" {
		path := filepath.Join(t.TempDir(), o.name+"-config.yaml")
		body := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n" + o.config
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", path)
	}
	a := &agentProc{t: t, name: o.name, dataDir: o.dataDir, args: append(args, o.args...)}
	a.start()
	t.Cleanup(func() {
		a.stop()
		killContainers(a.dataDir)
	})
	return a
}

func (a *agentProc) start() {
	a.t.Helper()
	a.cmd = exec.Command(binary, a.args...)
	a.logPath = filepath.Join(a.t.TempDir(), a.name+".log")
	f, err := os.Create(a.logPath)
	if err != nil {
		a.t.Fatal(err)
	}
	a.cmd.Stdout, a.cmd.Stderr = f, f
	if err := a.cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	a.done = make(chan error, 1)
	go func() {
		a.done <- a.cmd.Wait()
		f.Close()
	}()
}

func (a *agentProc) logs() string {
	b, _ := os.ReadFile(a.logPath)
	return string(b)
}

// exited reports whether the agent has exited, and how.
func (a *agentProc) exited(within time.Duration) (error, bool) {
	select {
	case err := <-a.done:
		a.cmd = nil
		return err, true
	case <-time.After(within):
		return nil, false
	}
}

func (a *agentProc) stop() {
	if a.cmd == nil || a.cmd.Process == nil {
		return
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(20 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.done
	}
	a.cmd = nil
}

func (a *agentProc) kill9() {
	if a.cmd == nil {
		return
	}
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.done
	a.cmd = nil
}

func (a *agentProc) String() string {
	return fmt.Sprintf("agent %s (%s)", a.name, strings.Join(a.args, " "))
}

// killContainers ends every container an agent of dataDir started: its
// shims (found by their command line, which names the data dir) and the
// process groups of their children. Containers outlive an agent by design;
// a test must not leave them behind.
func killContainers(dataDir string) {
	entries, _ := os.ReadDir("/proc")
	shims := map[int]bool{}
	parents := map[int]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil &&
			strings.Contains(string(cmd), "agent-shim") && strings.Contains(string(cmd), dataDir) {
			shims[pid] = true
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			// pid (comm) state ppid ...; comm may contain spaces.
			if i := strings.LastIndexByte(string(stat), ')'); i > 0 {
				if f := strings.Fields(string(stat)[i+1:]); len(f) > 1 {
					ppid, _ := strconv.Atoi(f[1])
					parents[pid] = ppid
				}
			}
		}
	}
	for pid, ppid := range parents {
		if shims[ppid] {
			_ = syscall.Kill(-pid, syscall.SIGKILL) // the container's own process group
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for pid := range shims {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
