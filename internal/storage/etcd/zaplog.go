package etcd

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newZapLogger returns a zap logger, as the etcd server and client require,
// that writes every entry at minLevel or above to logger. etcd's field names
// (kebab-case) are kept as they are. While demote is set (it may be nil),
// every entry is logged at debug level.
func newZapLogger(logger *slog.Logger, minLevel slog.Leveler, demote *atomic.Bool) *zap.Logger {
	return zap.New(&slogCore{handler: logger.Handler(), minLevel: minLevel, demote: demote})
}

// slogCore is a zapcore.Core over a slog.Handler.
type slogCore struct {
	handler  slog.Handler
	minLevel slog.Leveler
	demote   *atomic.Bool
}

func (c *slogCore) level(level zapcore.Level) slog.Level {
	if c.demote != nil && c.demote.Load() {
		return slog.LevelDebug
	}
	return slogLevel(level)
}

func (c *slogCore) Enabled(level zapcore.Level) bool {
	l := c.level(level)
	return l >= c.minLevel.Level() && c.handler.Enabled(context.Background(), l)
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{handler: c.handler.WithAttrs(toAttrs(fields)), minLevel: c.minLevel, demote: c.demote}
}

func (c *slogCore) Check(entry zapcore.Entry, checked *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(entry.Level) {
		return checked.AddCore(entry, c)
	}
	return checked
}

func (c *slogCore) Write(entry zapcore.Entry, fields []zapcore.Field) error {
	r := slog.NewRecord(entry.Time, c.level(entry.Level), entry.Message, 0)
	if entry.LoggerName != "" {
		r.AddAttrs(slog.String("logger", entry.LoggerName))
	}
	r.AddAttrs(toAttrs(fields)...)
	return c.handler.Handle(context.Background(), r)
}

func (c *slogCore) Sync() error { return nil }

func slogLevel(level zapcore.Level) slog.Level {
	switch {
	case level <= zapcore.DebugLevel:
		return slog.LevelDebug
	case level == zapcore.InfoLevel:
		return slog.LevelInfo
	case level == zapcore.WarnLevel:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

// toAttrs encodes zap fields with zap's own map encoder, then sorts them by
// key so the output does not depend on map order.
func toAttrs(fields []zapcore.Field) []slog.Attr {
	if len(fields) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	attrs := make([]slog.Attr, 0, len(enc.Fields))
	for k, v := range enc.Fields {
		attrs = append(attrs, slog.Any(k, v))
	}
	slices.SortFunc(attrs, func(a, b slog.Attr) int { return cmp.Compare(a.Key, b.Key) })
	return attrs
}
