package etcd

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/storage"
)

// Compacter is what RunCompactor needs from a store; *Store has it.
type Compacter interface {
	CurrentRevision(ctx context.Context) (int64, error)
	Compact(ctx context.Context, revision int64) error
}

// CompactorConfig configures RunCompactor.
type CompactorConfig struct {
	// Interval between compactions, and the history kept: each run compacts
	// to the revision observed one Interval earlier, so a watch that
	// falls at most Interval behind can always resume. Default 5m, as
	// kube-apiserver's --etcd-compaction-interval.
	Interval time.Duration
	// Clock drives the ticker. Default: the real clock.
	Clock clock.WithTicker
	// Logger reports failed compactions. Default slog.Default().
	Logger *slog.Logger
}

// DefaultCompactorConfig returns the defaults.
func DefaultCompactorConfig() CompactorConfig {
	return CompactorConfig{Interval: 5 * time.Minute, Clock: clock.RealClock{}, Logger: slog.Default()}
}

// RunCompactor compacts the store's history every Interval until ctx is
// done. Each tick it compacts to the revision it read at the previous tick,
// then reads the current revision for the next one. Several API servers may
// run it against one etcd: they never compact history younger than Interval,
// and a compaction someone else already did is not an error.
func RunCompactor(ctx context.Context, store Compacter, cfg CompactorConfig) {
	d := DefaultCompactorConfig()
	if cfg.Interval <= 0 {
		cfg.Interval = d.Interval
	}
	if cfg.Clock == nil {
		cfg.Clock = d.Clock
	}
	if cfg.Logger == nil {
		cfg.Logger = d.Logger
	}
	ticker := cfg.Clock.NewTicker(cfg.Interval)
	defer ticker.Stop()

	// A failed read leaves 0: nothing is compacted until a read succeeds.
	last := compactOnce(ctx, store, 0, cfg.Logger)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
		last = compactOnce(ctx, store, last, cfg.Logger)
	}
}

// compactOnce compacts to target (when positive) and returns the revision to
// compact to next time: the current one, or target again if it cannot be
// read (an older target still keeps at least Interval of history).
func compactOnce(ctx context.Context, store Compacter, target int64, logger *slog.Logger) int64 {
	if target > 0 {
		err := store.Compact(ctx, target)
		if err != nil && !errors.Is(err, storage.ErrCompacted) && ctx.Err() == nil {
			logger.WarnContext(ctx, "storage compaction failed", "revision", target, "err", err)
		}
	}
	current, err := store.CurrentRevision(ctx)
	if err != nil {
		if ctx.Err() == nil {
			logger.WarnContext(ctx, "storage revision read failed; compacting to the previous revision next time", "err", err)
		}
		return target
	}
	return current
}
