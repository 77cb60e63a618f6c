package e2e

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// notifySocket opens a unix datagram socket as systemd does for a
// Type=notify unit and returns its path and a function that waits for the
// next datagram.
func notifySocket(t *testing.T) (string, func(timeout time.Duration) string) {
	t.Helper()
	// A short path: sun_path holds 108 bytes.
	dir, err := os.MkdirTemp("", "np-notify")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return path, func(timeout time.Duration) string {
		t.Helper()
		if err := conn.SetReadDeadline(time.Now().Add(timeout)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4096)
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("no sd_notify datagram within %v: %v", timeout, err)
		}
		return string(buf[:n])
	}
}

// TestSystemdNotify runs the real server and agent as systemd runs a
// Type=notify unit (NOTIFY_SOCKET set to a unix datagram socket): the
// server sends READY=1 when /readyz answers ok, the agent when its Node is
// registered.
func TestSystemdNotify(t *testing.T) {
	socket, receive := notifySocket(t)
	dataDir := filepath.Join(t.TempDir(), "server")
	cmd := exec.Command(binary, "server", "--data-dir", dataDir, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+socket)
	logPath := filepath.Join(t.TempDir(), "server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &serverProc{t: t, dataDir: dataDir, logPath: logPath, cmd: cmd, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait(); logFile.Close() }()
	t.Cleanup(func() { s.stop() })

	if got := receive(60 * time.Second); got != "READY=1" {
		t.Fatalf("server sent %q, want READY=1\n%s", got, s.logs())
	}
	// READY=1 means ready: /readyz must answer ok at once, not eventually.
	body, err := s.client().Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
	if err != nil || string(body) != "ok" {
		t.Fatalf("/readyz right after READY=1: %q, %v", body, err)
	}

	agentSocket, agentReceive := notifySocket(t)
	t.Setenv("NOTIFY_SOCKET", agentSocket)
	a := startAgent(t, s, agentOptions{name: "notify-node"})
	if got := agentReceive(60 * time.Second); got != "READY=1" {
		t.Fatalf("agent sent %q, want READY=1\n%s", got, a.logs())
	}
	if _, err := s.client().CoreV1().Nodes().Get(context.Background(), "notify-node", metav1.GetOptions{}); err != nil {
		t.Fatalf("Node right after the agent's READY=1: %v", err)
	}
}

// TestInstallCommand drives `nodeplane install` and `uninstall` under a
// --root prefix: the files land there with the role's flags, a machine
// without systemd or with a unit nodeplane did not write is refused with
// nothing written, and uninstall takes only nodeplane's files.
func TestInstallCommand(t *testing.T) {
	root := t.TempDir()
	unit := filepath.Join(root, "etc/systemd/system/nodeplane-agent.service")
	env := filepath.Join(root, "etc/nodeplane/agent.env")
	agentFlags := []string{"--", "--server", "https://api.example.com:6443", "--token-file", "/etc/nodeplane/join-token"}

	res := runNodeplaneCmd(t, 30*time.Second, append([]string{"install", "agent", "--root", root}, agentFlags...)...)
	if res.code == 0 || !strings.Contains(res.stderr, "systemd is not running on this machine (no /run/systemd/system)") {
		t.Errorf("install without systemd: exit %d, stderr %q; want a refusal naming /run/systemd/system", res.code, res.stderr)
	}
	if _, err := os.Stat(unit); err == nil {
		t.Error("the unit was written although the install was refused")
	}
	if err := os.MkdirAll(filepath.Join(root, "run/systemd/system"), 0o755); err != nil {
		t.Fatal(err)
	}

	res = runNodeplaneCmd(t, 30*time.Second, "install", "agent", "--root", root, "--", "--token-file", "x")
	if res.code == 0 || !strings.Contains(res.stderr, "--server") {
		t.Errorf("install agent without --server: exit %d, stderr %q; want the agent's own message naming --server", res.code, res.stderr)
	}

	res = runNodeplaneCmd(t, 60*time.Second, append([]string{"install", "agent", "--root", root}, agentFlags...)...)
	if res.code != 0 {
		t.Fatalf("install agent: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	data, err := os.ReadFile(env)
	if err != nil {
		t.Fatal(err)
	}
	if want := "NODEPLANE_AGENT_ARGS=--data-dir=/var/lib/nodeplane/agent --server https://api.example.com:6443 --token-file /etc/nodeplane/join-token\n"; !strings.HasSuffix(string(data), want) {
		t.Errorf("agent.env:\n%s\nwant it to end with %q", data, want)
	}
	if fi, err := os.Stat(filepath.Join(root, "var/lib/nodeplane/agent")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("data dir: %v, %v; want a 0700 directory", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(root, "usr/local/bin/nodeplane")); err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Errorf("installed binary: %v, %v", fi, err)
	}

	// A server unit someone else wrote is never overwritten.
	foreign := filepath.Join(root, "etc/systemd/system/nodeplane-server.service")
	if err := os.WriteFile(foreign, []byte("[Service]\nExecStart=/opt/mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res = runNodeplaneCmd(t, 30*time.Second, "install", "server", "--root", root)
	if res.code == 0 || !strings.Contains(res.stderr, "/etc/systemd/system/nodeplane-server.service exists and was not written by nodeplane install") {
		t.Errorf("install over a foreign unit: exit %d, stderr %q; want a refusal naming the file", res.code, res.stderr)
	}
	if got, _ := os.ReadFile(foreign); string(got) != "[Service]\nExecStart=/opt/mine\n" {
		t.Errorf("the foreign unit was changed to %q", got)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/nodeplane/server.env")); err == nil {
		t.Error("server.env was written although the install was refused")
	}

	res = runNodeplaneCmd(t, 30*time.Second, "uninstall", "--root", root)
	if res.code != 0 {
		t.Fatalf("uninstall: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	for _, p := range []string{unit, env} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s survived uninstall", p)
		}
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Errorf("uninstall removed the unit it did not write: %v", err)
	}
	res = runNodeplaneCmd(t, 30*time.Second, "uninstall", "--root", root)
	if res.code != 0 || !strings.Contains(res.stdout, "nothing to uninstall") {
		t.Errorf("second uninstall: exit %d, stdout %q; want a no-op", res.code, res.stdout)
	}
}

// TestCompletion checks that `nodeplane completion SHELL` prints a script
// for each shell that knows the commands.
func TestCompletion(t *testing.T) {
	for _, tt := range []struct{ shell, want string }{
		{"bash", "__start_nodeplane"},
		{"zsh", "#compdef nodeplane"},
		{"fish", "complete -c nodeplane"},
	} {
		t.Run("the "+tt.shell+" script names nodeplane", func(t *testing.T) {
			res := runNodeplaneCmd(t, 30*time.Second, "completion", tt.shell)
			if res.code != 0 || !strings.Contains(res.stdout, tt.want) {
				t.Errorf("completion %s: exit %d, %d bytes, want a script containing %q\n%s", tt.shell, res.code, len(res.stdout), tt.want, res.stderr)
			}
		})
	}
}
