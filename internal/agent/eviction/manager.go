package eviction

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/agent/config"
	"github.com/nodeplane/nodeplane/internal/agent/host"
)

// Pods is what the manager needs from the agent's pod manager.
type Pods interface {
	// Active lists the running pods with their usage, measured now.
	Active() []Pod
	// Evict stops the pod within grace and posts its final status (Failed,
	// reason Evicted, message, DisruptionTarget=True) and its Evicted
	// event; it returns once the pod's processes are gone.
	Evict(ctx context.Context, e Eviction) error
}

// Config configures a Manager.
type Config struct {
	Settings config.Settings
	// Observe reads the host's eviction signals.
	Observe func() (host.Signals, error)
	Pods    Pods
	// OnChange runs when the pressure conditions change (post node status).
	OnChange func()
	// Metrics registers kubelet_evictions (nil: not registered).
	Metrics prometheus.Registerer
	Clock   clock.WithTicker
	Logger  *slog.Logger
}

// Manager runs the eviction loop. Its methods are safe for concurrent use.
type Manager struct {
	cfg       Config
	policy    Policy
	evictions *prometheus.CounterVec

	mu         sync.Mutex
	state      State
	conditions []corev1.NodeConditionType
}

// New returns a Manager for cfg.
func New(cfg Config) (*Manager, error) {
	if cfg.Observe == nil || cfg.Pods == nil {
		return nil, errors.New("eviction: Observe and Pods are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Settings.EvictionMonitoringPeriod <= 0 {
		cfg.Settings.EvictionMonitoringPeriod = config.DefaultEvictionMonitoringPeriod
	}
	m := &Manager{
		cfg: cfg,
		policy: Policy{
			Thresholds:        Thresholds(cfg.Settings),
			TransitionPeriod:  cfg.Settings.EvictionPressureTransitionPeriod,
			MaxPodGracePeriod: time.Duration(cfg.Settings.EvictionMaxPodGracePeriod) * time.Second,
		},
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "evictions",
			Help: "Cumulative number of pod evictions by eviction signal",
		}, []string{"eviction_signal"}),
	}
	if cfg.Metrics != nil {
		if err := cfg.Metrics.Register(m.evictions); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Conditions returns the pressure conditions that hold now.
func (m *Manager) Conditions() []corev1.NodeConditionType {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.conditions)
}

// Pressure reports the three pressure conditions (for node status).
func (m *Manager) Pressure() (memory, disk, pid bool) {
	c := m.Conditions()
	return slices.Contains(c, corev1.NodeMemoryPressure), slices.Contains(c, corev1.NodeDiskPressure), slices.Contains(c, corev1.NodePIDPressure)
}

// Admit is the admission check for a new pod under the current conditions.
func (m *Manager) Admit(pod *corev1.Pod) (ok bool, reason, message string) {
	return Admit(pod, m.Conditions())
}

// Run observes every monitoring period until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	t := m.cfg.Clock.NewTicker(m.cfg.Settings.EvictionMonitoringPeriod)
	defer t.Stop()
	for {
		m.Synchronize(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// Synchronize runs one observation: decide, publish the conditions, and
// evict at most one pod, returning once it is gone.
func (m *Manager) Synchronize(ctx context.Context) {
	signals, err := m.cfg.Observe()
	if err != nil {
		m.cfg.Logger.Debug("eviction signals incomplete", "err", err)
	}
	var pods []Pod
	if len(m.policy.Thresholds) > 0 {
		pods = m.cfg.Pods.Active()
	}
	m.mu.Lock()
	d := Decide(m.policy, &m.state, Observe(signals), pods, m.cfg.Clock.Now())
	changed := !slices.Equal(d.Conditions, m.conditions)
	m.conditions = d.Conditions
	m.mu.Unlock()
	if changed {
		m.cfg.Logger.Info("node pressure conditions changed", "conditions", d.Conditions)
		if m.cfg.OnChange != nil {
			m.cfg.OnChange()
		}
	}
	if d.Evict == nil {
		if len(d.Met) > 0 {
			m.cfg.Logger.Warn("eviction threshold met but no pod can be evicted", "signal", d.Met[0].Signal)
		}
		return
	}
	e := *d.Evict
	m.cfg.Logger.Warn("evicting pod", "pod", e.Pod.Namespace+"/"+e.Pod.Name, "signal", e.Signal, "message", e.Message)
	if err := m.cfg.Pods.Evict(ctx, e); err != nil {
		m.cfg.Logger.Warn("eviction failed", "pod", e.Pod.Namespace+"/"+e.Pod.Name, "err", err)
		return
	}
	m.evictions.WithLabelValues(string(e.Signal)).Inc()
}
