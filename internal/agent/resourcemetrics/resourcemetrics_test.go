package resourcemetrics

import (
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeplane/nodeplane/internal/agent/runtime"
)

// stat is a /proc/<pid>/stat line with the given command, pgrp, times and rss.
func stat(pid int, comm string, pgrp, utime, stime, cutime, cstime, rss int) string {
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime prio nice threads itreal start vsize rss ...
	return strings.Join([]string{
		itoa(pid), "(" + comm + ")", "S", "1", itoa(pgrp), "1", "0", "-1", "0", "0", "0", "0", "0",
		itoa(utime), itoa(stime), itoa(cutime), itoa(cstime), "20", "0", "1", "0", "100", "1000", itoa(rss), "0",
	}, " ") + "\n"
}

func itoa(n int) string { return strconv.Itoa(n) }

func write(t *testing.T, root, p, body string) {
	t.Helper()
	full := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func running(name string, pid int) runtime.ContainerStatus {
	return runtime.ContainerStatus{Name: name, PID: pid, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
}

func TestCollect(t *testing.T) {
	root := t.TempDir()
	// Container a leads group 100 (two processes, one with a name holding
	// ") "); container b leads group 200; 300 is not a container's.
	write(t, root, "proc/100/stat", stat(100, "sh", 100, 150, 50, 0, 0, 10))
	write(t, root, "proc/101/stat", stat(101, "odd) (name", 100, 100, 0, 20, 30, 5))
	write(t, root, "proc/200/stat", stat(200, "sleep", 200, 1, 1, 0, 0, 3))
	write(t, root, "proc/300/stat", stat(300, "other", 300, 999, 999, 0, 0, 99))
	write(t, root, "proc/self/stat", "not a pid directory")
	write(t, root, "proc/stat", "cpu  100 10 50 1000 40 5 5 0 0 0\ncpu0 1 1 1 1 1 1 1 1 1 1\n")
	now := time.Unix(1700000000, 0)
	pods := []runtime.PodStatus{
		{Namespace: "default", Name: "web", Containers: []runtime.ContainerStatus{running("a", 100), running("b", 200), {Name: "c"}}},
		{Namespace: "default", Name: "gone", Containers: []runtime.ContainerStatus{running("x", 400)}},
		{Namespace: "default", Name: "killed", Killed: true, Containers: []runtime.ContainerStatus{running("y", 300)}},
	}
	c, err := New(Config{Root: root, Pods: func() []runtime.PodStatus { return pods }, NodeMemory: func() (int64, error) { return 1 << 30, nil },
		PageSize: 4096, Clock: clocktesting.NewFakePassiveClock(now)})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("a container is the sum of its process group, a pod of its running containers", func(t *testing.T) {
		s := c.Collect()
		if len(s.Pods) != 1 || s.Pods[0].Name != "web" {
			t.Fatalf("pods %+v, want only web (gone has no process, killed is being stopped)", s.Pods)
		}
		web := s.Pods[0]
		want := map[string]Usage{"a": {CPUSeconds: 3.5, Memory: 15 * 4096}, "b": {CPUSeconds: 0.02, Memory: 3 * 4096}}
		if len(web.Containers) != 2 {
			t.Fatalf("containers %+v, want a and b (c is not running)", web.Containers)
		}
		for _, ct := range web.Containers {
			if ct.Usage != want[ct.Name] {
				t.Errorf("container %s: %+v, want %+v", ct.Name, ct.Usage, want[ct.Name])
			}
		}
		if web.CPUSeconds != 3.52 || web.Memory != 18*4096 {
			t.Errorf("pod usage %+v, want 3.52 s and %d bytes", web.Usage, 18*4096)
		}
	})

	t.Run("the node's CPU is /proc/stat's busy time without a cgroup cpu.stat", func(t *testing.T) {
		s := c.Collect()
		if s.NodeErr != nil || s.Node.CPUSeconds != 1.7 || s.Node.Memory != 1<<30 {
			t.Errorf("node %+v err %v, want 1.7 s (100+10+50+5+5 ticks) and 1 GiB", s.Node, s.NodeErr)
		}
	})

	t.Run("the node's CPU is the cgroup's usage_usec when there is one", func(t *testing.T) {
		write(t, root, "sys/fs/cgroup/cpu.stat", "usage_usec 2500000\nuser_usec 2000000\n")
		defer os.Remove(filepath.Join(root, "sys/fs/cgroup/cpu.stat"))
		if s := c.Collect(); s.Node.CPUSeconds != 2.5 {
			t.Errorf("node CPU %v, want 2.5", s.Node.CPUSeconds)
		}
	})

	t.Run("the handler writes the kubelet's families with the sample time", func(t *testing.T) {
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/resource", nil))
		body := rec.Body.String()
		for _, line := range []string{
			`container_cpu_usage_seconds_total{container="a",namespace="default",pod="web"} 3.5 1700000000000`,
			`container_memory_working_set_bytes{container="b",namespace="default",pod="web"} 12288 1700000000000`,
			`pod_cpu_usage_seconds_total{namespace="default",pod="web"} 3.52 1700000000000`,
			`node_cpu_usage_seconds_total 1.7 1700000000000`,
			`node_memory_working_set_bytes 1.073741824e+09 1700000000000`,
			`scrape_error 0 1700000000000`,
		} {
			if !strings.Contains(body, line+"\n") {
				t.Errorf("no line %q in:\n%s", line, body)
			}
		}
	})

	t.Run("a node that cannot be measured is left out and scrape_error is 1", func(t *testing.T) {
		bad, _ := New(Config{Root: root, Pods: func() []runtime.PodStatus { return nil }, NodeMemory: func() (int64, error) { return 0, errors.New("no meminfo") }})
		rec := httptest.NewRecorder()
		bad.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/resource", nil))
		if strings.Contains(rec.Body.String(), "node_cpu_usage_seconds_total ") || !strings.Contains(rec.Body.String(), "scrape_error 1 ") {
			t.Errorf("body:\n%s", rec.Body.String())
		}
	})
}
