package sdnotify_test

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/internal/sdnotify"
)

// listen opens a unix datagram socket as systemd does for a Type=notify unit.
func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func receive(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no datagram: %v", err)
	}
	return string(buf[:n])
}

func TestNotifySocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	abstract := "@nodeplane-sdnotify-test-" + strings.ReplaceAll(t.Name(), "/", "-")
	for _, tt := range []struct {
		name   string
		listen string
		socket string
	}{
		{"a socket in the file system receives the state", path, path},
		{"an abstract socket named with @ receives the state", "\x00" + abstract[1:], abstract},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn := listen(t, tt.listen)
			sent, err := sdnotify.NotifySocket(tt.socket, sdnotify.Ready)
			if err != nil || !sent {
				t.Fatalf("NotifySocket = %v, %v; want sent", sent, err)
			}
			if got := receive(t, conn); got != "READY=1" {
				t.Errorf("received %q, want READY=1", got)
			}
		})
	}
}

func TestNotifyWithoutSystemd(t *testing.T) {
	for _, tt := range []struct {
		name    string
		socket  string
		wantErr string
	}{
		{"no NOTIFY_SOCKET sends nothing and is no error", "", ""},
		{"a relative socket path is an error naming the variable", "notify", "NOTIFY_SOCKET"},
		{"a socket nobody listens on is an error", filepath.Join(t.TempDir(), "gone"), "sd_notify"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(sdnotify.SocketEnv, tt.socket)
			sent, err := sdnotify.Notify(sdnotify.Ready)
			if sent {
				t.Error("sent = true, want false")
			}
			if tt.wantErr == "" && err != nil {
				t.Errorf("err = %v, want nil", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
