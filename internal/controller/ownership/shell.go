package ownership

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/controller/manager"
)

// Shell is the part of a workload controller's shell that does not depend
// on what it controls: its settings, and per leadership term its queue,
// expectations and event recorder. Controllers embed it.
type Shell struct {
	Name    string
	Client  kubernetes.Interface
	Clock   clock.WithTicker
	Logger  *slog.Logger
	Workers int

	// per term
	Queue        workqueue.TypedRateLimitingInterface[string]
	Expectations *Expectations
	Recorder     record.EventRecorder
}

// NewShell returns the shell of the controller called name: a nil clock is
// the real one, a nil logger the default (tagged with name), and workers
// ≤ 0 are defaultWorkers.
func NewShell(name string, client kubernetes.Interface, clk clock.WithTicker, logger *slog.Logger, workers, defaultWorkers int) Shell {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if logger == nil {
		logger = slog.Default()
	}
	if workers <= 0 {
		workers = defaultWorkers
	}
	return Shell{Name: name, Client: client, Clock: clk, Logger: logger.With("controller", name), Workers: workers}
}

// StartTerm gives the shell a fresh queue called queue and, when
// expectationsTimeout > 0, fresh expectations that lapse after it.
func (s *Shell) StartTerm(queue string, expectationsTimeout time.Duration) {
	s.Queue = manager.NewQueue(queue, s.Clock)
	if expectationsTimeout > 0 {
		s.Expectations = NewExpectations(expectationsTimeout)
	}
}

// Run records events as the controller and runs Workers workers syncing
// the queue's keys (what names them in logs) until ctx ends.
func (s *Shell) Run(ctx context.Context, sync manager.SyncFunc, what string) {
	recorder, stop := manager.EventRecorder(ctx, s.Client, s.Name)
	defer stop()
	s.Recorder = recorder
	manager.RunWorkers(ctx, s.Queue, s.Workers, sync, s.Logger, what)
}

// Defaulted returns v, or def when v ≤ 0.
func Defaulted[T int | int32 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Config configures the shell of a pod-owning controller.
type Config struct {
	Client kubernetes.Interface
	Clock  clock.WithTicker
	Logger *slog.Logger
	// Workers is how many owners sync at once (upstream
	// --concurrent-<kind>-syncs).
	Workers int
	// BurstReplicas caps the pods one sync creates or deletes.
	BurstReplicas int
	// ExpectationsTimeout is how long a sync waits for the informer to
	// show its creates and deletes before trusting the cache anyway
	// (DefaultExpectationsTimeout).
	ExpectationsTimeout time.Duration
}

// NewShell returns the shell of the controller called name with cfg's
// zero fields taken from def, and cfg so completed.
func (cfg Config) NewShell(name string, def Config) (Shell, Config) {
	cfg.BurstReplicas = Defaulted(cfg.BurstReplicas, def.BurstReplicas)
	cfg.ExpectationsTimeout = Defaulted(cfg.ExpectationsTimeout, def.ExpectationsTimeout)
	s := NewShell(name, cfg.Client, cfg.Clock, cfg.Logger, cfg.Workers, def.Workers)
	cfg.Clock, cfg.Logger, cfg.Workers = s.Clock, s.Logger, s.Workers
	return s, cfg
}
