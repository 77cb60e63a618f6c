package etcd

import (
	"log/slog"
	"os"
	"testing"
	"time"
)

func TestScratchTime(t *testing.T) {
	start := time.Now()
	m, err := StartEmbedded(t.Context(), EmbeddedConfig{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)), LogLevel: slog.LevelDebug})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("start %v", time.Since(start))
	m.Close()
}
