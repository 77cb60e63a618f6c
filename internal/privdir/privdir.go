// Package privdir makes directories that only their owner can enter: the
// server's data dir, the embedded etcd's directories and the key
// directories of servers and agents. It creates a missing directory with
// mode 0700 and tightens an existing one with group or other permission
// bits, reporting what it found so that the caller can say so.
package privdir

import (
	"fmt"
	"io/fs"
	"os"
)

// Mode is the mode of a private directory.
const Mode fs.FileMode = 0o700

// Ensure creates dir (and its parents) with Mode, or drops the group and
// other permission bits of an existing directory. loosened is the mode it
// had when it was tightened, 0 when nothing needed to change.
func Ensure(dir string) (loosened fs.FileMode, err error) {
	if err := os.MkdirAll(dir, Mode); err != nil {
		return 0, fmt.Errorf("create directory %s: %w", dir, err)
	}
	info, err := os.Stat(dir)
	if err != nil {
		return 0, fmt.Errorf("stat directory %s: %w", dir, err)
	}
	if !info.IsDir() {
		return 0, fmt.Errorf("%s is not a directory", dir)
	}
	perm := info.Mode().Perm()
	if perm&0o077 == 0 {
		return 0, nil
	}
	if err := os.Chmod(dir, perm&^0o077); err != nil {
		return 0, fmt.Errorf("tighten %s from %#o: %w", dir, perm, err)
	}
	return perm, nil
}
