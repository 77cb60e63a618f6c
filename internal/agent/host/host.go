// Package host reads what the node agent needs to know about the Linux
// machine it runs on: its capacity (CPU, memory, the data directory's
// filesystem), the facts published in NodeSystemInfo (kernel, OS image,
// machine and boot IDs), its hostname, node name and addresses, and the
// observations behind the eviction signals (memory.available,
// nodefs.available, nodefs.inodesFree, pid.available).
//
// Every /proc, /sys and /etc file is read beneath Config.Root, so tests run
// against a fake tree; a missing file never panics: the value is left zero
// and the error says what could not be read, or a documented fallback is
// used. When the agent runs in a container, the limits of the cgroup mounted
// at /sys/fs/cgroup (cgroup v2 or v1) win over the machine's totals.
//
// The package only observes. It makes no API calls and knows nothing of
// KubeletConfiguration: package config turns these observations into
// allocatable and pressure decisions, and host must not import it.
package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// Config says where the host's files are and how to reach the facts that are
// not files.
type Config struct {
	// Root is the directory beneath which /proc, /sys and /etc are read: "/"
	// on a real node, a fake tree in tests. Empty means "/". Facts that have
	// a system-call fallback (kernel release, hostname) use it only when Root
	// is "/".
	Root string
	// DataDir is the agent's data directory, a real path (not beneath Root).
	// The filesystem holding it gives ephemeral-storage capacity and the
	// nodefs signals. If it does not exist yet, its nearest existing ancestor
	// is measured. Empty means Root.
	DataDir string
	// NumCPU reports how many CPUs this process may run on. Default
	// runtime.NumCPU, which honours CPU affinity and cpusets.
	NumCPU func() int
	// Interfaces lists the network interfaces and their addresses. Default
	// SystemInterfaces.
	Interfaces func() ([]Interface, error)
	// HostnameOverride (--hostname-override), when set, is the hostname
	// (trimmed and lower-cased) instead of the machine's: the HostName
	// address, the kubernetes.io/hostname label and, without --node-name,
	// the node name follow it (SPEC KUB-4). Set but blank is an error.
	HostnameOverride *string
}

// DefaultConfig reads the real machine.
func DefaultConfig() Config {
	return Config{
		Root:       "/",
		NumCPU:     runtime.NumCPU,
		Interfaces: SystemInterfaces,
	}
}

// Host reads one machine as its Config describes. It keeps no state between
// calls; every method reads afresh and is safe for concurrent use.
type Host struct {
	cfg Config
}

// New returns a Host for cfg, filling unset fields from DefaultConfig.
func New(cfg Config) *Host {
	def := DefaultConfig()
	if cfg.Root == "" {
		cfg.Root = def.Root
	}
	cfg.Root = filepath.Clean(cfg.Root)
	if cfg.DataDir == "" {
		cfg.DataDir = cfg.Root
	}
	if cfg.NumCPU == nil {
		cfg.NumCPU = def.NumCPU
	}
	if cfg.Interfaces == nil {
		cfg.Interfaces = def.Interfaces
	}
	return &Host{cfg: cfg}
}

// live reports whether Root is the real root, so system calls describe the
// same machine as the files.
func (h *Host) live() bool { return h.cfg.Root == "/" }

// path returns the location of an absolute host path beneath Root.
func (h *Host) path(p string) string { return filepath.Join(h.cfg.Root, p) }

// readString returns the trimmed content of a host file.
func (h *Host) readString(p string) (string, error) {
	b, err := os.ReadFile(h.path(p))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// readInt returns the integer held by a host file.
func (h *Host) readInt(p string) (int64, error) {
	s, err := h.readString(p)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", h.path(p), err)
	}
	return v, nil
}

// readKeyValues parses a file of "key value [unit]" lines, such as
// /proc/meminfo ("MemTotal:  16318464 kB") or a cgroup memory.stat, into
// numbers. A "kB" unit is converted to bytes; lines that do not parse are
// skipped.
func (h *Host) readKeyValues(p string) (map[string]int64, error) {
	s, err := h.readString(p)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64)
	for line := range strings.Lines(s) {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		v, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		if len(fields) > 2 && fields[2] == "kB" {
			v *= 1024
		}
		out[strings.TrimSuffix(fields[0], ":")] = v
	}
	return out, nil
}

// dataFS measures the filesystem holding DataDir, or its nearest existing
// ancestor.
func (h *Host) dataFS() (fsStats, error) {
	dir := filepath.Clean(h.cfg.DataDir)
	for {
		_, err := os.Stat(dir)
		if err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if !errors.Is(err, os.ErrNotExist) || parent == dir {
			return fsStats{}, fmt.Errorf("data dir %s: %w", h.cfg.DataDir, err)
		}
		dir = parent
	}
	st, err := statFS(dir)
	if err != nil {
		return fsStats{}, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st, nil
}

// fsStats describes one filesystem; sizes in bytes.
type fsStats struct {
	capacity   int64
	available  int64 // available to unprivileged users
	inodes     int64
	inodesFree int64
}
