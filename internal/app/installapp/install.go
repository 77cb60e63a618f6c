// Package installapp is `nodeplane install server|agent` and `nodeplane
// uninstall`: nodeplane as a systemd service (internal/install renders and
// writes the files). The role's own flags follow `--` and are checked by the
// role's own validation before anything is written.
package installapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nodeplane/nodeplane/internal/app/agentapp"
	"github.com/nodeplane/nodeplane/internal/app/serverapp"
	"github.com/nodeplane/nodeplane/internal/install"
	"github.com/nodeplane/nodeplane/internal/version"
)

// options are install's own flags.
type options struct {
	root   string
	dryRun bool
	start  bool
}

// Command returns `nodeplane install`.
func Command(stdout io.Writer) *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "install server|agent [flags] [-- ROLE FLAGS...]",
		Short: "Install nodeplane as a systemd service: unit file, /etc/nodeplane/<role>.env and /var/lib/nodeplane/<role>",
		Long: `Install nodeplane as a systemd service (Type=notify: ready once the server serves /readyz, or once
the agent has registered its Node). The words after -- are the flags of ` + "`nodeplane server`" + ` or
` + "`nodeplane agent`" + `, checked as those commands check them and kept in /etc/nodeplane/<role>.env; --data-dir
defaults to /var/lib/nodeplane/<role>. Files nodeplane did not write are never overwritten. Installing
again with the same flags changes nothing; with other flags (or a newer binary) it rewrites its files and
restarts the unit (the agent's pods keep running).

  nodeplane install server -- --tls-san api.example.com
  nodeplane install agent -- --server https://api.example.com:6443 --token-file /etc/nodeplane/join-token`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			role := args[0]
			if cmd.ArgsLenAtDash() == 0 || (cmd.ArgsLenAtDash() < 0 && len(args) > 1) {
				return fmt.Errorf("usage: nodeplane install server|agent [--dry-run] [--root DIR] [-- ROLE FLAGS...]: the role's flags follow --")
			}
			roleArgs := args[1:]
			return runInstall(cmd.Context(), o, role, roleArgs, stdout)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.root, "root", "/", "Install under this directory instead of / (for images and tests; systemctl is not run)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "Print the files that would be written and write nothing")
	fs.BoolVar(&o.start, "start", true, "Run systemctl daemon-reload and enable --now the unit (only with --root /)")
	return cmd
}

// UninstallCommand returns `nodeplane uninstall`.
func UninstallCommand(stdout io.Writer) *cobra.Command {
	var o options
	var purge bool
	cmd := &cobra.Command{
		Use:   "uninstall [server|agent]",
		Short: "Stop, disable and remove the systemd units `nodeplane install` wrote (all roles by default) and stop the pods the agent leaves running; --purge also removes /var/lib/nodeplane/<role>",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := install.Config{Root: o.root}
			// The agent first: it runs after the server and uses it.
			roles := []string{install.Agent, install.Server}
			if len(args) == 1 {
				if args[0] != install.Server && args[0] != install.Agent {
					return fmt.Errorf("role %q: want %s or %s", args[0], install.Server, install.Agent)
				}
				roles = []string{args[0]}
			}
			if !o.dryRun {
				if err := cfg.CheckHost(); err != nil {
					return err
				}
			}
			installed, err := cfg.Installed()
			if err != nil {
				return err
			}
			did := false
			for _, r := range roles {
				if !contains(installed, r) && !purge {
					continue
				}
				did = true
				if o.dryRun {
					fmt.Fprintf(stdout, "would stop and disable %s and remove %s and %s", install.UnitName(r), install.UnitPath(r), install.EnvPath(r))
					if purge {
						fmt.Fprintf(stdout, " and %s", install.DataDir(r))
					}
					fmt.Fprintln(stdout)
					continue
				}
				if contains(installed, r) && systemctlApplies(o.root) {
					if err := systemctl(cmd.Context(), stdout, "disable", "--now", install.UnitName(r)); err != nil {
						return err
					}
					// The agent's unit stops only the agent
					// (KillMode=process): its pods are still running.
					if err := stopLeftovers(cmd.Context(), stdout, install.UnitName(r)); err != nil {
						return err
					}
				}
				removed, skipped, err := cfg.Remove(r, purge)
				if err != nil {
					return err
				}
				for _, p := range removed {
					fmt.Fprintf(stdout, "removed %s\n", p)
				}
				for _, p := range skipped {
					fmt.Fprintf(stdout, "left %s: not written by nodeplane install\n", p)
				}
			}
			if !did {
				fmt.Fprintln(stdout, "nothing to uninstall: no nodeplane unit installed")
				return nil
			}
			if !o.dryRun && systemctlApplies(o.root) {
				return systemctl(cmd.Context(), stdout, "daemon-reload")
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.root, "root", "/", "Uninstall from under this directory instead of / (systemctl is not run)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "Print what would be removed and remove nothing")
	fs.BoolVar(&purge, "purge", false, "Also remove the data directories /var/lib/nodeplane/<role> (the server's etcd, the agent's identity)")
	return cmd
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// RoleArgs checks the role's flags with the role's own flag set and
// validation and returns them with --data-dir defaulted.
func RoleArgs(role string, args []string) ([]string, error) {
	fs := pflag.NewFlagSet(role, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var validate func() error
	switch role {
	case install.Server:
		so := serverapp.DefaultOptions()
		so.AddFlags(fs)
		validate = so.Validate
	case install.Agent:
		ao := agentapp.DefaultOptions()
		ao.AddFlags(fs)
		validate = ao.Validate
	default:
		return nil, fmt.Errorf("role %q: want %s or %s", role, install.Server, install.Agent)
	}
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("nodeplane %s flags: %w", role, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("nodeplane %s takes no arguments, got %q", role, fs.Args())
	}
	out := args
	if !fs.Changed("data-dir") {
		dir := install.DataDir(role)
		if err := fs.Set("data-dir", dir); err != nil {
			return nil, err
		}
		out = append([]string{"--data-dir=" + dir}, args...)
	}
	if err := validate(); err != nil {
		return nil, fmt.Errorf("nodeplane %s flags: %w", role, err)
	}
	return out, nil
}

func runInstall(ctx context.Context, o options, role string, args []string, stdout io.Writer) error {
	cfg := install.Config{Root: o.root}
	roleArgs, err := RoleArgs(role, args)
	if err != nil {
		return err
	}
	files, err := install.Render(install.Spec{Role: role, Args: roleArgs, Version: version.Version})
	if err != nil {
		return err
	}
	dataDir := install.DataDir(role)
	for _, a := range roleArgs {
		if v, ok := strings.CutPrefix(a, "--data-dir="); ok {
			dataDir = v
		}
	}
	if o.dryRun {
		conflicts, err := cfg.Conflicts(files)
		if err != nil {
			return err
		}
		for _, f := range files {
			fmt.Fprintf(stdout, "# would write %s (mode %#o)\n%s\n", f.Path, f.Mode, f.Data)
		}
		fmt.Fprintf(stdout, "# would create %s (mode 0700) and install this binary as %s\n", dataDir, install.BinaryPath)
		if len(conflicts) > 0 {
			return fmt.Errorf("would refuse to overwrite: %s", strings.Join(conflicts, "; "))
		}
		return nil
	}
	if err := cfg.CheckHost(); err != nil {
		return err
	}
	// Check every file before writing any: a refusal leaves the machine as
	// it was.
	if conflicts, err := cfg.Conflicts(files); err != nil {
		return err
	} else if len(conflicts) > 0 {
		return fmt.Errorf("refusing to overwrite: %s (move it away or remove it first; nothing was written)", strings.Join(conflicts, "; "))
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary to install it: %w", err)
	}
	copied, err := cfg.InstallBinary(exe, install.BinaryPath)
	if err != nil {
		return fmt.Errorf("install %s: %w", install.BinaryPath, err)
	}
	if copied {
		fmt.Fprintf(stdout, "installed %s\n", install.BinaryPath)
	}
	unit := install.UnitName(role)
	current, err := cfg.Current(files)
	if err != nil {
		return err
	}
	if current {
		fmt.Fprintf(stdout, "%s is already installed with these flags: no file changed\n", unit)
	} else {
		if err := cfg.Apply(files); err != nil {
			return err
		}
		for _, f := range files {
			fmt.Fprintf(stdout, "wrote %s\n", f.Path)
		}
	}
	if err := cfg.MakeDataDir(dataDir); err != nil {
		return err
	}
	if !o.start || !systemctlApplies(o.root) {
		fmt.Fprintf(stdout, "start it with: systemctl daemon-reload && systemctl enable --now %s\n", unit)
		return nil
	}
	changed := copied || !current
	if changed {
		if err := systemctl(ctx, stdout, "daemon-reload"); err != nil {
			return err
		}
	}
	if err := systemctl(ctx, stdout, "enable", unit); err != nil {
		return err
	}
	// A changed unit, flag or binary takes effect only in a new process:
	// restart starts a stopped unit and restarts a running one. Unchanged,
	// start leaves a running unit alone. Both return once systemd has the
	// service's READY=1 (Type=notify).
	verb := "start"
	if changed {
		verb = "restart"
	}
	if err := systemctl(ctx, stdout, verb, unit); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s is running (journalctl -u %s)\n", unit, unit)
	return nil
}

// Leftovers are stopped with SIGTERM, then SIGKILL after leftoverGrace;
// leftoverPoll is how often the unit's control group is looked at.
const (
	leftoverGrace = 10 * time.Second
	leftoverPoll  = 100 * time.Millisecond
)

// stopLeftovers ends the processes a stopped unit left in its control group
// (the agent's pods: their shims and containers), which would otherwise
// run on with no unit to account for them: SIGTERM to all of them, SIGKILL
// to what is left after leftoverGrace. systemd drops the control group of
// an inactive unit once it is empty.
func stopLeftovers(ctx context.Context, stdout io.Writer, unit string) error {
	cgroup := func() (string, error) {
		out, err := exec.CommandContext(ctx, "systemctl", "show", "--property=ControlGroup", "--value", unit).Output()
		if err != nil {
			return "", fmt.Errorf("systemctl show %s: %w", unit, err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	wait := func(d time.Duration) (bool, error) {
		deadline := time.NewTimer(d)
		defer deadline.Stop()
		tick := time.NewTicker(leftoverPoll)
		defer tick.Stop()
		for {
			cg, err := cgroup()
			if err != nil || cg == "" {
				return cg == "", err
			}
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-deadline.C:
				return false, nil
			case <-tick.C:
			}
		}
	}
	if cg, err := cgroup(); err != nil || cg == "" {
		return err
	}
	fmt.Fprintf(stdout, "stopping the processes %s left running (its pods)\n", unit)
	for _, sig := range []string{"SIGTERM", "SIGKILL"} {
		// --kill-who: the spelling systemd before 252 knows too.
		if err := systemctl(ctx, io.Discard, "kill", "--kill-who=all", "--signal="+sig, unit); err != nil {
			// They may all have exited since the last look.
			if cg, cgErr := cgroup(); cgErr == nil && cg == "" {
				return nil
			}
			return err
		}
		if gone, err := wait(leftoverGrace); err != nil || gone {
			return err
		}
	}
	return fmt.Errorf("processes of %s still running %v after SIGKILL (see systemctl status %s)", unit, leftoverGrace, unit)
}

func systemctlApplies(root string) bool { return root == "/" || root == "" }

func systemctl(ctx context.Context, stdout io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, "systemctl", args...)
	out, err := cmd.CombinedOutput()
	stdout.Write(out)
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("systemctl %s: exit %d: %s", strings.Join(args, " "), ee.ExitCode(), strings.TrimSpace(string(out)))
		}
		return fmt.Errorf("systemctl %s: %w", strings.Join(args, " "), err)
	}
	return nil
}
