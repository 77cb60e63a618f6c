package pki

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nodeplane/nodeplane/internal/privdir"
)

// Modes of the files and directory EnsureCluster manages.
const (
	dirMode  fs.FileMode = 0o700
	keyMode  fs.FileMode = 0o600
	certMode fs.FileMode = 0o644
)

// writeFileAtomic replaces path with data so that a reader (or a restart
// after a crash) sees either the old content or the new, never a mix: the
// data goes to a temporary file in the same directory, is synced, gets its
// final mode and is renamed over path; then the directory is synced so the
// rename itself survives a power loss.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("rename %s to %s: %w", tmp, path, err)
	}
	return syncDir(filepath.Dir(path))
}

// createFileAtomic writes data to path only if path does not exist yet, with
// the same crash guarantees as writeFileAtomic. It returns an error matching
// fs.ErrExist if another writer got there first.
func createFileAtomic(path string, data []byte, perm fs.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	// A hard link, unlike a rename, fails when the target exists.
	if err := os.Link(tmp, path); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

// writeTemp writes data with mode perm to a new, synced temporary file next
// to path and returns its name.
func writeTemp(path string, data []byte, perm fs.FileMode) (name string, err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("create temporary file for %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	// CreateTemp uses 0600; set the final mode before any byte is written.
	if err := f.Chmod(perm); err != nil {
		return "", fmt.Errorf("chmod %s: %w", f.Name(), err)
	}
	if _, err := f.Write(data); err != nil {
		return "", fmt.Errorf("write %s: %w", f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("sync %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("close %s: %w", f.Name(), err)
	}
	return f.Name(), nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// readFileIfExists returns the content of path, or ok=false if it does not
// exist. Any other error (permissions, I/O) is returned.
func readFileIfExists(path string) (data []byte, ok bool, err error) {
	data, err = os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", path, err)
	}
	return data, true, nil
}

// restrictKeyMode drops group and other permission bits from an existing
// private key file (for example one restored from a backup with 0644).
func restrictKeyMode(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if info.Mode().Perm()&0o077 == 0 {
		return nil
	}
	if err := os.Chmod(path, keyMode); err != nil {
		return fmt.Errorf("restrict permissions of %s: %w", path, err)
	}
	return nil
}

// WriteFileAtomic replaces path with data (mode perm) so that a reader, or
// a restart after a crash, sees either the old content or the new, never a
// mix. The directory must exist. Agents use it for their own credentials.
func WriteFileAtomic(path string, data []byte, perm fs.FileMode) error {
	return writeFileAtomic(path, data, perm)
}

// EnsurePrivateDir creates dir (and its parents) with mode 0700, or drops
// group and other permission bits from an existing one.
func EnsurePrivateDir(dir string) error {
	_, err := privdir.Ensure(dir)
	return err
}
