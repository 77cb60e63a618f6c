// Package sdnotify tells systemd about a service's state (sd_notify(3)):
// one datagram with "READY=1" (or "STOPPING=1", "STATUS=...") on the unix
// datagram socket named by $NOTIFY_SOCKET, which systemd sets for units of
// Type=notify. Outside such a unit the variable is unset and Notify does
// nothing.
package sdnotify

import (
	"errors"
	"fmt"
	"net"
	"os"
)

// SocketEnv is the environment variable systemd names the socket in.
const SocketEnv = "NOTIFY_SOCKET"

// States systemd understands (sd_notify(3)).
const (
	Ready    = "READY=1"
	Stopping = "STOPPING=1"
)

// Notify sends state (newline-separated assignments) to the socket named by
// $NOTIFY_SOCKET. It reports sent=false and no error when the variable is
// unset (not run by systemd, or not Type=notify).
func Notify(state string) (sent bool, err error) {
	return NotifySocket(os.Getenv(SocketEnv), state)
}

// NotifySocket sends state to the socket at path: a file system path, or
// one in the abstract namespace when it starts with '@' (as systemd writes
// it). An empty path sends nothing.
func NotifySocket(path, state string) (sent bool, err error) {
	if path == "" {
		return false, nil
	}
	if path[0] != '/' && path[0] != '@' {
		return false, fmt.Errorf("%s=%q: want an absolute path or an abstract socket name (@...)", SocketEnv, path)
	}
	addr := &net.UnixAddr{Name: path, Net: "unixgram"}
	if path[0] == '@' {
		addr.Name = "\x00" + path[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, addr)
	if err != nil {
		return false, fmt.Errorf("sd_notify %s: %w", path, err)
	}
	defer conn.Close()
	n, err := conn.Write([]byte(state))
	if err != nil {
		return false, fmt.Errorf("sd_notify %s: %w", path, err)
	}
	if n != len(state) {
		return false, errors.New("sd_notify: short write")
	}
	return true, nil
}
