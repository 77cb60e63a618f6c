package serverapp

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// IdentityFile, in the data dir, holds the name this server campaigns under
// for the controllers' leader election. It is kept across restarts so that
// a server killed while leading (SIGKILL, a crash, a power cut) takes its
// own Lease back at once when it starts again: with a new name every start,
// as upstream's kube-controller-manager has, it waited out the dead
// process's lease (--leader-elect-lease-duration, 15 s) on top of the
// restart, and a pod whose toleration ran out meanwhile was evicted that
// much late (issue 12).
const IdentityFile = "controller-identity"

// leaderIdentity returns the identity to campaign under and a function that
// gives it up. The file is locked (flock, exclusive) for as long as the
// identity is used, so two live processes never share it: a second server
// on the same data dir (which the embedded etcd already refuses) or a copy
// still running campaigns under a fresh random name instead, and says so.
// The kernel drops the lock of a killed process, so its successor gets it.
func leaderIdentity(dataDir string, log *slog.Logger) (string, func()) {
	host, _ := os.Hostname()
	fresh := func() string { return host + "_" + randomHex(4) }
	path := filepath.Join(dataDir, IdentityFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		log.Warn("leader identity not kept across restarts", "file", path, "err", err)
		return fresh(), func() {}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			log.Warn("another process holds this data dir's leader identity; campaigning under a new one", "file", path)
		} else {
			log.Warn("leader identity not kept across restarts", "file", path, "err", err)
		}
		return fresh(), func() {}
	}
	id, err := readOrWriteIdentity(f, fresh)
	if err != nil {
		log.Warn("leader identity not kept across restarts", "file", path, "err", err)
		f.Close()
		return fresh(), func() {}
	}
	return id, func() { f.Close() } // closing drops the lock
}

// readOrWriteIdentity returns the identity stored in f, or stores a new one
// when f is empty or holds something that is not one.
func readOrWriteIdentity(f *os.File, fresh func() string) (string, error) {
	b := make([]byte, 512)
	n, err := f.ReadAt(b, 0)
	if err != nil && n == 0 && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read: %w", err)
	}
	if id := strings.TrimSpace(string(b[:n])); validIdentity(id) {
		return id, nil
	}
	id := fresh()
	if err := f.Truncate(0); err != nil {
		return "", fmt.Errorf("truncate: %w", err)
	}
	if _, err := f.WriteAt([]byte(id+"\n"), 0); err != nil {
		return "", fmt.Errorf("write: %w", err)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("sync: %w", err)
	}
	return id, nil
}

// validIdentity accepts what leaderIdentity writes: printable, no spaces,
// at most a Lease's holderIdentity worth of bytes.
func validIdentity(id string) bool {
	if id == "" || len(id) > 253 {
		return false
	}
	for _, r := range id {
		if r <= ' ' || r > '~' {
			return false
		}
	}
	return true
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
