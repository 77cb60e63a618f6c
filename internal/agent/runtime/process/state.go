package process

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// On-disk layout under Config.StateDir:
//
//	pods/<uid>/pod.json                   the pod as synced
//	pods/<uid>/killed                     present once KillPod was called
//	pods/<uid>/volumes.json               the prepared volumes (runtime.Volume by name)
//	pods/<uid>/<container>/state.json     the runtime's record (record)
//	pods/<uid>/<container>/<n>.spec.json  what instance n runs (shimSpec)
//	pods/<uid>/<container>/<n>.run        instance n started (runInfo, by the shim)
//	pods/<uid>/<container>/<n>.exit       instance n ended (exitInfo, by the shim)
//	pods/<uid>/<container>/<n>.log        instance n's output, CRI format
//
// n is the instance number, which is also the container's restart count.
// Files of instances older than n-1 are deleted when n starts. Writes are
// atomic (temporary file + rename) but not fsynced: after a machine crash
// the processes are gone anyway.

const (
	podFile     = "pod.json"
	volumesFile = "volumes.json"
	killedFile  = "killed"
	recordFile  = "state.json"
)

// Instance states in record.State.
const (
	stateNone     = ""         // never started
	stateStarting = "starting" // shim being launched
	stateRunning  = "running"
	stateExited   = "exited"
)

// record is the runtime's persisted view of one container.
type record struct {
	// Instance is the current (or last) instance, -1 before the first start.
	Instance int    `json:"instance"`
	State    string `json:"state"`
	ImageID  string `json:"imageID,omitempty"`
	// StartedAt is when the current instance started (the shim's clock).
	StartedAt time.Time `json:"startedAt,omitzero"`
	// Term is how the current instance ended (State exited).
	Term *exitInfo `json:"term,omitempty"`
	// LastTerm is how the previous instance ended.
	LastTerm *exitInfo `json:"lastTerm,omitempty"`
	// Backoff is the current restart back-off (0: the next restart is
	// immediate).
	Backoff time.Duration `json:"backoff,omitempty"`
	// LaunchedAt and ExitSeenAt are the runtime clock's times of the
	// current instance's start and of noticing its exit; back-off is
	// measured on them.
	LaunchedAt time.Time `json:"launchedAt,omitzero"`
	ExitSeenAt time.Time `json:"exitSeenAt,omitzero"`
}

func (r *Runtime) podDir(uid types.UID) string {
	return filepath.Join(r.cfg.StateDir, "pods", string(uid))
}

func instanceFile(dir string, n int, suffix string) string {
	return filepath.Join(dir, strconv.Itoa(n)+suffix)
}

// removeInstance deletes an instance's files (missing ones are fine).
func removeInstance(dir string, n int) {
	if n < 0 {
		return
	}
	for _, s := range []string{".spec.json", ".run", ".exit", ".log"} {
		_ = os.Remove(instanceFile(dir, n, s))
	}
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// loadPods reads every pod under StateDir (see adopt for what happens to
// them next). Unreadable pods are logged and skipped.
func (r *Runtime) loadPods() error {
	root := filepath.Join(r.cfg.StateDir, "pods")
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read state dir: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		uid := types.UID(e.Name())
		p, err := r.loadPod(uid)
		if err != nil {
			r.log.Warn("skipping unreadable pod state", "uid", uid, "err", err)
			continue
		}
		r.pods[uid] = p
	}
	return nil
}

func (r *Runtime) loadPod(uid types.UID) (*pod, error) {
	dir := r.podDir(uid)
	var spec corev1.Pod
	if err := readJSON(filepath.Join(dir, podFile), &spec); err != nil {
		return nil, err
	}
	p := newPod(&spec, dir)
	p.killed = exists(filepath.Join(dir, killedFile))
	if err := readJSON(filepath.Join(dir, volumesFile), &p.volumes); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, c := range p.all() {
		err := readJSON(filepath.Join(c.dir, recordFile), &c.rec)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if c.rec.State == stateRunning || c.rec.State == stateStarting {
			var info runInfo
			if err := readJSON(instanceFile(c.dir, c.rec.Instance, ".run"), &info); err == nil {
				c.run = &info
				c.rec.State = stateRunning
				c.rec.StartedAt = info.StartedAt
			}
		}
	}
	return p, nil
}

func (c *container) save() error {
	return writeJSON(filepath.Join(c.dir, recordFile), c.rec)
}
