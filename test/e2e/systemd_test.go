package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// hostSystemd is the systemd binary the test boots in a container, with the
// host's /usr (Debian's merged /usr: /lib is /usr/lib).
const hostSystemd = "/usr/lib/systemd/systemd"

// systemdImage builds (once per test binary) an image FROM scratch that is
// only a root skeleton: the merged-/usr symlinks and a minimal /etc. The
// host's /usr is bind-mounted read-only when it runs, so systemd, dbus,
// logind, systemctl and coreutils are the host's own.
var systemdImage = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "nodeplane-systemd-image")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	root := filepath.Join(dir, "rootfs")
	for _, d := range []string{"etc", "usr", "run", "tmp", "var", "proc", "sys", "dev", "root", "opt"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return "", err
		}
	}
	for link, target := range map[string]string{"bin": "usr/bin", "sbin": "usr/sbin", "lib": "usr/lib", "lib64": "usr/lib64"} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			return "", err
		}
	}
	files := map[string]string{
		"etc/os-release": "NAME=\"nodeplane e2e\"\nID=debian\nPRETTY_NAME=\"nodeplane e2e (systemd in Docker)\"\n",
		// root, and the user dbus-daemon drops to.
		"etc/passwd":        "root:x:0:0:root:/root:/bin/sh\nmessagebus:x:100:101::/nonexistent:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"etc/group":         "root:x:0:\nmessagebus:x:101:\nnogroup:x:65534:\n",
		"etc/nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n",
		// Empty: systemd makes up a machine ID at boot.
		"etc/machine-id": "",
	}
	for p, data := range files {
		if err := os.WriteFile(filepath.Join(root, p), []byte(data), 0o644); err != nil {
			return "", err
		}
	}
	// SIGRTMIN+3 is systemd's "halt" request: docker stop shuts it down.
	dockerfile := "FROM scratch\nCOPY rootfs/ /\nENV container=docker\nSTOPSIGNAL SIGRTMIN+3\nCMD [\"" + hostSystemd + "\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return "", err
	}
	const tag = "nodeplane-e2e-systemd:latest"
	if out, err := exec.Command("docker", "build", "-q", "-t", tag, dir).CombinedOutput(); err != nil {
		return "", fmt.Errorf("docker build: %v\n%s", err, out)
	}
	return tag, nil
})

// needHostSystemd skips (fails under CI=true) when the host has no systemd
// to boot in a container.
func needHostSystemd(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(hostSystemd); err == nil {
		if _, err := os.Stat("/usr/bin/systemctl"); err == nil {
			return
		}
	}
	reason := fmt.Sprintf("needs systemd installed on the host (%s, /usr/bin/systemctl) to boot it in a container", hostSystemd)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true runs every tier)", reason)
	}
	t.Skip(reason)
}

// machine is a container booted with systemd as PID 1.
type machine struct {
	t    *testing.T
	name string
}

// execAs runs argv in the machine (as root unless user is set) and returns its
// stdout, stderr and exit code; it fails the test only if docker itself
// cannot run it in time.
func (m *machine) execAs(user string, timeout time.Duration, argv ...string) cliResult {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args := []string{"exec"}
	if user != "" {
		args = append(args, "-u", user)
	}
	args = append(append(args, m.name), argv...)
	cmd := exec.CommandContext(ctx, "docker", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	res := cliResult{stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
	if ctx.Err() != nil {
		m.t.Fatalf("%s still running after %v\nstdout:\n%s\nstderr:\n%s", strings.Join(argv, " "), timeout, res.stdout, res.stderr)
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	case err != nil:
		m.t.Fatalf("docker exec %s: %v", strings.Join(argv, " "), err)
	}
	return res
}

// exec runs argv in the machine as root.
func (m *machine) exec(timeout time.Duration, argv ...string) cliResult {
	m.t.Helper()
	return m.execAs("", timeout, argv...)
}

// must runs argv and fails the test unless it exits 0.
func (m *machine) must(timeout time.Duration, argv ...string) string {
	m.t.Helper()
	res := m.exec(timeout, argv...)
	if res.code != 0 {
		m.t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(argv, " "), res.code, res.stdout, res.stderr)
	}
	return res.stdout
}

// show returns the unit's properties (systemctl show), timestamps in UTC
// with microseconds.
func (m *machine) show(unit string, props ...string) map[string]string {
	m.t.Helper()
	out := m.must(30*time.Second, "systemctl", "show", "--timestamp=us+utc", "-p", strings.Join(props, ","), unit)
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	return got
}

// readFile returns a file's content in the machine and whether it exists.
func (m *machine) readFile(path string) (string, bool) {
	m.t.Helper()
	res := m.exec(30*time.Second, "cat", path)
	return res.stdout, res.code == 0
}

// journal is the machine's log of the nodeplane units, for failures.
func (m *machine) journal() string {
	out, _ := exec.Command("docker", "exec", m.name, "journalctl", "--no-pager", "-o", "short-precise",
		"-u", "nodeplane-server.service", "-u", "nodeplane-agent.service").CombinedOutput()
	return string(out)
}

// systemdTimestamp parses a `systemctl show --timestamp=us+utc` value.
func systemdTimestamp(t *testing.T, v string) time.Time {
	t.Helper()
	ts, err := time.Parse("Mon 2006-01-02 15:04:05.999999 MST", v)
	if err != nil {
		t.Fatalf("systemd timestamp %q: %v", v, err)
	}
	return ts
}

// readyzWatch polls /readyz at url until it answers ok and records, for
// each request that did not, the time just before it was sent: the server
// was not ready then.
type readyzWatch struct {
	mu       sync.Mutex
	lastFail time.Time
	firstOK  time.Time
	done     chan struct{}
}

func watchReadyz(ctx context.Context, url string) *readyzWatch {
	w := &readyzWatch{done: make(chan struct{})}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, // only the answer matters here
		DisableKeepAlives: true,
	}}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			sent := time.Now()
			ok := false
			if resp, err := hc.Get(url); err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				ok = resp.StatusCode == http.StatusOK && string(body) == "ok"
			}
			w.mu.Lock()
			if ok {
				w.firstOK = sent
				w.mu.Unlock()
				return
			}
			w.lastFail = sent
			w.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond): // poll interval
			}
		}
	}()
	return w
}

// pidStart is a process's start time in clock ticks since boot
// (/proc/PID/stat field 22): with the PID it names one process, whatever
// the PID is reused for later.
func (m *machine) pidStart(pid string) (string, bool) {
	m.t.Helper()
	stat, ok := m.readFile("/proc/" + pid + "/stat")
	if !ok {
		return "", false
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	_, rest, found := strings.Cut(stat, ") ")
	fields := strings.Fields(rest)
	if !found || len(fields) < 20 {
		m.t.Fatalf("/proc/%s/stat: %q", pid, stat)
	}
	return fields[19], true
}

// TestSystemdInstall boots systemd as PID 1 in a container (the host's
// /usr, a FROM-scratch root) and runs nodeplane there as an operator
// would: `nodeplane install server` returns once systemd has the server's
// READY=1, sent only after /readyz answers; `nodeplane install agent`
// registers a Node that goes Ready and holds logind's delay inhibitor; a
// pod's process survives `systemctl restart nodeplane-agent`; the server
// stops cleanly; `nodeplane uninstall` leaves no unit and no process; and
// the refusals (not root, a unit nodeplane did not write) change nothing.
func TestSystemdInstall(t *testing.T) {
	needDocker(t)
	needHostSystemd(t)
	image, err := systemdImage()
	if err != nil {
		t.Fatalf("build the systemd image: %v", err)
	}
	const nodeName = "systemd-node"
	name := fmt.Sprintf("np-systemd-%d", time.Now().UnixNano()%1e9)
	// CAP_SYS_ADMIN lets systemd mount what it needs; its own cgroup
	// namespace gives it a cgroup tree to manage; /usr/local is writable
	// (nodeplane install copies itself to /usr/local/bin) over the
	// read-only host /usr.
	docker(t, "run", "-d", "--name", name, "--hostname", nodeName,
		"--cap-add", "SYS_ADMIN", "--cgroupns", "private",
		"--tmpfs", "/run", "--tmpfs", "/run/lock", "--tmpfs", "/tmp", "--tmpfs", "/usr/local:exec",
		"-v", "/usr:/usr:ro", "-v", binary+":/opt/nodeplane:ro",
		"-p", "127.0.0.1::6443", image)
	m := &machine{t: t, name: name}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("journal of the nodeplane units:\n%s", m.journal())
		}
		_ = exec.Command("docker", "rm", "-f", "-v", name).Run()
	})
	hostPort, _, _ := strings.Cut(docker(t, "port", name, "6443/tcp"), "\n")

	// systemd is up: "degraded" only means some unit of the host's /usr
	// failed (they are listed on failure).
	// failed (they are listed in the log). Until systemd has its bus up,
	// systemctl cannot reach it at all.
	eventually(t, 90*time.Second, "systemd booted", func() error {
		boot := m.exec(90*time.Second, "systemctl", "is-system-running", "--wait")
		switch state := strings.TrimSpace(boot.stdout); state {
		case "running":
			return nil
		case "degraded":
			t.Logf("systemd is degraded:\n%s", m.exec(30*time.Second, "systemctl", "--failed", "--no-pager").stdout)
			return nil
		default:
			return fmt.Errorf("is-system-running: %q %s", state, boot.stderr)
		}
	})

	t.Run("install as a user other than root is refused and writes nothing", func(t *testing.T) {
		res := m.execAs("65534", 30*time.Second, "/opt/nodeplane", "install", "server")
		if res.code == 0 || !strings.Contains(res.stderr, "must run as root") {
			t.Errorf("install as nobody: exit %d, stderr %q; want a refusal naming root", res.code, res.stderr)
		}
		if _, ok := m.readFile("/etc/systemd/system/nodeplane-server.service"); ok {
			t.Error("the server unit was written although the install was refused")
		}
	})

	// The server: install returns once systemd has READY=1; /readyz is
	// watched from outside meanwhile.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	readyz := watchReadyz(ctx, "https://"+hostPort+"/readyz")
	states := make(chan []string, 1)
	go func() {
		// ActiveState as seen while the install runs, changes only.
		var seen []string
		defer func() { states <- seen }()
		for ctx.Err() == nil {
			out, err := exec.CommandContext(ctx, "docker", "exec", name, "systemctl", "show", "-p", "ActiveState", "--value", "nodeplane-server.service").Output()
			if err == nil {
				s := strings.TrimSpace(string(out))
				if len(seen) == 0 || seen[len(seen)-1] != s {
					seen = append(seen, s)
				}
				if s == "active" || s == "failed" {
					return
				}
			}
		}
	}()
	res := m.exec(5*time.Minute, "/opt/nodeplane", "install", "server")
	if res.code != 0 {
		t.Fatalf("install server: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	// READY=1 means ready: /readyz answers ok now, not eventually.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := hc.Get("https://" + hostPort + "/readyz")
	if err != nil {
		t.Fatalf("/readyz right after install returned: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok" {
		t.Fatalf("/readyz right after install returned: %d %q", resp.StatusCode, body)
	}
	<-readyz.done
	var seen []string
	select {
	case seen = <-states:
	case <-time.After(30 * time.Second):
		t.Fatal("ActiveState watcher did not see the server active")
	}
	cancel()
	props := m.show("nodeplane-server.service", "Type", "ActiveState", "SubState", "ExecMainStartTimestamp", "ActiveEnterTimestamp", "NRestarts")
	t.Logf("server unit: %v; ActiveState seen %v; readyz last failed at %v, first ok at %v",
		props, seen, readyz.lastFail.UTC().Format(time.RFC3339Nano), readyz.firstOK.UTC().Format(time.RFC3339Nano))
	if props["Type"] != "notify" || props["ActiveState"] != "active" || props["SubState"] != "running" || props["NRestarts"] != "0" {
		t.Errorf("server unit %v: want a notify service active/running, never restarted", props)
	}
	started := systemdTimestamp(t, props["ExecMainStartTimestamp"])
	active := systemdTimestamp(t, props["ActiveEnterTimestamp"])
	if readyz.lastFail.IsZero() {
		t.Errorf("/readyz was never seen failing: the watcher started too late to tell when READY=1 came")
	} else if !active.After(readyz.lastFail) {
		t.Errorf("the unit became active at %v, before /readyz stopped failing (it failed a request sent at %v): READY=1 came before readiness",
			active.Format(time.RFC3339Nano), readyz.lastFail.UTC().Format(time.RFC3339Nano))
	}
	if !active.After(started) {
		t.Errorf("active at %v, not after the process started at %v", active, started)
	}
	if len(seen) < 2 || seen[len(seen)-2] != "activating" || seen[len(seen)-1] != "active" {
		t.Errorf("ActiveState went %v; want activating → active", seen)
	}

	kubeconfig, ok := m.readFile("/var/lib/nodeplane/server/admin.kubeconfig")
	if !ok {
		t.Fatal("no /var/lib/nodeplane/server/admin.kubeconfig")
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Host = "https://" + hostPort
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("installing the server again with the same flags changes nothing", func(t *testing.T) {
		before := m.show("nodeplane-server.service", "MainPID")
		unitBefore, _ := m.readFile("/etc/systemd/system/nodeplane-server.service")
		statBefore := m.must(30*time.Second, "stat", "-c", "%i %Y", "/etc/systemd/system/nodeplane-server.service", "/etc/nodeplane/server.env")
		res := m.exec(2*time.Minute, "/usr/local/bin/nodeplane", "install", "server")
		if res.code != 0 || !strings.Contains(res.stdout, "already installed") {
			t.Errorf("second install: exit %d, stdout %q, stderr %q; want a message that it is already installed", res.code, res.stdout, res.stderr)
		}
		if after := m.show("nodeplane-server.service", "MainPID"); after["MainPID"] != before["MainPID"] {
			t.Errorf("server MainPID %s → %s: the second install restarted it", before["MainPID"], after["MainPID"])
		}
		if unitAfter, _ := m.readFile("/etc/systemd/system/nodeplane-server.service"); unitAfter != unitBefore {
			t.Errorf("the unit changed:\n%s\n→\n%s", unitBefore, unitAfter)
		}
		if statAfter := m.must(30*time.Second, "stat", "-c", "%i %Y", "/etc/systemd/system/nodeplane-server.service", "/etc/nodeplane/server.env"); statAfter != statBefore {
			t.Errorf("the files were rewritten (inode, mtime): %q → %q", statBefore, statAfter)
		}
	})

	t.Run("an agent unit nodeplane did not write is not overwritten", func(t *testing.T) {
		const foreign = "[Unit]\nDescription=mine\n[Service]\nExecStart=/bin/true\n"
		m.must(30*time.Second, "sh", "-c", "printf '"+strings.ReplaceAll(foreign, "\n", `\n`)+"' > /etc/systemd/system/nodeplane-agent.service")
		res := m.exec(60*time.Second, "/usr/local/bin/nodeplane", "install", "agent", "--",
			"--server", "https://127.0.0.1:6443", "--token-file", "/var/lib/nodeplane/server/node-token")
		if res.code == 0 || !strings.Contains(res.stderr, "/etc/systemd/system/nodeplane-agent.service exists and was not written by nodeplane install") {
			t.Errorf("install over a foreign unit: exit %d, stderr %q; want a refusal naming the file", res.code, res.stderr)
		}
		if got, _ := m.readFile("/etc/systemd/system/nodeplane-agent.service"); got != foreign {
			t.Errorf("the foreign unit is now %q", got)
		}
		if _, ok := m.readFile("/etc/nodeplane/agent.env"); ok {
			t.Error("agent.env was written although the install was refused")
		}
		if got := m.show("nodeplane-agent.service", "ActiveState")["ActiveState"]; got != "inactive" {
			t.Errorf("the foreign agent unit is %s, want it left inactive", got)
		}
		m.must(30*time.Second, "rm", "/etc/systemd/system/nodeplane-agent.service")
	})

	// The agent, on the same machine: install returns once the Node is
	// registered (READY=1).
	res = m.exec(3*time.Minute, "/usr/local/bin/nodeplane", "install", "agent", "--",
		"--server", "https://127.0.0.1:6443", "--token-file", "/var/lib/nodeplane/server/node-token")
	if res.code != 0 {
		t.Fatalf("install agent: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	bg := context.Background()
	if _, err := cs.CoreV1().Nodes().Get(bg, nodeName, metav1.GetOptions{}); err != nil {
		t.Fatalf("Node %s right after install agent returned: %v", nodeName, err)
	}
	eventually(t, 60*time.Second, "Node Ready", func() error {
		n, err := cs.CoreV1().Nodes().Get(bg, nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := condition(n, corev1.NodeReady); c.Status != corev1.ConditionTrue {
			return fmt.Errorf("Ready = %+v", c)
		}
		return nil
	})
	agentProps := m.show("nodeplane-agent.service", "Type", "ActiveState", "KillMode", "Delegate", "MainPID")
	if agentProps["Type"] != "notify" || agentProps["ActiveState"] != "active" || agentProps["KillMode"] != "process" || agentProps["Delegate"] != "yes" {
		t.Errorf("agent unit %v: want an active notify service with KillMode=process, Delegate=yes", agentProps)
	}

	t.Run("the agent holds logind's delay inhibitor for shutdown", func(t *testing.T) {
		eventually(t, 30*time.Second, "the agent's inhibitor in systemd-inhibit --list", func() error {
			out := m.exec(30*time.Second, "systemd-inhibit", "--list", "--no-pager", "--no-legend")
			for _, line := range strings.Split(out.stdout, "\n") {
				if strings.Contains(line, "nodeplane agent") && strings.Contains(line, "shutdown") && strings.Contains(line, "delay") &&
					strings.Contains(line, agentProps["MainPID"]) {
					return nil
				}
			}
			return fmt.Errorf("agent PID %s: no delay lock on shutdown in\n%s%s", agentProps["MainPID"], out.stdout, out.stderr)
		})
		// logind's default InhibitDelayMaxSec (5 s) is below the agent's
		// 30 s shutdown budget: the agent raised it and logind reloaded.
		eventually(t, 30*time.Second, "logind's InhibitDelayMaxUSec raised to the agent's 30 s budget", func() error {
			out := m.exec(30*time.Second, "busctl", "get-property", "org.freedesktop.login1", "/org/freedesktop/login1",
				"org.freedesktop.login1.Manager", "InhibitDelayMaxUSec")
			if got := strings.TrimSpace(out.stdout); got != "t 30000000" {
				return fmt.Errorf("InhibitDelayMaxUSec %q %s", got, out.stderr)
			}
			return nil
		})
	})

	// A pod, run by the process runtime under the agent's unit.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "sleep", Image: "sleep", Command: []string{"sleep", "3600"},
		}}},
	}
	if _, err := cs.CoreV1().Pods("default").Create(bg, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "pod Running", func() error {
		p, err := cs.CoreV1().Pods("default").Get(bg, "sleeper", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	pgrep := m.exec(30*time.Second, "pgrep", "-x", "sleep")
	pids := strings.Fields(pgrep.stdout)
	if len(pids) != 1 {
		t.Fatalf("pgrep -x sleep: %q; want the pod's one process", pgrep.stdout)
	}
	pid := pids[0]
	startTicks, _ := m.pidStart(pid)
	if cg, _ := m.readFile("/proc/" + pid + "/cgroup"); !strings.Contains(cg, "nodeplane-agent.service") {
		t.Errorf("the pod's process is not in the agent unit's cgroup:\n%s", cg)
	}

	t.Run("restarting the agent keeps the pod's process", func(t *testing.T) {
		m.must(2*time.Minute, "systemctl", "restart", "nodeplane-agent.service")
		after := m.show("nodeplane-agent.service", "ActiveState", "MainPID")
		if after["ActiveState"] != "active" || after["MainPID"] == agentProps["MainPID"] {
			t.Errorf("agent after restart %v (MainPID before %s): want active with a new main process", after, agentProps["MainPID"])
		}
		never(t, 5*time.Second, "the pod's process gone after the agent restarted", func() error {
			if got, ok := m.pidStart(pid); !ok || got != startTicks {
				return fmt.Errorf("sleep PID %s (started at tick %s) is gone", pid, startTicks)
			}
			return nil
		})
		p, err := cs.CoreV1().Pods("default").Get(bg, "sleeper", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("pod after the agent restart: phase %s, container statuses %+v; want Running, not restarted", p.Status.Phase, p.Status.ContainerStatuses)
		}
	})

	t.Run("installing the agent again with another flag restarts it with that flag and keeps the pod's process", func(t *testing.T) {
		before := m.show("nodeplane-agent.service", "MainPID")
		res := m.exec(3*time.Minute, "/usr/local/bin/nodeplane", "install", "agent", "--",
			"--server", "https://127.0.0.1:6443", "--token-file", "/var/lib/nodeplane/server/node-token", "--log-level", "debug")
		if res.code != 0 || !strings.Contains(res.stdout, "wrote /etc/nodeplane/agent.env") {
			t.Fatalf("install agent with --log-level debug: exit %d, stdout %q, stderr %q; want agent.env rewritten", res.code, res.stdout, res.stderr)
		}
		after := m.show("nodeplane-agent.service", "ActiveState", "MainPID")
		if after["ActiveState"] != "active" || after["MainPID"] == before["MainPID"] {
			t.Fatalf("agent after the changed install %v (MainPID before %s): want active with a new main process", after, before["MainPID"])
		}
		if cmdline, _ := m.readFile("/proc/" + after["MainPID"] + "/cmdline"); !strings.Contains(cmdline, "--log-level\x00debug") {
			t.Errorf("the restarted agent runs %q, without the new flag", strings.ReplaceAll(cmdline, "\x00", " "))
		}
		if got, ok := m.pidStart(pid); !ok || got != startTicks {
			t.Errorf("the pod's process (PID %s) did not survive the agent's restart", pid)
		}
	})

	t.Run("stopping the server is a clean exit", func(t *testing.T) {
		m.must(3*time.Minute, "systemctl", "stop", "nodeplane-server.service")
		got := m.show("nodeplane-server.service", "ActiveState", "Result", "ExecMainCode", "ExecMainStatus")
		// ExecMainCode 1 is CLD_EXITED: it exited, it was not killed.
		if got["ActiveState"] != "inactive" || got["Result"] != "success" || got["ExecMainCode"] != "1" || got["ExecMainStatus"] != "0" {
			t.Errorf("server after systemctl stop: %v; want inactive, Result=success, exited with status 0", got)
		}
	})

	t.Run("uninstall removes the units and leaves nothing running", func(t *testing.T) {
		res := m.exec(3*time.Minute, "/usr/local/bin/nodeplane", "uninstall")
		if res.code != 0 {
			t.Fatalf("uninstall: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
		for _, p := range []string{"/etc/systemd/system/nodeplane-server.service", "/etc/systemd/system/nodeplane-agent.service",
			"/etc/nodeplane/server.env", "/etc/nodeplane/agent.env"} {
			if _, ok := m.readFile(p); ok {
				t.Errorf("%s survived uninstall", p)
			}
		}
		for _, unit := range []string{"nodeplane-server.service", "nodeplane-agent.service"} {
			if got := m.show(unit, "LoadState", "ActiveState"); got["LoadState"] != "not-found" || got["ActiveState"] != "inactive" {
				t.Errorf("%s after uninstall: %v; want not-found and inactive", unit, got)
			}
		}
		for _, pattern := range [][]string{{"-f", "/usr/local/bin/nodeplane"}, {"-x", "sleep"}} {
			if res := m.exec(30*time.Second, append([]string{"pgrep", "-a"}, pattern...)...); res.code != 1 {
				t.Errorf("pgrep %v after uninstall: exit %d\n%s", pattern, res.code, res.stdout)
			}
		}
		if failed := m.must(30*time.Second, "systemctl", "list-units", "--failed", "--no-legend", "--plain", "nodeplane*"); strings.TrimSpace(failed) != "" {
			t.Errorf("failed nodeplane units after uninstall:\n%s", failed)
		}
		if _, ok := m.readFile("/var/lib/nodeplane/server/admin.kubeconfig"); !ok {
			t.Error("uninstall without --purge removed the server's data")
		}
	})
}
