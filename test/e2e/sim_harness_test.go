package e2e

import (
	"bufio"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// startSim runs `nodeplane sim` against s and returns its control URL once
// every node registered.
func startSim(t *testing.T, s *serverProc, args ...string) string {
	t.Helper()
	all := append([]string{"sim", "--server", s.restConfig().Host, "--token-file", filepath.Join(s.dataDir, "node-token"),
		"--control", "127.0.0.1:0", "--report-interval", "0", "--stdin=false"}, args...)
	sim := exec.Command(binary, all...)
	out, err := sim.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	sim.Stderr = &stderr
	if err := sim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Process.Signal(syscall.SIGTERM); _ = sim.Wait() })
	control := ""
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if u, ok := strings.CutPrefix(lines.Text(), "control endpoint: "); ok {
			control = strings.TrimSuffix(u, "/status")
		}
		if strings.Contains(lines.Text(), "nodes registered") {
			break
		}
	}
	if control == "" || lines.Err() != nil {
		t.Fatalf("sim did not register its nodes; stderr:\n%s", tail(stderr.String(), 40))
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return control
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
