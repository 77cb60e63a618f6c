// Package logging builds the process's slog logger from flags and routes
// client-go's klog output into it, so every component logs the same way.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Options are the logging flags.
type Options struct {
	Level  string // debug, info, warn, error
	Format string // text or json
}

// AddFlags registers --log-level and --log-format.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Level, "log-level", o.Level, "Log level: debug, info, warn or error")
	fs.StringVar(&o.Format, "log-format", o.Format, "Log format: text or json")
}

// New returns a logger writing to w and makes it the default logger and
// klog's sink (where client-go's flooding event-drop messages are logged at
// most once per 10 s each, with the number held back).
func New(w io.Writer, o Options) (*slog.Logger, error) {
	var level slog.Level
	switch strings.ToLower(o.Level) {
	case "", "info":
		level = slog.LevelInfo
	case "debug":
		level = slog.LevelDebug
	case "warn", "warning":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		return nil, fmt.Errorf("--log-level: unknown level %q (want debug, info, warn or error)", o.Level)
	}
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch strings.ToLower(o.Format) {
	case "", "text":
		h = slog.NewTextHandler(w, hopts)
	case "json":
		h = slog.NewJSONHandler(w, hopts)
	default:
		return nil, fmt.Errorf("--log-format: unknown format %q (want text or json)", o.Format)
	}
	logger := slog.New(h)
	slog.SetDefault(logger)
	// client-go logs through klog; its event recorder's drop messages are
	// collapsed (collapse.go).
	klog.SetSlogLogger(slog.New(newCollapser(h, eventFloodMessages, collapseWindow, clock.RealClock{})))
	return logger, nil
}
