package nodestatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Defaults (SPEC §3.1).
const (
	DefaultUpdateFrequency = 10 * time.Second
	DefaultReportFrequency = 5 * time.Minute
	// updateRetries is nodeStatusUpdateRetry: attempts per pass.
	updateRetries = 5
)

// Client is what the updater needs from the API.
type Client interface {
	GetNode(ctx context.Context, name string) (*corev1.Node, error)
	// PatchNodeStatus applies a JSON merge patch to nodes/<name>/status.
	PatchNodeStatus(ctx context.Context, name string, patch []byte) (*corev1.Node, error)
	// PatchNode applies a JSON merge patch to the Node itself (labels).
	PatchNode(ctx context.Context, name string, patch []byte) (*corev1.Node, error)
}

// Recorder records node events.
type Recorder interface {
	NodeEvent(eventType, reason, message string)
}

// Config configures an Updater.
type Config struct {
	NodeName string
	Client   Client
	// Observe reports the host for one pass.
	Observe func(ctx context.Context) (Observation, error)
	// Cached returns the Node from a watch cache, if the caller keeps one
	// (first attempt of each pass reads it; later attempts GET). Optional:
	// without it the updater uses the last Node it wrote.
	Cached   func() (*corev1.Node, bool)
	Recorder Recorder
	Clock    clock.WithTicker
	// UpdateFrequency is how often status is recomputed (nodeStatusUpdateFrequency).
	UpdateFrequency time.Duration
	// ReportFrequency is the longest silence when nothing changed
	// (nodeStatusReportFrequency); it must be ≥ UpdateFrequency.
	ReportFrequency time.Duration
	// OnRepeatedFailure runs on the 2nd and later failed attempts of a pass.
	OnRepeatedFailure func()
	Logger            *slog.Logger
}

// Updater posts node status. Concurrent Syncs run one after the other, so
// a pass that observed the host earlier never overwrites a later one.
type Updater struct {
	cfg    Config
	syncMu sync.Mutex

	mu              sync.Mutex
	last            *corev1.Node
	lastReport      time.Time
	lastUnschedulab *bool
	patches         int64
}

// NewUpdater returns an Updater.
func NewUpdater(cfg Config) (*Updater, error) {
	if cfg.NodeName == "" || cfg.Client == nil || cfg.Observe == nil {
		return nil, errors.New("nodestatus: NodeName, Client and Observe are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.UpdateFrequency <= 0 {
		cfg.UpdateFrequency = DefaultUpdateFrequency
	}
	if cfg.ReportFrequency <= 0 {
		cfg.ReportFrequency = DefaultReportFrequency
	}
	if cfg.ReportFrequency < cfg.UpdateFrequency {
		return nil, fmt.Errorf("nodestatus: report frequency %v is below the update frequency %v", cfg.ReportFrequency, cfg.UpdateFrequency)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Updater{cfg: cfg}, nil
}

// Remember records a Node written elsewhere (registration) as the last
// written one, with now as the last report time.
func (u *Updater) Remember(n *corev1.Node) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.last = n
	u.lastReport = u.cfg.Clock.Now()
}

// ReportNow makes the next Sync send the full status even if nothing
// changed (a node coming back from a partition re-posts at once).
func (u *Updater) ReportNow() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.lastReport = time.Time{}
}

// Last returns the last Node the updater wrote or read.
func (u *Updater) Last() (*corev1.Node, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.last, u.last != nil
}

// Patches counts status patches sent.
func (u *Updater) Patches() int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.patches
}

// Run syncs every UpdateFrequency until ctx ends.
func (u *Updater) Run(ctx context.Context) {
	t := u.cfg.Clock.NewTicker(u.cfg.UpdateFrequency)
	defer t.Stop()
	for {
		if err := u.Sync(ctx); err != nil && ctx.Err() == nil {
			u.cfg.Logger.Warn("node status update failed", "node", u.cfg.NodeName, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// Sync runs one status pass: up to five attempts, the first from the cache,
// later ones from a fresh GET.
func (u *Updater) Sync(ctx context.Context) error {
	u.syncMu.Lock()
	defer u.syncMu.Unlock()
	var err error
	for attempt := range updateRetries {
		if err = u.try(ctx, attempt); err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		if attempt >= 1 && u.cfg.OnRepeatedFailure != nil {
			u.cfg.OnRepeatedFailure()
		}
	}
	return fmt.Errorf("update node status after %d attempts: %w", updateRetries, err)
}

func (u *Updater) try(ctx context.Context, attempt int) error {
	var node *corev1.Node
	if attempt == 0 {
		if u.cfg.Cached != nil {
			node, _ = u.cfg.Cached()
		}
		if node == nil {
			node, _ = u.Last()
		}
	}
	if node == nil {
		n, err := u.cfg.Client.GetNode(ctx, u.cfg.NodeName)
		if err != nil {
			return fmt.Errorf("get node %q: %w", u.cfg.NodeName, err)
		}
		node = n
	}
	obs, err := u.cfg.Observe(ctx)
	if err != nil {
		return fmt.Errorf("observe host: %w", err)
	}
	now := u.cfg.Clock.Now()
	status, events := Compute(node, obs, now)

	u.mu.Lock()
	due := now.Sub(u.lastReport) >= u.cfg.ReportFrequency
	u.mu.Unlock()

	if fix := labelFixes(node, obs.NodeInfo); fix != nil {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": fix}})
		n, err := u.cfg.Client.PatchNode(ctx, u.cfg.NodeName, patch)
		if err != nil {
			return fmt.Errorf("fix node labels: %w", err)
		}
		node = n
	}

	if Changed(node.Status, status) || due {
		patch, err := statusPatch(status)
		if err != nil {
			return fmt.Errorf("encode status: %w", err)
		}
		n, err := u.cfg.Client.PatchNodeStatus(ctx, u.cfg.NodeName, patch)
		if err != nil {
			return fmt.Errorf("patch node %q status: %w", u.cfg.NodeName, err)
		}
		node = n
		u.mu.Lock()
		u.lastReport = now
		u.patches++
		u.mu.Unlock()
		u.record(events)
	}

	u.mu.Lock()
	u.last = node
	ev := SchedulabilityEvent(u.cfg.NodeName, u.lastUnschedulab, node.Spec.Unschedulable)
	unsched := node.Spec.Unschedulable
	u.lastUnschedulab = &unsched
	u.mu.Unlock()
	if ev != nil {
		u.record([]Event{*ev})
	}
	return nil
}

func (u *Updater) record(events []Event) {
	if u.cfg.Recorder == nil {
		return
	}
	for _, e := range events {
		u.cfg.Recorder.NodeEvent(e.Type, e.Reason, e.Message)
	}
}

// labelFixes returns the os/arch labels to set when they are missing or
// wrong (SPEC KUB-5), or nil.
func labelFixes(node *corev1.Node, info corev1.NodeSystemInfo) map[string]string {
	want := map[string]string{
		corev1.LabelOSStable:   info.OperatingSystem,
		corev1.LabelArchStable: info.Architecture,
	}
	var fix map[string]string
	for k, v := range want {
		if v != "" && node.Labels[k] != v {
			if fix == nil {
				fix = map[string]string{}
			}
			fix[k] = v
		}
	}
	return fix
}

// statusPatch is the merge patch of the agent's status fields. It leaves
// out volumesAttached, which the attach/detach controller owns (a stale
// copy must not overwrite its update), and sets volumesInUse explicitly,
// null when empty, so that the last volume in use is removed.
func statusPatch(status corev1.NodeStatus) ([]byte, error) {
	b, err := json.Marshal(status)
	if err != nil {
		return nil, err
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	delete(fields, "volumesAttached")
	if len(status.VolumesInUse) == 0 {
		fields["volumesInUse"] = nil
	}
	return json.Marshal(map[string]any{"status": fields})
}
