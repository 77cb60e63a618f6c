package install_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeplane/nodeplane/internal/install"
)

func render(t *testing.T, role string, args ...string) (unit, env string) {
	t.Helper()
	files, err := install.Render(install.Spec{Role: role, Args: args, Version: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].Path != install.UnitPath(role) || files[1].Path != install.EnvPath(role) {
		t.Fatalf("files = %+v, want the unit and the env file", files)
	}
	if files[1].Mode != 0o600 {
		t.Errorf("env file mode %#o, want 0600 (it may hold a join token)", files[1].Mode)
	}
	return string(files[0].Data), string(files[1].Data)
}

// directives returns the unit's Key=Value lines, by key.
func directives(unit string) map[string][]string {
	out := map[string][]string{}
	for _, line := range strings.Split(unit, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			out[k] = append(out[k], v)
		}
	}
	return out
}

func TestRenderedUnits(t *testing.T) {
	for _, tt := range []struct {
		name    string
		role    string
		want    map[string]string
		wantNot []string
	}{
		{
			name: "the server unit waits for READY=1, restarts on failure and reads its flags from /etc/nodeplane/server.env",
			role: install.Server,
			want: map[string]string{
				"Type": "notify", "NotifyAccess": "main", "Restart": "on-failure",
				"EnvironmentFile": "/etc/nodeplane/server.env",
				"ExecStart":       "/usr/local/bin/nodeplane server $NODEPLANE_SERVER_ARGS",
				"WantedBy":        "multi-user.target",
			},
			wantNot: []string{"KillMode", "Delegate"},
		},
		{
			name: "the agent unit leaves the pods running when the agent stops and delegates cgroups to it",
			role: install.Agent,
			want: map[string]string{
				"Type": "notify", "NotifyAccess": "main", "Restart": "on-failure",
				"KillMode": "process", "Delegate": "yes",
				"EnvironmentFile": "/etc/nodeplane/agent.env",
				"ExecStart":       "/usr/local/bin/nodeplane agent $NODEPLANE_AGENT_ARGS",
				"After":           "network-online.target systemd-logind.service nodeplane-server.service",
				"WantedBy":        "multi-user.target",
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			unit, env := render(t, tt.role, "--data-dir=/var/lib/nodeplane/"+tt.role, "--log-level", "debug")
			if !strings.HasPrefix(unit, install.Marker+"\n") || !strings.HasPrefix(env, install.Marker+"\n") {
				t.Errorf("a file does not start with the marker line\nunit:\n%s\nenv:\n%s", unit, env)
			}
			d := directives(unit)
			for k, v := range tt.want {
				if len(d[k]) != 1 || d[k][0] != v {
					t.Errorf("%s = %q, want exactly [%q]", k, d[k], v)
				}
			}
			for _, k := range tt.wantNot {
				if len(d[k]) > 0 {
					t.Errorf("%s = %q, want none", k, d[k])
				}
			}
			wantEnv := install.ArgsVariable(tt.role) + "=--data-dir=/var/lib/nodeplane/" + tt.role + " --log-level debug\n"
			if !strings.HasSuffix(env, wantEnv) {
				t.Errorf("env file:\n%s\nwant it to end with %q", env, wantEnv)
			}
		})
	}
}

func TestRenderRefusesWordsSystemdWouldChange(t *testing.T) {
	for _, tt := range []struct {
		name, arg, want string
	}{
		{"a value with a space is refused", "--node-labels=a=b c", `" "`},
		{"a quote is refused", `--tls-san="x"`, `"\""`},
		{"a dollar sign is refused", "--token=$SECRET", `"$"`},
		{"an empty word is refused", "", "empty argument"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := install.Render(install.Spec{Role: install.Agent, Args: []string{tt.arg}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one naming %s", err, tt.want)
			}
		})
	}
	if _, err := install.Render(install.Spec{Role: "etcd"}); err == nil || !strings.Contains(err.Error(), `"etcd"`) {
		t.Errorf("unknown role: err = %v, want one naming it", err)
	}
}

// TestUnitsPassSystemdAnalyzeVerify runs systemd's own checker on both
// rendered units. It fails on any complaint, including the "Unknown key"
// warnings verify prints while still exiting 0.
func TestUnitsPassSystemdAnalyzeVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze not found (.ci/run installs the systemd package); CI=true runs every check")
		}
		t.Skip("systemd-analyze not found: apt-get install systemd to run this check")
	}
	dir := t.TempDir()
	// verify checks that ExecStart's program exists and is executable.
	bin := filepath.Join(dir, "nodeplane")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, role := range install.Roles {
		t.Run("the "+role+" unit passes systemd-analyze verify", func(t *testing.T) {
			files, err := install.Render(install.Spec{Role: role, Binary: bin, Args: []string{"--data-dir=" + dir}, Version: "test"})
			if err != nil {
				t.Fatal(err)
			}
			unit := filepath.Join(dir, install.UnitName(role))
			if err := os.WriteFile(unit, files[0].Data, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(analyze, "verify", unit).CombinedOutput()
			if err != nil || len(bytes.TrimSpace(out)) > 0 {
				t.Errorf("systemd-analyze verify %s: %v\n%s\nunit:\n%s", unit, err, out, files[0].Data)
			}
		})
	}
}

func TestCheckHost(t *testing.T) {
	withSystemd := t.TempDir()
	if err := os.MkdirAll(filepath.Join(withSystemd, install.SystemdRunDir), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		root string
		uid  int
		want string
	}{
		{"a machine booted with systemd, as root, is accepted", withSystemd, 0, ""},
		{"a machine without systemd is refused naming /run/systemd/system", t.TempDir(), 0, "systemd is not running on this machine (no /run/systemd/system)"},
		{"a user other than root is refused naming the uid", withSystemd, 1000, "must run as root"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := install.Config{Root: tt.root, Euid: func() int { return tt.uid }}.CheckHost()
			if tt.want == "" && err != nil {
				t.Errorf("err = %v, want nil", err)
			}
			if tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestApplyNeverOverwritesFilesItDidNotWrite(t *testing.T) {
	for _, tt := range []struct {
		name     string
		existing map[string]string // path → content before
		wantErr  string
	}{
		{"a fresh machine gets both files", nil, ""},
		{"files written by an earlier install are replaced", map[string]string{
			install.UnitPath(install.Agent): install.Marker + "\nold\n",
			install.EnvPath(install.Agent):  install.Marker + "\nold\n",
		}, ""},
		{"an existing unit of someone else's is refused and the env file is not written either", map[string]string{
			install.UnitPath(install.Agent): "[Service]\nExecStart=/opt/other\n",
		}, "/etc/systemd/system/nodeplane-agent.service exists and was not written by nodeplane install"},
		{"an existing env file of someone else's is refused and the unit is not written either", map[string]string{
			install.EnvPath(install.Agent): "SECRET=1\n",
		}, "/etc/nodeplane/agent.env exists and was not written by nodeplane install"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := install.Config{Root: t.TempDir()}
			for p, content := range tt.existing {
				full := filepath.Join(cfg.Root, p)
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			files, err := install.Render(install.Spec{Role: install.Agent, Args: []string{"--server=https://x:6443"}, Version: "t"})
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.Apply(files)
			for _, f := range files {
				got, readErr := os.ReadFile(filepath.Join(cfg.Root, f.Path))
				before, existed := tt.existing[f.Path]
				switch {
				case tt.wantErr == "" && string(got) != string(f.Data):
					t.Errorf("%s = %q (%v), want the rendered file", f.Path, got, readErr)
				case tt.wantErr != "" && existed && string(got) != before:
					t.Errorf("%s was changed to %q, want it left as %q", f.Path, got, before)
				case tt.wantErr != "" && !existed && readErr == nil:
					t.Errorf("%s was written although the install was refused", f.Path)
				}
			}
			if tt.wantErr == "" && err != nil {
				t.Errorf("err = %v, want nil", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "nothing was written")) {
				t.Errorf("err = %v, want one containing %q and saying nothing was written", err, tt.wantErr)
			}
		})
	}
}

func TestRemoveTakesOnlyItsOwnFiles(t *testing.T) {
	cfg := install.Config{Root: t.TempDir()}
	files, err := install.Render(install.Spec{Role: install.Server, Version: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Apply(files); err != nil {
		t.Fatal(err)
	}
	if err := cfg.MakeDataDir(install.DataDir(install.Server)); err != nil {
		t.Fatal(err)
	}
	// Someone replaced the env file with their own.
	foreign := filepath.Join(cfg.Root, install.EnvPath(install.Server))
	if err := os.WriteFile(foreign, []byte("MINE=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := cfg.Installed(); err != nil || len(got) != 1 || got[0] != install.Server {
		t.Fatalf("Installed = %v, %v; want [server]", got, err)
	}
	removed, skipped, err := cfg.Remove(install.Server, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != install.UnitPath(install.Server) {
		t.Errorf("removed %v, want only the unit file", removed)
	}
	if len(skipped) != 1 || skipped[0] != install.EnvPath(install.Server) {
		t.Errorf("skipped %v, want the env file nodeplane did not write", skipped)
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Errorf("the foreign env file is gone: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.Root, install.DataDir(install.Server))); err != nil {
		t.Errorf("the data dir is gone without --purge: %v", err)
	}
	if _, _, err := cfg.Remove(install.Server, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cfg.Root, install.DataDir(install.Server))); err == nil {
		t.Error("the data dir survived --purge")
	}
}

func TestCurrentTellsWhetherAnInstallWouldChangeAnything(t *testing.T) {
	render := func(args ...string) []install.File {
		files, err := install.Render(install.Spec{Role: install.Agent, Args: args, Version: "t"})
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	for _, tt := range []struct {
		name    string
		before  []install.File // applied first
		chmod   string         // a file whose mode is then changed to 0644
		install []install.File
		want    bool
	}{
		{"nothing installed yet is not current", nil, "", render("--server=https://x:6443"), false},
		{"the same files with the same flags are current", render("--server=https://x:6443"), "", render("--server=https://x:6443"), true},
		{"other flags are not current", render("--server=https://x:6443"), "", render("--server=https://y:6443"), false},
		{"an env file whose mode was changed is not current", render("--server=https://x:6443"), install.EnvPath(install.Agent), render("--server=https://x:6443"), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := install.Config{Root: t.TempDir()}
			if tt.before != nil {
				if err := cfg.Apply(tt.before); err != nil {
					t.Fatal(err)
				}
			}
			if tt.chmod != "" {
				if err := os.Chmod(filepath.Join(cfg.Root, tt.chmod), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := cfg.Current(tt.install)
			if err != nil || got != tt.want {
				t.Errorf("Current = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestInstallBinaryCopiesOnlyWhatDiffers(t *testing.T) {
	cfg := install.Config{Root: t.TempDir()}
	src := filepath.Join(t.TempDir(), "nodeplane")
	if err := os.WriteFile(src, []byte("v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(cfg.Root, install.BinaryPath)
	for _, step := range []struct {
		name       string
		content    string // of src; "" keeps it
		wantCopied bool
	}{
		{"a first install copies the binary", "", true},
		{"the same bytes again are not copied", "", false},
		{"a new binary is copied", "v2", true},
	} {
		if step.content != "" {
			if err := os.WriteFile(src, []byte(step.content), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		copied, err := cfg.InstallBinary(src, install.BinaryPath)
		if err != nil || copied != step.wantCopied {
			t.Errorf("%s: copied = %v, %v; want %v", step.name, copied, err, step.wantCopied)
		}
		want, _ := os.ReadFile(src)
		if got, err := os.ReadFile(dst); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: installed binary %q, %v; want %q", step.name, got, err, want)
		}
	}
	// Run from the installed path itself: the same file, nothing to copy.
	if copied, err := cfg.InstallBinary(dst, install.BinaryPath); err != nil || copied {
		t.Errorf("installing the installed binary over itself: copied = %v, %v; want false", copied, err)
	}
}
