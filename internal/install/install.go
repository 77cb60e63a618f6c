// Package install renders and writes what runs nodeplane as a systemd
// service: a unit file per role (/etc/systemd/system/nodeplane-<role>.service),
// an environment file holding the role's command-line flags
// (/etc/nodeplane/<role>.env) and the data directory
// (/var/lib/nodeplane/<role>). Every file it writes starts with a marker
// comment; it never overwrites or removes a file without that marker.
// Rendering is pure; Apply and Remove work under a root prefix so tests
// write into a temporary directory.
package install

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Roles nodeplane installs.
const (
	Server = "server"
	Agent  = "agent"
)

// Roles lists the roles in install order.
var Roles = []string{Server, Agent}

// Marker is the first line of every file install writes: a file without it
// was not written by nodeplane and is left alone.
const Marker = "# Written by `nodeplane install`; `nodeplane uninstall` removes it. Do not edit the marker line."

// Paths on the target machine (under Config.Root).
const (
	UnitDir    = "/etc/systemd/system"
	ConfigDir  = "/etc/nodeplane"
	DataRoot   = "/var/lib/nodeplane"
	BinaryPath = "/usr/local/bin/nodeplane"
	// SystemdRunDir exists only where systemd is the running init
	// (sd_booted(3)).
	SystemdRunDir = "/run/systemd/system"
)

// UnitName is the systemd unit of role.
func UnitName(role string) string { return "nodeplane-" + role + ".service" }

// UnitPath is where role's unit file goes.
func UnitPath(role string) string { return UnitDir + "/" + UnitName(role) }

// EnvPath is where role's environment file (its flags) goes.
func EnvPath(role string) string { return ConfigDir + "/" + role + ".env" }

// DataDir is role's default --data-dir.
func DataDir(role string) string { return DataRoot + "/" + role }

// ArgsVariable is the environment variable role's flags are kept in.
func ArgsVariable(role string) string { return "NODEPLANE_" + strings.ToUpper(role) + "_ARGS" }

// File is one file to write.
type File struct {
	Path string // on the target machine, without the root prefix
	Mode fs.FileMode
	Data []byte
}

// Spec says what to install for one role.
type Spec struct {
	Role string
	// Binary is the nodeplane executable the unit runs (default BinaryPath).
	Binary string
	// Args are the role's flags (`nodeplane server|agent` flags), already
	// validated by the caller; each becomes one word of the command line.
	Args []string
	// Version is written into the marker's second line.
	Version string
}

// Render returns the unit file and the environment file of s.
func Render(s Spec) ([]File, error) {
	if s.Role != Server && s.Role != Agent {
		return nil, fmt.Errorf("role %q: want %s or %s", s.Role, Server, Agent)
	}
	if s.Binary == "" {
		s.Binary = BinaryPath
	}
	for _, a := range s.Args {
		if err := checkWord(a); err != nil {
			return nil, err
		}
	}
	env := new(bytes.Buffer)
	fmt.Fprintf(env, "%s\n# nodeplane %s: the flags of `nodeplane %s` (see `nodeplane %s --help`), one line, no quotes needed.\n",
		Marker, s.Version, s.Role, s.Role)
	fmt.Fprintf(env, "%s=%s\n", ArgsVariable(s.Role), strings.Join(s.Args, " "))
	return []File{
		{Path: UnitPath(s.Role), Mode: 0o644, Data: unit(s)},
		// 0600: the agent's flags may hold a join token.
		{Path: EnvPath(s.Role), Mode: 0o600, Data: env.Bytes()},
	}, nil
}

// checkWord refuses flag words systemd would not pass through unchanged
// from an environment file: "$VAR" on ExecStart= is split at whitespace and
// not unquoted.
func checkWord(w string) error {
	if w == "" {
		return errors.New("an empty argument cannot be passed through a systemd environment file")
	}
	if i := strings.IndexAny(w, " \t\n\"'\\$%`"); i >= 0 {
		return fmt.Errorf("argument %q: %q cannot be passed through a systemd environment file (use a --config file for values with spaces or quotes)", w, w[i:i+1])
	}
	return nil
}

func unit(s Spec) []byte {
	b := new(bytes.Buffer)
	w := func(format string, args ...any) { fmt.Fprintf(b, format+"\n", args...) }
	w("%s", Marker)
	w("# nodeplane %s", s.Version)
	w("[Unit]")
	switch s.Role {
	case Server:
		w("Description=nodeplane API server (Kubernetes API over etcd)")
	case Agent:
		w("Description=nodeplane node agent (registers this machine as a Node, runs its pods)")
	}
	w("Documentation=https://github.com/nodeplane/nodeplane/blob/main/docs/install.md")
	w("Wants=network-online.target")
	if s.Role == Agent {
		// The agent follows logind for graceful node shutdown.
		w("After=network-online.target systemd-logind.service %s", UnitName(Server))
	} else {
		w("After=network-online.target")
	}
	w("")
	w("[Service]")
	// READY=1 comes from the server once /readyz answers ok, from the agent
	// once its Node is registered.
	w("Type=notify")
	w("NotifyAccess=main")
	w("EnvironmentFile=%s", EnvPath(s.Role))
	w("ExecStart=%s %s $%s", s.Binary, s.Role, ArgsVariable(s.Role))
	w("Restart=on-failure")
	w("RestartSec=5s")
	w("LimitNOFILE=1048576")
	switch s.Role {
	case Server:
		// First start creates the CA and etcd; a restart replays etcd's WAL.
		w("TimeoutStartSec=300s")
		// --shutdown-delay-duration + --shutdown-timeout fit in this.
		w("TimeoutStopSec=120s")
	case Agent:
		// Joining waits for the server.
		w("TimeoutStartSec=infinity")
		// Stopping (or restarting, or upgrading) the agent must not stop the
		// pods: they run under their own supervisors in this unit's cgroup
		// and the next agent adopts them.
		w("KillMode=process")
		// The agent manages its pods' cgroups under the unit's own.
		w("Delegate=yes")
		w("OOMScoreAdjust=-999")
	}
	w("")
	w("[Install]")
	w("WantedBy=multi-user.target")
	return b.Bytes()
}

// Config is where Apply and Remove work.
type Config struct {
	// Root prefixes every path ("/" or "" on a real machine).
	Root string
	// Euid is the effective user id (os.Geteuid if nil).
	Euid func() int
}

func (c Config) path(p string) string {
	if c.Root == "" {
		return p
	}
	return filepath.Join(c.Root, p)
}

func (c Config) euid() int {
	if c.Euid == nil {
		return os.Geteuid()
	}
	return c.Euid()
}

// CheckHost refuses a machine install cannot serve: not booted with systemd,
// or not root.
func (c Config) CheckHost() error {
	if _, err := os.Stat(c.path(SystemdRunDir)); err != nil {
		return fmt.Errorf("systemd is not running on this machine (no %s): nodeplane install writes systemd units; run `nodeplane server` or `nodeplane agent` under your own supervisor instead", SystemdRunDir)
	}
	if id := c.euid(); id != 0 {
		return fmt.Errorf("nodeplane install must run as root (it writes %s, %s and %s); running as uid %d", UnitDir, ConfigDir, DataRoot, id)
	}
	return nil
}

// Ours reports whether the file at p (on the target) exists and whether
// install wrote it.
func (c Config) Ours(p string) (exists, ours bool, err error) {
	data, err := os.ReadFile(c.path(p))
	if errors.Is(err, fs.ErrNotExist) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	return true, bytes.HasPrefix(data, []byte(Marker+"\n")), nil
}

// Conflicts lists the files among files that exist and were not written by
// install, with a sentence each.
func (c Config) Conflicts(files []File) ([]string, error) {
	var out []string
	for _, f := range files {
		exists, ours, err := c.Ours(f.Path)
		if err != nil {
			return nil, err
		}
		if exists && !ours {
			out = append(out, fmt.Sprintf("%s exists and was not written by nodeplane install", f.Path))
		}
	}
	return out, nil
}

// Current reports whether every one of files is already on the target
// with the same content and mode: writing them again would change nothing.
func (c Config) Current(files []File) (bool, error) {
	for _, f := range files {
		data, err := os.ReadFile(c.path(f.Path))
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		fi, err := os.Stat(c.path(f.Path))
		if err != nil {
			return false, err
		}
		if !bytes.Equal(data, f.Data) || fi.Mode().Perm() != f.Mode.Perm() {
			return false, nil
		}
	}
	return true, nil
}

// Apply writes files (each atomically: a temporary file renamed into
// place) after checking that none of them is someone else's: on a
// conflict it writes nothing.
func (c Config) Apply(files []File) error {
	conflicts, err := c.Conflicts(files)
	if err != nil {
		return err
	}
	if len(conflicts) > 0 {
		return fmt.Errorf("refusing to overwrite: %s (move it away or remove it first; nothing was written)", strings.Join(conflicts, "; "))
	}
	for _, f := range files {
		if err := c.write(f); err != nil {
			return err
		}
	}
	return nil
}

func (c Config) write(f File) error {
	p := c.path(f.Path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(f.Data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	if err := tmp.Chmod(f.Mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	return nil
}

// MakeDataDir creates dir (on the target) with mode 0700.
func (c Config) MakeDataDir(dir string) error {
	if err := os.MkdirAll(c.path(dir), 0o700); err != nil {
		return fmt.Errorf("data dir %s: %w", dir, err)
	}
	return os.Chmod(c.path(dir), 0o700)
}

// InstallBinary copies src to the target's path dst unless they are the same
// file or dst already holds the same bytes; it replaces dst atomically, so
// a running process keeps its old image.
func (c Config) InstallBinary(src, dst string) (copied bool, err error) {
	to := c.path(dst)
	si, err := os.Stat(src)
	if err != nil {
		return false, err
	}
	if di, err := os.Stat(to); err == nil && os.SameFile(si, di) {
		return false, nil
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return false, err
	}
	if current, err := c.Current([]File{{Path: dst, Mode: 0o755, Data: data}}); err != nil {
		return false, err
	} else if current {
		return false, nil
	}
	return true, c.write(File{Path: dst, Mode: 0o755, Data: data})
}

// Installed lists the roles whose unit file install wrote, in Roles order.
func (c Config) Installed() ([]string, error) {
	var roles []string
	for _, r := range Roles {
		_, ours, err := c.Ours(UnitPath(r))
		if err != nil {
			return nil, err
		}
		if ours {
			roles = append(roles, r)
		}
	}
	return roles, nil
}

// Remove deletes role's unit and environment files that install wrote and
// returns the paths removed; a file without the marker is reported in
// skipped and left in place. With purge it also removes the data dir.
func (c Config) Remove(role string, purge bool) (removed, skipped []string, err error) {
	for _, p := range []string{UnitPath(role), EnvPath(role)} {
		exists, ours, err := c.Ours(p)
		if err != nil {
			return removed, skipped, err
		}
		switch {
		case !exists:
		case !ours:
			skipped = append(skipped, p)
		default:
			if err := os.Remove(c.path(p)); err != nil {
				return removed, skipped, err
			}
			removed = append(removed, p)
		}
	}
	if purge {
		if _, err := os.Stat(c.path(DataDir(role))); err == nil {
			if err := os.RemoveAll(c.path(DataDir(role))); err != nil {
				return removed, skipped, err
			}
			removed = append(removed, DataDir(role))
		}
	}
	sort.Strings(skipped)
	return removed, skipped, nil
}
