package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/utils/clock"
)

// ProcStats is a process's CPU use and memory over the measured phase.
type ProcStats struct {
	PID int `json:"pid,omitempty"`
	// CPUSeconds is user+system CPU time used during the phase; CPUCores
	// divides it by the phase's wall time.
	CPUSeconds float64 `json:"cpuSeconds"`
	CPUCores   float64 `json:"cpuCores"`
	// RSS at the start and end of the phase, and the largest sampled
	// (once a second) in between.
	RSSStartBytes int64 `json:"rssStartBytes,omitempty"`
	RSSEndBytes   int64 `json:"rssEndBytes,omitempty"`
	RSSMaxBytes   int64 `json:"rssMaxBytes,omitempty"`
	// HWMBytes is the kernel's peak RSS since the process started.
	HWMBytes int64 `json:"hwmBytes,omitempty"`
	// RSSAnonEndBytes and RSSFileEndBytes split the end RSS into anonymous
	// memory (the Go heap, stacks) and file pages mapped in (etcd's bbolt
	// database is mmapped: its pages count as RSS but are page cache the
	// kernel can reclaim).
	RSSAnonEndBytes int64 `json:"rssAnonEndBytes,omitempty"`
	RSSFileEndBytes int64 `json:"rssFileEndBytes,omitempty"`
}

// userHZ is the unit of /proc/<pid>/stat CPU times (USER_HZ, 100 on every
// Linux architecture Go supports).
const userHZ = 100

// procSample is one reading of /proc/<pid>.
type procSample struct {
	cpu                  time.Duration
	rss, hwm, anon, file int64
}

// readProc reads the CPU time and memory of pid from /proc.
func readProc(pid int) (procSample, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procSample{}, err
	}
	cpu, err := parseStatCPU(stat)
	if err != nil {
		return procSample{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procSample{}, err
	}
	m := parseStatusMemory(status)
	return procSample{cpu: cpu, rss: m["VmRSS"], hwm: m["VmHWM"], anon: m["RssAnon"], file: m["RssFile"]}, nil
}

// parseStatCPU returns utime+stime from the contents of /proc/<pid>/stat.
// The command name (field 2) is in parentheses and may contain spaces, so
// fields are counted from the last ')'.
func parseStatCPU(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name")
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// parseStatusMemory returns the VmRSS, VmHWM, RssAnon and RssFile lines of
// /proc/<pid>/status in bytes, by name.
func parseStatusMemory(status []byte) map[string]int64 {
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch name {
		case "VmRSS", "VmHWM", "RssAnon", "RssFile":
		default:
			continue
		}
		f := strings.Fields(value)
		if len(f) == 0 {
			continue
		}
		if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
			out[name] = kb << 10
		}
	}
	return out
}

// procWatcher samples a process once a second from start until stop.
type procWatcher struct {
	pid   int
	clock clock.WithTicker
	start procSample
	t0    time.Time

	mu     sync.Mutex
	maxRSS int64
	stopFn context.CancelFunc
	done   chan struct{}
}

func startProcWatcher(pid int, clk clock.WithTicker) (*procWatcher, error) {
	s, err := readProc(pid)
	if err != nil {
		return nil, fmt.Errorf("server pid %d: %w", pid, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &procWatcher{pid: pid, clock: clk, start: s, t0: clk.Now(), maxRSS: s.rss, stopFn: cancel, done: make(chan struct{})}
	go w.run(ctx)
	return w, nil
}

func (w *procWatcher) run(ctx context.Context) {
	defer close(w.done)
	t := w.clock.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if s, err := readProc(w.pid); err == nil {
				w.mu.Lock()
				w.maxRSS = max(w.maxRSS, s.rss)
				w.mu.Unlock()
			}
		}
	}
}

// stop ends sampling and returns the stats since start.
func (w *procWatcher) stop() ProcStats {
	w.stopFn()
	<-w.done
	end, err := readProc(w.pid)
	elapsed := w.clock.Since(w.t0)
	w.mu.Lock()
	defer w.mu.Unlock()
	st := ProcStats{PID: w.pid, RSSStartBytes: w.start.rss, RSSMaxBytes: w.maxRSS}
	if err != nil {
		return st
	}
	st.RSSEndBytes, st.HWMBytes = end.rss, end.hwm
	st.RSSAnonEndBytes, st.RSSFileEndBytes = end.anon, end.file
	st.RSSMaxBytes = max(st.RSSMaxBytes, end.rss)
	st.CPUSeconds = (end.cpu - w.start.cpu).Seconds()
	if elapsed > 0 {
		st.CPUCores = st.CPUSeconds / elapsed.Seconds()
	}
	return st
}

// selfCPU returns this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// HostStats is the machine's CPU use over the measured phase.
type HostStats struct {
	// Cores is the number of CPUs in /proc/stat.
	Cores int `json:"cores"`
	// BusyCores is the average number of CPUs not idle (nor waiting for
	// I/O), over all processes.
	BusyCores float64 `json:"busyCores"`
}

// hostCPU is one reading of the "cpu" line of /proc/stat, in ticks.
type hostCPU struct {
	total, idle int64
	cores       int
}

func readHostCPU() (hostCPU, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return hostCPU{}, err
	}
	return parseHostCPU(data)
}

// parseHostCPU parses /proc/stat: the first line "cpu user nice system
// idle iowait irq softirq steal …" and one "cpuN" line per CPU.
func parseHostCPU(data []byte) (hostCPU, error) {
	var h hostCPU
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		if f[0] != "cpu" {
			h.cores++
			continue
		}
		if len(f) < 6 {
			return hostCPU{}, fmt.Errorf("/proc/stat: short cpu line %q", sc.Text())
		}
		for i, v := range f[1:] {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return hostCPU{}, fmt.Errorf("/proc/stat: %w", err)
			}
			if i >= 8 { // guest and guest_nice are already in user and nice
				break
			}
			h.total += n
			if i == 3 || i == 4 { // idle, iowait
				h.idle += n
			}
		}
	}
	if h.total == 0 {
		return hostCPU{}, fmt.Errorf("/proc/stat: no cpu line")
	}
	return h, nil
}

// since returns the machine's CPU use between start and h.
func (h hostCPU) since(start hostCPU) *HostStats {
	total := h.total - start.total
	if total <= 0 || h.cores == 0 {
		return nil
	}
	busy := float64(total-(h.idle-start.idle)) / float64(total)
	return &HostStats{Cores: h.cores, BusyCores: busy * float64(h.cores)}
}
