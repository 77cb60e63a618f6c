package logind

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// The D-Bus path for real: a private dbus-daemon, a stand-in logind and
// systemd on it (written here), and the Watcher talking to them exactly as
// it talks to the real ones.

// needDBusDaemon skips (fails under CI=true) without dbus-daemon.
func needDBusDaemon(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("dbus-daemon")
	if err == nil {
		return path
	}
	reason := "needs dbus-daemon (apt-get install dbus): " + err.Error()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true runs every tier)", reason)
	}
	t.Skip(reason)
	return ""
}

// bus is a private dbus-daemon listening on a fixed socket path, so a
// restarted one has the same address.
type bus struct {
	t       *testing.T
	exe     string
	dir     string
	address string
	cmd     *exec.Cmd
}

func startBus(t *testing.T) *bus {
	exe := needDBusDaemon(t)
	dir, err := os.MkdirTemp("", "logind-bus") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b := &bus{t: t, exe: exe, dir: dir, address: "unix:path=" + filepath.Join(dir, "bus")}
	conf := `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <listen>` + b.address + `</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
`
	if err := os.WriteFile(filepath.Join(dir, "bus.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	b.start()
	t.Cleanup(b.stop)
	return b
}

func (b *bus) start() {
	b.t.Helper()
	os.Remove(filepath.Join(b.dir, "bus"))
	cmd := exec.Command(b.exe, "--config-file="+filepath.Join(b.dir, "bus.conf"), "--print-address", "--nofork")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	// It prints its address once it listens.
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, b.address) {
		cmd.Process.Kill()
		cmd.Wait()
		b.t.Fatalf("dbus-daemon: %q, %v", line, err)
	}
	b.cmd = cmd
}

func (b *bus) stop() {
	if b.cmd != nil {
		b.cmd.Process.Kill()
		b.cmd.Wait()
		b.cmd = nil
	}
}

// standIn plays logind and systemd on the bus and records what it is asked.
type standIn struct {
	t         *testing.T
	conn      *dbus.Conn
	configDir string

	mu    sync.Mutex
	delay time.Duration // InhibitDelayMaxUSec
	calls []string
	locks []*lockEnd
	seen  chan string // every call, as recorded
}

// lockEnd is the stand-in's end of one inhibitor lock: released is closed
// when every copy of the agent's end is closed.
type lockEnd struct {
	taken, released chan struct{}
	at              time.Time
}

func newStandIn(t *testing.T, address, configDir string, delay time.Duration) *standIn {
	t.Helper()
	conn, err := dbus.Connect(address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s := &standIn{t: t, conn: conn, configDir: configDir, delay: delay, seen: make(chan string, 100)}
	for _, e := range []struct {
		v     any
		path  dbus.ObjectPath
		iface string
	}{
		{login1{s}, Login1Path, Login1Interface},
		{properties{s}, Login1Path, "org.freedesktop.DBus.Properties"},
		{systemd1{s}, Systemd1Path, "org.freedesktop.systemd1.Manager"},
	} {
		if err := conn.Export(e.v, e.path, e.iface); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{Login1Name, Systemd1Name} {
		if reply, err := conn.RequestName(name, dbus.NameFlagDoNotQueue); err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
			t.Fatalf("own %s: %v %v", name, reply, err)
		}
	}
	return s
}

func (s *standIn) record(call string) {
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.mu.Unlock()
	s.seen <- call
}

// next waits for the next call and checks it.
func (s *standIn) next(want string) {
	s.t.Helper()
	select {
	case got := <-s.seen:
		if got != want {
			s.t.Fatalf("logind/systemd asked %q, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		s.t.Fatalf("no call %q within 10 s", want)
	}
}

func (s *standIn) emit(active bool) {
	s.t.Helper()
	if err := s.conn.Emit(Login1Path, Login1Interface+".PrepareForShutdown", active); err != nil {
		s.t.Fatal(err)
	}
}

// lock returns the i-th lock handed out, once the agent holds it.
func (s *standIn) lock(i int) *lockEnd {
	s.t.Helper()
	s.mu.Lock()
	l := s.locks[i]
	s.mu.Unlock()
	wait(s.t, l.taken, "the agent holds the inhibitor lock")
	return l
}

type login1 struct{ s *standIn }

// Inhibit hands out the write end of a pipe, as logind hands out a FIFO:
// the lock is held while any copy of it is open.
func (l login1) Inhibit(what, who, why, mode string) (dbus.UnixFD, *dbus.Error) {
	r, w, err := os.Pipe()
	if err != nil {
		return 0, dbus.MakeFailedError(err)
	}
	fd := dbus.UnixFD(w.Fd())
	end := &lockEnd{taken: make(chan struct{}), released: make(chan struct{})}
	go func() {
		// Our own copy of the write end goes once the agent holds its
		// copy (the agent runs in this process: it shows in /proc/self/fd).
		waitForCopy(l.s.t, r)
		w.Close()
		close(end.taken)
		io.Copy(io.Discard, r)
		end.at = time.Now()
		close(end.released)
		r.Close()
	}()
	l.s.mu.Lock()
	l.s.locks = append(l.s.locks, end)
	l.s.mu.Unlock()
	l.s.record(fmt.Sprintf("Inhibit %s/%s/%s/%s", what, who, why, mode))
	return fd, nil
}

// waitForCopy waits until three descriptors in this process refer to r's
// pipe: r, the stand-in's write end and the agent's.
func waitForCopy(t *testing.T, r *os.File) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(r.Fd()), &st); err != nil {
		t.Error(err)
		return
	}
	target := fmt.Sprintf("pipe:[%d]", st.Ino)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		ents, _ := os.ReadDir("/proc/self/fd")
		n := 0
		for _, e := range ents {
			if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == target {
				n++
			}
		}
		if n >= 3 {
			return
		}
	}
	t.Error("the agent never received the inhibitor lock's descriptor")
}

type properties struct{ s *standIn }

func (p properties) Get(iface, name string) (dbus.Variant, *dbus.Error) {
	p.s.record("Get " + iface + "." + name)
	if iface != Login1Interface || name != "InhibitDelayMaxUSec" {
		return dbus.Variant{}, dbus.MakeFailedError(fmt.Errorf("no property %s.%s", iface, name))
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return dbus.MakeVariant(uint64(p.s.delay / time.Microsecond)), nil
}

type systemd1 struct{ s *standIn }

// KillUnit with SIGHUP to logind re-reads the override, as logind does.
func (d systemd1) KillUnit(unit, who string, signal int32) *dbus.Error {
	d.s.record(fmt.Sprintf("KillUnit %s %s %d", unit, who, signal))
	b, err := os.ReadFile(filepath.Join(d.s.configDir, OverrideFile))
	if err != nil {
		return dbus.MakeFailedError(err)
	}
	m := regexp.MustCompile(`(?m)^InhibitDelayMaxSec=(\d+)$`).FindSubmatch(b)
	if m == nil || !strings.Contains(string(b), "[Login]") {
		return dbus.MakeFailedError(fmt.Errorf("override without [Login] InhibitDelayMaxSec: %q", b))
	}
	secs, _ := strconv.Atoi(string(m[1]))
	d.s.mu.Lock()
	d.s.delay = time.Duration(secs) * time.Second
	d.s.mu.Unlock()
	return nil
}

// fakeNode is the agent's side: Shutdown blocks until the test answers.
type fakeNode struct {
	started   chan struct{}
	answer    chan error
	cancelled chan struct{}
	mu        sync.Mutex
	returned  time.Time
}

func (f *fakeNode) Shutdown(ctx context.Context) error {
	f.started <- struct{}{}
	err := <-f.answer
	f.mu.Lock()
	f.returned = time.Now()
	f.mu.Unlock()
	return err
}

func (f *fakeNode) CancelShutdown() bool { f.cancelled <- struct{}{}; return true }

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not within 10 s", what)
	}
}

func held(l *lockEnd) bool {
	select {
	case <-l.released:
		return false
	default:
		return true
	}
}

// TestWatcherOverLogind plays a machine's life against a stand-in logind:
// delay too short → override written and logind reloaded → lock taken;
// PrepareForShutdown(true) → shutdown, lock released only after it;
// PrepareForShutdown(false) → cancelled, lock taken again; true then false
// mid-shutdown → cancelled, the lock kept; the bus restarted → reconnected,
// lock taken on the new bus.
func TestWatcherOverLogind(t *testing.T) {
	b := startBus(t)
	confDir := filepath.Join(t.TempDir(), "logind.conf.d")
	logind := newStandIn(t, b.address, confDir, 5*time.Second) // logind's default InhibitDelayMaxSec
	node := &fakeNode{started: make(chan struct{}), answer: make(chan error), cancelled: make(chan struct{}, 10)}
	w, err := New(Config{
		Address: b.address, ConfigDir: confDir, Delay: 30 * time.Second, Shutdowner: node,
		ReconnectDelay: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	get := "Get " + DelayProperty
	inhibitCall := "Inhibit shutdown/nodeplane agent/nodeplane agent needs time to stop the node's pods/delay"
	logind.next(get)
	logind.next("KillUnit systemd-logind.service all 1")
	logind.next(get)
	logind.next(inhibitCall)
	override, err := os.ReadFile(filepath.Join(confDir, OverrideFile))
	if err != nil || !strings.Contains(string(override), "[Login]\nInhibitDelayMaxSec=30\n") {
		t.Fatalf("override %q, %v; want [Login] InhibitDelayMaxSec=30", override, err)
	}
	if fi, err := os.Stat(filepath.Join(confDir, OverrideFile)); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("override mode %v, %v; want 0644", fi.Mode(), err)
	}

	first := logind.lock(0)

	// The machine shuts down: the shutdown runs while the lock is held,
	// and the lock goes only once it returned.
	logind.emit(true)
	wait(t, node.started, "shutdown after PrepareForShutdown(true)")
	if !held(first) {
		t.Fatal("the lock was released while the shutdown ran")
	}
	node.answer <- nil
	wait(t, first.released, "lock released after the shutdown")
	node.mu.Lock()
	if first.at.Before(node.returned) {
		t.Errorf("lock released at %v, before the shutdown returned at %v", first.at, node.returned)
	}
	node.mu.Unlock()

	// Cancelled after all: the node is told, and the lock is taken again.
	logind.emit(false)
	wait(t, node.cancelled, "cancellation after PrepareForShutdown(false)")
	logind.next(inhibitCall)
	second := logind.lock(1)

	// Cancelled mid-shutdown: the lock is kept, not taken twice.
	logind.emit(true)
	wait(t, node.started, "second shutdown")
	logind.emit(false)
	wait(t, node.cancelled, "second cancellation")
	node.answer <- errors.New("graceful node shutdown cancelled")
	select { // a bounded window: a wrong release comes at once
	case <-second.released:
		t.Fatal("the lock was released after a cancelled shutdown")
	case <-time.After(300 * time.Millisecond):
	}

	// The bus goes away and comes back (logind now reads 30 s): the
	// watcher reconnects and holds a lock on the new bus.
	b.stop()
	wait(t, second.released, "lock let go with the bus")
	b.start()
	logind = newStandIn(t, b.address, confDir, 30*time.Second)
	logind.next(get)
	logind.next(inhibitCall)
	if !held(logind.lock(0)) {
		t.Fatal("no lock held after the reconnect")
	}
	select {
	case c := <-logind.seen:
		t.Errorf("unexpected call after the reconnect: %s", c)
	default:
	}
}

func TestWriteOverrideRoundsUp(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	if err := WriteOverride(dir, 30500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, OverrideFile))
	if err != nil || !strings.Contains(string(b), "InhibitDelayMaxSec=31\n") {
		t.Errorf("override %q, %v; want InhibitDelayMaxSec=31", b, err)
	}
}

func TestAvailableOnlyWithLogindOnTheBus(t *testing.T) {
	b := startBus(t)
	ctx := context.Background()
	if err := Available(ctx, b.address, 5*time.Second); err == nil {
		t.Error("Available with no login1 on the bus")
	}
	newStandIn(t, b.address, t.TempDir(), time.Minute)
	if err := Available(ctx, b.address, 5*time.Second); err != nil {
		t.Errorf("Available with login1 on the bus: %v", err)
	}
	if err := Available(ctx, "unix:path="+filepath.Join(t.TempDir(), "none"), 5*time.Second); err == nil {
		t.Error("Available with no bus")
	}
}
