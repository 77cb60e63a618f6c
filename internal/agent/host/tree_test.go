package host

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

// fakeRoot writes files (paths relative to the root, e.g.
// "proc/meminfo") into a fresh directory and returns it.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// fakeHost is a Host over a fake tree with 4 CPUs, no network interfaces
// and DataDir in a temporary directory.
func fakeHost(t *testing.T, files map[string]string) *Host {
	t.Helper()
	return New(Config{
		Root:       fakeRoot(t, files),
		DataDir:    t.TempDir(),
		NumCPU:     func() int { return 4 },
		Interfaces: func() ([]Interface, error) { return nil, nil },
	})
}

// merge returns the union of file sets; later sets win.
func merge(sets ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, s := range sets {
		for k, v := range s {
			out[k] = v
		}
	}
	return out
}

const gib = 1 << 30

var (
	meminfo16G = map[string]string{
		"proc/meminfo": "MemTotal:       16777216 kB\nMemFree:         1000000 kB\nMemAvailable:    8388608 kB\n",
	}
	cgroupV2 = map[string]string{"sys/fs/cgroup/cgroup.controllers": "cpu memory pids\n"}
)

func mustIP(t *testing.T, s string) net.IP {
	t.Helper()
	ip := net.ParseIP(s)
	if ip == nil {
		t.Fatalf("bad IP %q", s)
	}
	return ip
}
