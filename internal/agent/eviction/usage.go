package eviction

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nodeplane/nodeplane/internal/agent/runtime"
)

// ProcUsage measures pods run as process groups: each container's
// processes are the members of the process group its PID leads (the
// process runtime starts every container as a group leader).
type ProcUsage struct {
	// Proc is the proc filesystem ("/proc").
	Proc string
	// PodDirs lists a pod's directories whose bytes and inodes count as
	// its disk use (its logs and emptyDir volumes).
	PodDirs func(rs runtime.PodStatus) []string
	// PageSize is the size of a memory page (default os.Getpagesize()).
	PageSize int64
}

type groupUsage struct{ rss, tasks int64 }

// Snapshot reads every process once and returns a function that measures
// pods against that reading.
func (u ProcUsage) Snapshot() func(rs runtime.PodStatus) Usage {
	groups := u.groups()
	return func(rs runtime.PodStatus) Usage {
		var out Usage
		for _, c := range rs.Containers {
			g := groups[c.PID]
			if c.PID <= 0 {
				g = groupUsage{}
			}
			out.Memory += g.rss
			out.Processes += g.tasks
			out.Containers = append(out.Containers, ContainerUsage{Name: c.Name, Memory: g.rss})
		}
		if u.PodDirs != nil {
			for _, dir := range u.PodDirs(rs) {
				bytes, inodes := du(dir)
				out.Disk += bytes
				out.Inodes += inodes
			}
		}
		return out
	}
}

// groups sums resident memory and tasks per process group from
// /proc/<pid>/stat (fields pgrp, num_threads and rss).
func (u ProcUsage) groups() map[int]groupUsage {
	page := u.PageSize
	if page <= 0 {
		page = int64(os.Getpagesize())
	}
	proc := u.Proc
	if proc == "" {
		proc = "/proc"
	}
	entries, err := os.ReadDir(proc)
	if err != nil {
		return nil
	}
	out := map[int]groupUsage{}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(proc, e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		pgrp, threads, rss, ok := parseStat(string(b))
		if !ok {
			continue
		}
		g := out[pgrp]
		g.rss += rss * page
		g.tasks += threads
		out[pgrp] = g
	}
	return out
}

// parseStat reads pgrp, num_threads and rss (pages) from a
// /proc/<pid>/stat line; the command name may hold spaces and parentheses,
// so fields are counted from the last ')'.
func parseStat(s string) (pgrp int, threads, rss int64, ok bool) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state): pgrp is field 5, num_threads 20, rss 24.
	if len(f) < 22 {
		return 0, 0, 0, false
	}
	p, err1 := strconv.Atoi(f[2])
	t, err2 := strconv.ParseInt(f[17], 10, 64)
	r, err3 := strconv.ParseInt(f[21], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, 0, false
	}
	return p, t, r, true
}

// du returns the bytes (allocated blocks) and inodes beneath dir; symlinks
// are not followed, unreadable entries are skipped.
func du(dir string) (bytes, inodes int64) {
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // gone or unreadable: measure the rest
		}
		inodes++
		if info, err := d.Info(); err == nil {
			bytes += allocated(info)
		}
		return nil
	})
	return bytes, inodes
}
