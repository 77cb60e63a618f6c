package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSecurityEmbeddedEtcdIsNotReachable is the attack of issue 10 defect 4:
// a local user connected to the embedded etcd's loopback peer port and read
// /members over plain HTTP. The server must listen on TCP only for its API,
// and keep its data dir private even if it was created loose.
func TestSecurityEmbeddedEtcdIsNotReachable(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dataDir, 0o755); err != nil { // past the umask
		t.Fatal(err)
	}
	s := startServer(t, serverOptions{dataDir: dataDir})

	listeners := tcpListeners(t, s.cmd.Process.Pid)
	if len(listeners) != 1 || listeners[0] != s.port {
		t.Errorf("server listens on TCP ports %v, want only the API port %d", listeners, s.port)
	}

	for _, dir := range []string{dataDir, filepath.Join(dataDir, "etcd"), filepath.Join(dataDir, "leases")} {
		fi, err := os.Stat(dir)
		if err != nil {
			t.Errorf("stat %s: %v", dir, err)
			continue
		}
		if perm := fi.Mode().Perm(); perm != 0o700 {
			t.Errorf("%s has mode %#o, want 0700", dir, perm)
		}
	}
	if !strings.Contains(s.logs(), "tightened the data dir to 0700") {
		t.Errorf("server log does not say it tightened the data dir:\n%s", s.logs())
	}
}

// tcpListeners returns the ports of the TCP sockets (v4 and v6) in LISTEN
// state that process pid holds open, from /proc/<pid>/fd and
// /proc/<pid>/net/tcp{,6}.
func tcpListeners(t *testing.T, pid int) []int {
	t.Helper()
	proc := filepath.Join("/proc", strconv.Itoa(pid))
	fds, err := os.ReadDir(filepath.Join(proc, "fd"))
	if err != nil {
		t.Fatal(err)
	}
	owned := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join(proc, "fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") {
			owned[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	var ports []int
	for _, table := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(filepath.Join(proc, "net", table))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			// Fields: sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode.
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !owned[f[9]] {
				continue
			}
			_, hexPort, ok := strings.Cut(f[1], ":")
			if !ok {
				t.Fatalf("%s: local address %q", table, f[1])
			}
			port, err := strconv.ParseInt(hexPort, 16, 32)
			if err != nil {
				t.Fatalf("%s: local address %q: %v", table, f[1], err)
			}
			ports = append(ports, int(port))
		}
	}
	if ports == nil {
		t.Fatalf("process %d holds no listening TCP socket at all; the check is broken", pid)
	}
	return ports
}
