package process

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// inMountNamespace makes the started process begin in a new mount namespace.
func inMountNamespace(attr *syscall.SysProcAttr) error {
	attr.Cloneflags |= syscall.CLONE_NEWNS
	return nil
}

// mountExecMain is the mount helper (see mounts.go): it runs in the new
// namespace, mounts, and becomes the container's program. It returns only
// on failure, having written why to descriptor 3.
func mountExecMain(specPath string) int {
	report := os.NewFile(readyFD, "mount-report")
	fail := func(err error) int {
		if report != nil {
			_, _ = report.WriteString(err.Error())
		}
		fmt.Fprintln(os.Stderr, err)
		return exitCodeStartError
	}
	var spec shimSpec
	if err := readJSON(specPath, &spec); err != nil {
		return fail(err)
	}
	if err := applyMounts(spec.Mounts); err != nil {
		return fail(err)
	}
	if err := os.Chdir(spec.Dir); err != nil {
		return fail(fmt.Errorf("chdir to working directory: %w", err))
	}
	syscall.CloseOnExec(readyFD)
	err := syscall.Exec(spec.Path, spec.Argv, spec.Env)
	return fail(fmt.Errorf("exec %s: %w", spec.Path, err))
}

// applyMounts makes the namespace's mounts private, then bind-mounts each
// volume.
func applyMounts(mounts []mountSpec) error {
	if err := syscall.Mount("none", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	for _, m := range mounts {
		fi, err := os.Stat(m.Source)
		if err != nil {
			return fmt.Errorf("mount volume at %s: %w", m.Target, err)
		}
		if err := mountPoint(m.Target, fi.IsDir()); err != nil {
			return fmt.Errorf("mount volume at %s: create mount point: %w", m.Target, err)
		}
		if err := syscall.Mount(m.Source, m.Target, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("bind mount %s at %s: %w", m.Source, m.Target, err)
		}
		if m.ReadOnly {
			// A remount must keep the flags the source's mount has
			// (nosuid, nodev, noexec), or the kernel refuses it.
			flags := uintptr(syscall.MS_BIND | syscall.MS_REMOUNT | syscall.MS_RDONLY)
			var st syscall.Statfs_t
			if syscall.Statfs(m.Target, &st) == nil {
				for stFlag, msFlag := range map[int64]uintptr{
					0x2: syscall.MS_NOSUID, 0x4: syscall.MS_NODEV, 0x8: syscall.MS_NOEXEC,
					0x400: syscall.MS_NOATIME, 0x800: syscall.MS_NODIRATIME, 0x1000: syscall.MS_RELATIME,
				} {
					if int64(st.Flags)&stFlag != 0 {
						flags |= msFlag
					}
				}
			}
			if err := syscall.Mount("", m.Target, "", flags, ""); err != nil {
				return fmt.Errorf("make %s read-only: %w", m.Target, err)
			}
		}
	}
	return nil
}

// mountPoint makes sure something of the right kind is at target.
func mountPoint(target string, dir bool) error {
	if fi, err := os.Stat(target); err == nil {
		if fi.IsDir() != dir {
			if dir {
				return fmt.Errorf("%s is not a directory", target)
			}
			return fmt.Errorf("%s is a directory, the volume a file", target)
		}
		return nil
	}
	if dir {
		return os.MkdirAll(target, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}
