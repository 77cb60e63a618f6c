// Package logind is the graceful node shutdown trigger under systemd (SPEC
// GNS-3/4/7): over the system D-Bus it makes sure logind lets inhibitors
// delay a shutdown long enough, holds a "delay" inhibitor lock, and watches
// logind's PrepareForShutdown signal. PrepareForShutdown(true) runs the
// agent's shutdown and then releases the lock, so the machine goes down only
// after the pods are stopped and their final statuses posted;
// PrepareForShutdown(false) cancels it and takes the lock again. When the bus
// goes away the Watcher reconnects and does it all again.
//
// The package knows nothing of pods: it drives a Shutdowner (the agent).
package logind

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/godbus/dbus/v5"
	"k8s.io/utils/clock"
)

// Names on the bus (logind's and systemd's D-Bus APIs).
const (
	Login1Name      = "org.freedesktop.login1"
	Login1Path      = "/org/freedesktop/login1"
	Login1Interface = "org.freedesktop.login1.Manager"
	Systemd1Name    = "org.freedesktop.systemd1"
	Systemd1Path    = "/org/freedesktop/systemd1"
	// DelayProperty is logind's longest delay an inhibitor may impose, in µs.
	DelayProperty = Login1Interface + ".InhibitDelayMaxUSec"
	// LogindUnit is the unit systemd signals to reload logind.conf.
	LogindUnit = "systemd-logind.service"
)

// DefaultConfigDir is where logind reads drop-in configuration; OverrideFile
// is the file the Watcher writes there when logind's delay is too short.
const (
	DefaultConfigDir = "/etc/systemd/logind.conf.d"
	OverrideFile     = "99-nodeplane.conf"
)

// Shutdowner is what PrepareForShutdown drives (the agent).
type Shutdowner interface {
	// Shutdown runs a graceful node shutdown and returns when it is done
	// (or cancelled: then an error).
	Shutdown(ctx context.Context) error
	// CancelShutdown cancels a running shutdown or clears a finished one.
	CancelShutdown() bool
}

// Config configures a Watcher.
type Config struct {
	// Address is the bus to use (a D-Bus address such as
	// unix:path=/run/dbus/system_bus_socket); empty: the system bus, from
	// DBUS_SYSTEM_BUS_ADDRESS or the standard socket.
	Address string
	// ConfigDir is logind's drop-in directory (DefaultConfigDir).
	ConfigDir string
	// Delay is how long the agent needs to shut the node down: the sum of
	// the priority table's budgets. logind's InhibitDelayMaxUSec must be
	// at least this long.
	Delay time.Duration
	// Who and Why describe the inhibitor lock (shown by
	// `systemd-inhibit --list`).
	Who, Why   string
	Shutdowner Shutdowner
	// ReconnectDelay is the wait after the bus goes away or a start-up
	// step fails, doubled on each failure in a row up to
	// MaxReconnectDelay (defaults 1 s and 30 s).
	ReconnectDelay, MaxReconnectDelay time.Duration
	Clock                             clock.WithTicker
	Logger                            *slog.Logger
}

// Watcher holds the inhibitor lock and turns logind's signals into
// shutdowns.
type Watcher struct {
	cfg Config
	// Owned by Run's goroutine (sessions run one after another):
	// done is non-nil while a shutdown runs (it may outlive the session
	// that started it); down is set once one finished, until cancelled —
	// the machine is going away, so a new session takes no lock.
	done chan error
	down bool
}

// New checks cfg and fills in defaults.
func New(cfg Config) (*Watcher, error) {
	if cfg.Shutdowner == nil {
		return nil, errors.New("logind: Shutdowner is required")
	}
	if cfg.Delay <= 0 {
		return nil, errors.New("logind: Delay must be > 0 (graceful shutdown is off)")
	}
	if cfg.ConfigDir == "" {
		cfg.ConfigDir = DefaultConfigDir
	}
	if cfg.Who == "" {
		cfg.Who = "nodeplane agent"
	}
	if cfg.Why == "" {
		cfg.Why = "nodeplane agent needs time to stop the node's pods"
	}
	if cfg.ReconnectDelay <= 0 {
		cfg.ReconnectDelay = time.Second
	}
	if cfg.MaxReconnectDelay < cfg.ReconnectDelay {
		cfg.MaxReconnectDelay = max(30*time.Second, cfg.ReconnectDelay)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Watcher{cfg: cfg}, nil
}

// Available reports whether logind is reachable: the bus at address (empty:
// the system bus) answers within timeout and org.freedesktop.login1 has an
// owner. The agent uses it to choose its shutdown trigger.
func Available(ctx context.Context, address string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := connect(ctx, address)
	if err != nil {
		return err
	}
	defer conn.Close()
	var has bool
	if err := conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.NameHasOwner", 0, Login1Name).Store(&has); err != nil {
		return fmt.Errorf("ask the bus for %s: %w", Login1Name, err)
	}
	if !has {
		return fmt.Errorf("%s is not on the bus (no systemd-logind)", Login1Name)
	}
	return nil
}

// Run keeps a session with logind until ctx ends: on start and after every
// loss of the bus (ReconnectDelay later, backing off while it keeps
// failing).
func (w *Watcher) Run(ctx context.Context) {
	log := w.cfg.Logger
	delay := w.cfg.ReconnectDelay
	for ctx.Err() == nil {
		healthy, err := w.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if healthy {
			delay = w.cfg.ReconnectDelay
		}
		log.Warn("logind session ended; reconnecting", "err", err, "in", delay)
		t := w.cfg.Clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		if !healthy {
			delay = min(2*delay, w.cfg.MaxReconnectDelay)
		}
	}
}

// errBusGone ends a session whose connection closed.
var errBusGone = errors.New("the D-Bus connection closed")

// session runs one connection: GNS-3 steps 1–4 (4 before 3), then the signals until
// the bus goes away or ctx ends. healthy reports whether it got as far as
// watching the signals.
func (w *Watcher) session(ctx context.Context) (healthy bool, err error) {
	log := w.cfg.Logger
	conn, err := connect(ctx, w.cfg.Address)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	if err := w.ensureDelay(ctx, conn); err != nil {
		return false, err
	}
	// Subscribed before the lock is taken (GNS-3 takes the lock first),
	// so that no PrepareForShutdown falls between the two.
	signals := make(chan *dbus.Signal, 16)
	conn.Signal(signals)
	if err := conn.AddMatchSignalContext(ctx,
		dbus.WithMatchObjectPath(Login1Path), dbus.WithMatchInterface(Login1Interface), dbus.WithMatchMember("PrepareForShutdown"),
	); err != nil {
		return false, fmt.Errorf("subscribe to PrepareForShutdown: %w", err)
	}
	var lock *os.File
	if w.done == nil && !w.down {
		if lock, err = inhibit(ctx, conn, w.cfg.Who, w.cfg.Why); err != nil {
			return false, err
		}
	}
	release := func() {
		if lock != nil {
			lock.Close()
			lock = nil
		}
	}
	defer release()
	log.Info("watching logind for the machine's shutdown", "delay", w.cfg.Delay, "locked", lock != nil)

	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case sig, ok := <-signals:
			if !ok {
				return true, errBusGone
			}
			active, ok := prepareForShutdown(sig)
			if !ok {
				continue
			}
			if active {
				if w.done != nil || w.down {
					continue
				}
				log.Info("logind: the machine is shutting down")
				done := make(chan error, 1)
				w.done = done
				go func() { done <- w.cfg.Shutdowner.Shutdown(ctx) }()
				continue
			}
			log.Info("logind: shutdown cancelled")
			w.cfg.Shutdowner.CancelShutdown()
			w.down = false
			if w.done == nil && lock == nil {
				// The lock was let go at the end of the shutdown: hold
				// it again for the next one (GNS-7).
				if lock, err = inhibit(ctx, conn, w.cfg.Who, w.cfg.Why); err != nil {
					return true, err
				}
			}
		case err := <-w.done: // never ready while nil
			w.done = nil
			if err != nil && ctx.Err() == nil {
				// Cancelled (PrepareForShutdown(false) came first): keep
				// the lock for the next shutdown.
				log.Info("graceful node shutdown did not finish; keeping the inhibitor lock", "err", err)
				if lock == nil {
					if lock, err = inhibit(ctx, conn, w.cfg.Who, w.cfg.Why); err != nil {
						return true, err
					}
				}
				continue
			}
			w.down = true
			// Pods stopped, statuses posted: let the machine go.
			log.Info("graceful node shutdown done; releasing the inhibitor lock")
			release()
		}
	}
}

// prepareForShutdown reads the signal's one boolean.
func prepareForShutdown(sig *dbus.Signal) (active, ok bool) {
	if sig.Name != Login1Interface+".PrepareForShutdown" || len(sig.Body) != 1 {
		return false, false
	}
	active, ok = sig.Body[0].(bool)
	return active, ok
}

// ensureDelay is GNS-3 step 2: when logind's InhibitDelayMaxUSec is shorter
// than Delay, write the override, have systemd SIGHUP logind, and read the
// property again (100 ms, doubling, 5 tries).
func (w *Watcher) ensureDelay(ctx context.Context, conn *dbus.Conn) error {
	current, err := delayMax(ctx, conn)
	if err != nil {
		return err
	}
	if current >= w.cfg.Delay {
		return nil
	}
	w.cfg.Logger.Info("logind's InhibitDelayMaxSec is shorter than the shutdown budget; overriding it",
		"current", current, "want", w.cfg.Delay, "file", filepath.Join(w.cfg.ConfigDir, OverrideFile))
	if err := WriteOverride(w.cfg.ConfigDir, w.cfg.Delay); err != nil {
		return err
	}
	sd := conn.Object(Systemd1Name, Systemd1Path)
	if err := sd.CallWithContext(ctx, "org.freedesktop.systemd1.Manager.KillUnit", 0, LogindUnit, "all", int32(1)).Err; err != nil {
		return fmt.Errorf("ask systemd to reload %s: %w", LogindUnit, err)
	}
	backoff := 100 * time.Millisecond
	for range 5 {
		t := w.cfg.Clock.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
		if current, err = delayMax(ctx, conn); err == nil && current >= w.cfg.Delay {
			return nil
		}
		backoff *= 2
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("logind's InhibitDelayMaxUSec is still %v after the override, want at least %v", current, w.cfg.Delay)
}

// WriteOverride writes the logind drop-in that raises InhibitDelayMaxSec to
// delay (in whole seconds, rounded up).
func WriteOverride(dir string, delay time.Duration) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("logind override: %w", err)
	}
	secs := int64((delay + time.Second - 1) / time.Second)
	body := fmt.Sprintf("# nodeplane agent logind override: time to stop pods on shutdown\n[Login]\nInhibitDelayMaxSec=%d\n", secs)
	path := filepath.Join(dir, OverrideFile)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		return fmt.Errorf("logind override: %w", err)
	}
	// WriteFile keeps an existing file's mode.
	if err := os.Chmod(path, 0o644); err != nil {
		return fmt.Errorf("logind override: %w", err)
	}
	return nil
}

func delayMax(ctx context.Context, conn *dbus.Conn) (time.Duration, error) {
	var v dbus.Variant
	err := conn.Object(Login1Name, Login1Path).CallWithContext(ctx, "org.freedesktop.DBus.Properties.Get", 0, Login1Interface, "InhibitDelayMaxUSec").Store(&v)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", DelayProperty, err)
	}
	us, ok := v.Value().(uint64)
	if !ok {
		return 0, fmt.Errorf("read %s: got %s, want a uint64", DelayProperty, v.Signature())
	}
	return time.Duration(us) * time.Microsecond, nil
}

// inhibit takes a delay inhibitor lock on shutdown; closing the file
// releases it.
func inhibit(ctx context.Context, conn *dbus.Conn, who, why string) (*os.File, error) {
	var fd dbus.UnixFD
	err := conn.Object(Login1Name, Login1Path).CallWithContext(ctx, Login1Interface+".Inhibit", 0, "shutdown", who, why, "delay").Store(&fd)
	if err != nil {
		return nil, fmt.Errorf("take a logind inhibitor lock: %w", err)
	}
	return os.NewFile(uintptr(fd), "logind-inhibitor"), nil
}

func connect(ctx context.Context, address string) (*dbus.Conn, error) {
	var (
		conn *dbus.Conn
		err  error
	)
	if address == "" {
		conn, err = dbus.ConnectSystemBus(dbus.WithContext(ctx))
	} else {
		conn, err = dbus.Connect(address, dbus.WithContext(ctx))
	}
	if err != nil {
		return nil, fmt.Errorf("connect to the system bus: %w", err)
	}
	return conn, nil
}
