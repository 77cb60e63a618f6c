// Package resourcemetrics measures the CPU and memory used by the node and
// by each pod and container the agent runs, and serves them at GET
// /metrics/resource on the agent's HTTPS endpoint in the kubelet's format
// (Prometheus text, with a timestamp on every sample):
//
//	node_cpu_usage_seconds_total, node_memory_working_set_bytes
//	pod_cpu_usage_seconds_total{namespace,pod}, pod_memory_working_set_bytes{namespace,pod}
//	container_cpu_usage_seconds_total{container,namespace,pod}, container_memory_working_set_bytes{...}
//
// The API server's scraper reads them and turns two samples into the CPU
// rates of metrics.k8s.io. How each number is measured:
//
//   - a container is the process group its runtime started (the container's
//     process leads it, runtime.ContainerStatus.PID): its CPU is the sum of
//     utime+stime+cutime+cstime of every live process in the group
//     (/proc/<pid>/stat, in USER_HZ = 100 ticks per second), its memory the
//     sum of their resident set sizes. A container that is not running
//     is left out. A pod is the sum of its containers.
//   - the node's CPU is usage_usec of the cgroup v2 mounted at
//     /sys/fs/cgroup (the root cgroup on a machine, the agent's own in a
//     container) when it is there, else the busy time of the first line of
//     /proc/stat; its memory is what package host computes for
//     memory.available: capacity minus available, i.e. the working set.
//
// Files are read beneath Config.Root, so tests use a fake tree.
package resourcemetrics

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/agent/runtime"
)

// clockTicks is USER_HZ, the unit of the times in /proc/<pid>/stat; Linux
// reports 100 on every architecture it supports.
const clockTicks = 100

// Config configures a Collector.
type Config struct {
	// Root is where /proc and /sys are read ("/" when empty).
	Root string
	// Pods lists the pods the runtime runs (runtime.Runtime.Pods).
	Pods func() []runtime.PodStatus
	// NodeMemory returns the node's memory working set in bytes.
	NodeMemory func() (int64, error)
	// PageSize is the size of a memory page (os.Getpagesize when 0).
	PageSize int64
	Clock    clock.PassiveClock
	Logger   *slog.Logger
}

// Collector measures usage on each request; it keeps no state.
type Collector struct {
	cfg Config
}

// New returns a Collector.
func New(cfg Config) (*Collector, error) {
	if cfg.Pods == nil || cfg.NodeMemory == nil {
		return nil, errors.New("resourcemetrics: Pods and NodeMemory are required")
	}
	if cfg.Root == "" {
		cfg.Root = "/"
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = int64(os.Getpagesize())
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Collector{cfg: cfg}, nil
}

// Usage is one measurement: cumulative CPU in core-seconds and the memory
// working set in bytes.
type Usage struct {
	CPUSeconds float64
	Memory     int64
}

// ContainerUsage is one running container's usage.
type ContainerUsage struct {
	Name string
	Usage
}

// PodUsage is one pod's usage and its running containers'.
type PodUsage struct {
	Namespace, Name string
	Usage
	Containers []ContainerUsage
}

// Snapshot is everything measured at Time.
type Snapshot struct {
	Time time.Time
	// Node is valid when NodeErr is nil.
	Node    Usage
	NodeErr error
	Pods    []PodUsage
}

// procStat is what one /proc/<pid>/stat says.
type procStat struct {
	pgrp  int
	ticks int64 // utime+stime+cutime+cstime
	rss   int64 // pages
}

// Collect measures the node and every running container now.
func (c *Collector) Collect() Snapshot {
	s := Snapshot{Time: c.cfg.Clock.Now()}
	s.Node, s.NodeErr = c.node()
	groups := c.processGroups()
	for _, p := range c.cfg.Pods() {
		if p.Killed {
			continue
		}
		pu := PodUsage{Namespace: p.Namespace, Name: p.Name}
		for _, ct := range append(append([]runtime.ContainerStatus{}, p.InitContainers...), p.Containers...) {
			if ct.State.Running == nil || ct.PID <= 0 {
				continue
			}
			g, ok := groups[ct.PID]
			if !ok {
				continue // exited since the runtime looked
			}
			u := Usage{CPUSeconds: float64(g.ticks) / clockTicks, Memory: g.rss * c.cfg.PageSize}
			pu.Containers = append(pu.Containers, ContainerUsage{Name: ct.Name, Usage: u})
			pu.CPUSeconds += u.CPUSeconds
			pu.Memory += u.Memory
		}
		if len(pu.Containers) > 0 {
			s.Pods = append(s.Pods, pu)
		}
	}
	sort.Slice(s.Pods, func(i, j int) bool {
		if s.Pods[i].Namespace != s.Pods[j].Namespace {
			return s.Pods[i].Namespace < s.Pods[j].Namespace
		}
		return s.Pods[i].Name < s.Pods[j].Name
	})
	return s
}

// processGroups sums /proc/<pid>/stat by process group.
func (c *Collector) processGroups() map[int]procStat {
	out := map[int]procStat{}
	entries, err := os.ReadDir(filepath.Join(c.cfg.Root, "proc"))
	if err != nil {
		c.cfg.Logger.Debug("read /proc", "err", err)
		return out
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(c.cfg.Root, "proc", e.Name(), "stat"))
		if err != nil {
			continue // the process exited meanwhile
		}
		st, err := parseProcStat(data)
		if err != nil {
			c.cfg.Logger.Debug("parse stat", "pid", e.Name(), "err", err)
			continue
		}
		g := out[st.pgrp]
		g.ticks += st.ticks
		g.rss += st.rss
		out[st.pgrp] = g
	}
	return out
}

// parseProcStat reads /proc/<pid>/stat. The command name (field 2) may hold
// spaces and parentheses, so the fields are counted after its last ')'.
func parseProcStat(data []byte) (procStat, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procStat{}, errors.New("no ')' after the command name")
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state): field n is f[n-3].
	if len(f) < 22 {
		return procStat{}, fmt.Errorf("%d fields after the command name, want at least 22", len(f))
	}
	num := func(field int) (int64, error) { return strconv.ParseInt(f[field-3], 10, 64) }
	var st procStat
	pgrp, err := num(5)
	if err != nil {
		return st, fmt.Errorf("pgrp: %w", err)
	}
	st.pgrp = int(pgrp)
	for _, field := range []int{14, 15, 16, 17} { // utime stime cutime cstime
		n, err := num(field)
		if err != nil {
			return st, fmt.Errorf("field %d: %w", field, err)
		}
		st.ticks += n
	}
	if st.rss, err = num(24); err != nil {
		return st, fmt.Errorf("rss: %w", err)
	}
	return st, nil
}

// node measures the node's CPU and memory.
func (c *Collector) node() (Usage, error) {
	var u Usage
	cpu, err := c.nodeCPU()
	if err != nil {
		return u, fmt.Errorf("node cpu: %w", err)
	}
	mem, err := c.cfg.NodeMemory()
	if err != nil {
		return u, fmt.Errorf("node memory: %w", err)
	}
	return Usage{CPUSeconds: cpu, Memory: mem}, nil
}

func (c *Collector) nodeCPU() (float64, error) {
	if data, err := os.ReadFile(filepath.Join(c.cfg.Root, "sys/fs/cgroup/cpu.stat")); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				if err != nil {
					return 0, fmt.Errorf("parse usage_usec in cpu.stat: %w", err)
				}
				return float64(n) / 1e6, nil
			}
		}
	}
	data, err := os.ReadFile(filepath.Join(c.cfg.Root, "proc/stat"))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("unexpected first line of /proc/stat: %q", line)
	}
	// user nice system idle iowait irq softirq steal: busy is all but idle
	// and iowait (guest time is already counted in user).
	var busy int64
	for i, v := range f[1:min(len(f), 9)] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse /proc/stat: %w", err)
		}
		if i != 3 && i != 4 {
			busy += n
		}
	}
	return float64(busy) / clockTicks, nil
}

// ServeHTTP answers GET /metrics/resource.
func (c *Collector) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s := c.Collect()
	if s.NodeErr != nil {
		c.cfg.Logger.Warn("resource metrics: cannot measure the node", "err", s.NodeErr)
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_ = Write(w, s)
}

// Write renders a snapshot in the kubelet's /metrics/resource format.
func Write(w io.Writer, s Snapshot) error {
	ts := s.Time.UnixMilli()
	var b strings.Builder
	family := func(name, typ, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	sample := func(name, labels string, v float64) {
		if labels != "" {
			labels = "{" + labels + "}"
		}
		fmt.Fprintf(&b, "%s%s %s %d\n", name, labels, strconv.FormatFloat(v, 'g', -1, 64), ts)
	}
	podLabels := func(p PodUsage) string {
		return fmt.Sprintf("namespace=%s,pod=%s", quote(p.Namespace), quote(p.Name))
	}
	family("container_cpu_usage_seconds_total", "counter", "[STABLE] Cumulative cpu time consumed by the container in core-seconds")
	for _, p := range s.Pods {
		for _, ct := range p.Containers {
			sample("container_cpu_usage_seconds_total", "container="+quote(ct.Name)+","+podLabels(p), ct.CPUSeconds)
		}
	}
	family("container_memory_working_set_bytes", "gauge", "[STABLE] Current working set of the container in bytes")
	for _, p := range s.Pods {
		for _, ct := range p.Containers {
			sample("container_memory_working_set_bytes", "container="+quote(ct.Name)+","+podLabels(p), float64(ct.Memory))
		}
	}
	if s.NodeErr == nil {
		family("node_cpu_usage_seconds_total", "counter", "[STABLE] Cumulative cpu time consumed by the node in core-seconds")
		sample("node_cpu_usage_seconds_total", "", s.Node.CPUSeconds)
		family("node_memory_working_set_bytes", "gauge", "[STABLE] Current working set of the node in bytes")
		sample("node_memory_working_set_bytes", "", float64(s.Node.Memory))
	}
	family("pod_cpu_usage_seconds_total", "counter", "[STABLE] Cumulative cpu time consumed by the pod in core-seconds")
	for _, p := range s.Pods {
		sample("pod_cpu_usage_seconds_total", podLabels(p), p.CPUSeconds)
	}
	family("pod_memory_working_set_bytes", "gauge", "[STABLE] Current working set of the pod in bytes")
	for _, p := range s.Pods {
		sample("pod_memory_working_set_bytes", podLabels(p), float64(p.Memory))
	}
	scrapeErr := 0.0
	if s.NodeErr != nil {
		scrapeErr = 1
	}
	family("scrape_error", "gauge", "[ALPHA] 1 if there was an error while getting container metrics, 0 otherwise")
	sample("scrape_error", "", scrapeErr)
	_, err := io.WriteString(w, b.String())
	return err
}

// quote writes a label value with the text format's escapes.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}
