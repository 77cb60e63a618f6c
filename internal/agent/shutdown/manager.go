package shutdown

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Events and the Ready message (SPEC GNS-4, GNS-7).
const (
	ReasonNodeShutdown    = "NodeShutdown"
	MessageShutdownEvent  = "Shutdown manager detected shutdown event"
	MessageCancelledEvent = "Shutdown manager detected shutdown cancellation"
	// NotReadyMessage is the Ready=False message while shutting down.
	NotReadyMessage = "node is shutting down"
)

// Pods is what the manager needs from the agent's pod manager.
type Pods interface {
	// Running lists the pods to stop.
	Running() []*corev1.Pod
	// StopForShutdown stops one pod with grace and returns once its final
	// status is acknowledged by the API.
	StopForShutdown(ctx context.Context, uid types.UID, grace time.Duration) error
}

// Recorder records node events.
type Recorder interface {
	NodeEvent(eventType, reason, message string)
}

// Config configures a Manager.
type Config struct {
	// Table is the effective priority table (Table); empty: disabled, every
	// trigger is a no-op.
	Table []Group
	Pods  Pods
	// SyncNodeStatus posts the node status now and returns once the API
	// acknowledged it (Ready follows ShuttingDown).
	SyncNodeStatus func(ctx context.Context) error
	// NotReadyTimeout bounds how long the shutdown waits for that post
	// before it stops pods anyway (the machine is going away). Default 10 s.
	NotReadyTimeout time.Duration
	// FinalStatusTimeout is how long, past the last group's budget, the
	// shutdown keeps trying to post final pod statuses the API has not
	// accepted yet (it is unreachable, say) before it gives up. Default 10 s.
	// A shutdown thus ends within NotReadyTimeout + Σ budgets +
	// FinalStatusTimeout.
	FinalStatusTimeout time.Duration
	Recorder           Recorder
	// StatePath is the state file (GNS-8); empty: none.
	StatePath string
	Gauges    *Gauges
	Clock     clock.WithTicker
	Logger    *slog.Logger
}

// ErrCancelled is returned by Shutdown when Cancel ended it.
var ErrCancelled = errors.New("graceful node shutdown cancelled")

// ErrDisabled is returned by Shutdown when graceful shutdown is configured
// off (an empty priority table).
var ErrDisabled = errors.New("graceful node shutdown is turned off (shutdownGracePeriod is 0)")

// Manager runs graceful node shutdowns. Its methods are safe for
// concurrent use.
type Manager struct {
	cfg Config

	mu       sync.Mutex
	shutting bool
	running  chan struct{} // closed when the running shutdown ends
	result   error
	cancel   chan struct{} // closed by Cancel
}

// New returns a Manager and restores the gauges from the state file.
func New(cfg Config) (*Manager, error) {
	if len(cfg.Table) > 0 && (cfg.Pods == nil || cfg.SyncNodeStatus == nil) {
		return nil, errors.New("shutdown: Pods and SyncNodeStatus are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NotReadyTimeout <= 0 {
		cfg.NotReadyTimeout = 10 * time.Second
	}
	if cfg.FinalStatusTimeout <= 0 {
		cfg.FinalStatusTimeout = 10 * time.Second
	}
	m := &Manager{cfg: cfg}
	if cfg.StatePath != "" && cfg.Gauges != nil {
		st, err := ReadState(cfg.StatePath)
		if err != nil {
			cfg.Logger.Warn("shutdown state not restored", "err", err)
		}
		cfg.Gauges.set(st)
	}
	return m, nil
}

// Enabled reports whether a shutdown would do anything.
func (m *Manager) Enabled() bool { return len(m.cfg.Table) > 0 }

// ShuttingDown reports whether a shutdown is under way (or done and not
// cancelled): the node is NotReady and admission refuses new pods.
func (m *Manager) ShuttingDown() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.shutting
}

// NotReasons is the Ready=False reason list for the node status.
func (m *Manager) NotReady() []string {
	if m.ShuttingDown() {
		return []string{NotReadyMessage}
	}
	return nil
}

// Shutdown runs a graceful node shutdown and returns when it is done:
// every pod stopped (or its budget spent) with its final status posted. A
// call while one runs waits for that one. It returns ErrCancelled when
// Cancel ended it, and ErrDisabled at once when disabled.
func (m *Manager) Shutdown(ctx context.Context) error {
	if !m.Enabled() {
		return ErrDisabled
	}
	m.mu.Lock()
	if m.running != nil {
		done := m.running
		m.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.result
	}
	done := make(chan struct{})
	m.running, m.cancel, m.shutting = done, make(chan struct{}), true
	cancel := m.cancel
	m.mu.Unlock()

	err := m.run(ctx, cancel)

	m.mu.Lock()
	m.result, m.running = err, nil
	if errors.Is(err, ErrCancelled) {
		m.shutting = false
	}
	m.mu.Unlock()
	close(done)
	if errors.Is(err, ErrCancelled) {
		m.record(corev1.EventTypeNormal, ReasonNodeShutdown, MessageCancelledEvent)
		if serr := m.cfg.SyncNodeStatus(ctx); serr != nil {
			m.cfg.Logger.Warn("node status after shutdown cancellation", "err", serr)
		}
	}
	return err
}

// Cancel ends a running shutdown before its next group, or clears a
// finished one: the node goes back to Ready at the next status pass and
// admits pods again. Pods already stopped stay stopped (GNS-7). It reports
// whether there was anything to cancel.
func (m *Manager) Cancel() bool {
	m.mu.Lock()
	if m.running != nil {
		select {
		case <-m.cancel:
		default:
			close(m.cancel)
		}
		m.mu.Unlock()
		return true // Shutdown records the cancellation when it returns
	}
	was := m.shutting
	m.shutting = false
	m.mu.Unlock()
	if was {
		m.record(corev1.EventTypeNormal, ReasonNodeShutdown, MessageCancelledEvent)
	}
	return was
}

// Budget is the sum of the priority table's budgets (0 when disabled):
// how long a shutdown takes at most, not counting the wait for the API.
func (m *Manager) Budget() time.Duration { return Total(m.cfg.Table) }

func (m *Manager) run(ctx context.Context, cancel <-chan struct{}) error {
	log := m.cfg.Logger
	start := m.cfg.Clock.Now()
	// Bounded even when the API is gone: the machine must be let go.
	// On cancellation the pods already signalled go on stopping (GNS-7), so
	// this context then stays alive until the bound.
	ctx, stop := context.WithCancel(ctx)
	bound := m.cfg.Clock.NewTimer(m.cfg.NotReadyTimeout + Total(m.cfg.Table) + m.cfg.FinalStatusTimeout)
	cancelled := false
	defer func() {
		if !cancelled {
			bound.Stop()
			stop()
		}
	}()
	go func() {
		select {
		case <-bound.C():
			log.Warn("graceful node shutdown ran out of time; giving up on what is left")
			stop()
		case <-ctx.Done():
		}
	}()
	log.Info("graceful node shutdown started", "budget", Total(m.cfg.Table))
	m.record(corev1.EventTypeNormal, ReasonNodeShutdown, MessageShutdownEvent)
	m.saveState(State{StartTime: start})

	// Ready=False reaches the API before any pod is signalled (P3-4).
	nctx, ncancel := context.WithCancel(ctx)
	nt := m.cfg.Clock.NewTimer(m.cfg.NotReadyTimeout)
	go func() {
		select {
		case <-nt.C():
			ncancel()
		case <-nctx.Done():
		}
	}()
	err := retry(nctx, m.cfg.Clock, m.cfg.SyncNodeStatus)
	nt.Stop()
	ncancel()
	if err != nil {
		log.Warn("node not marked NotReady before stopping pods", "err", err)
	}

	seq := NewSequence(Plan(m.cfg.Table, m.cfg.Pods.Running()))
	var (
		mu      sync.Mutex
		stopped = map[types.UID]bool{}
		wg      sync.WaitGroup
	)
	changed := make(chan struct{}, 1)
	isStopped := func(uid types.UID) bool { mu.Lock(); defer mu.Unlock(); return stopped[uid] }
	for {
		select {
		case <-cancel:
			seq.Cancel()
		default:
		}
		step := seq.Step(m.cfg.Clock.Now(), isStopped)
		if step.Done {
			if step.Cancelled {
				// Pods already signalled finish stopping on their own;
				// the node is back without waiting for them.
				log.Info("graceful node shutdown cancelled")
				cancelled = true
				return ErrCancelled
			}
			break
		}
		if len(step.Kill) > 0 {
			b, _ := seq.Current()
			log.Info("stopping pod group", "priority", b.Priority, "budget", b.GracePeriod, "pods", len(step.Kill))
		}
		for _, k := range step.Kill {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := m.cfg.Pods.StopForShutdown(ctx, k.UID, k.Grace); err != nil {
					log.Warn("pod not stopped cleanly", "pod", k.Namespace+"/"+k.Name, "err", err)
				}
				mu.Lock()
				stopped[k.UID] = true
				mu.Unlock()
				select {
				case changed <- struct{}{}:
				default:
				}
			}()
		}
		wait := step.Wake.Sub(m.cfg.Clock.Now())
		timer := m.cfg.Clock.NewTimer(max(wait, 0))
		select {
		case <-changed:
		case <-cancel:
		case <-timer.C():
		case <-ctx.Done():
			timer.Stop()
			wg.Wait()
			return ctx.Err()
		}
		timer.Stop()
	}
	// Final statuses of pods past their group's budget are still being
	// written: wait for them too (their kills end at SIGKILL).
	wg.Wait()
	end := m.cfg.Clock.Now()
	m.saveState(State{StartTime: start, EndTime: end})
	log.Info("graceful node shutdown done", "took", end.Sub(start))
	return nil
}

func (m *Manager) saveState(st State) {
	if m.cfg.Gauges != nil {
		m.cfg.Gauges.set(st)
	}
	if m.cfg.StatePath == "" {
		return
	}
	if err := WriteState(m.cfg.StatePath, st); err != nil {
		m.cfg.Logger.Warn("shutdown state not saved", "err", err)
	}
}

func (m *Manager) record(eventType, reason, message string) {
	if m.cfg.Recorder != nil {
		m.cfg.Recorder.NodeEvent(eventType, reason, message)
	}
}

// retry calls f until it succeeds or ctx ends, backing off from 200 ms.
func retry(ctx context.Context, clk clock.Clock, f func(context.Context) error) error {
	backoff := 200 * time.Millisecond
	for {
		err := f(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-clk.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}
