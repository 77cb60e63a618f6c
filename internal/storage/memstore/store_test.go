package memstore

import (
	"time"

	"testing"

	"github.com/nodeplane/nodeplane/internal/storage"
	"github.com/nodeplane/nodeplane/internal/storage/storagetest"
)

func newTestStore(t *testing.T, cfg Config) *Store {
	t.Helper()
	s, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	t.Run("in memory", func(t *testing.T) {
		storagetest.RunConformance(t, func(t *testing.T) storage.Interface {
			return newTestStore(t, Config{InitialRevision: 100, ProgressInterval: 100 * time.Millisecond})
		})
	})
	t.Run("persisted to a directory", func(t *testing.T) {
		storagetest.RunConformance(t, func(t *testing.T) storage.Interface {
			return newTestStore(t, Config{Dir: t.TempDir(), RevisionBlock: 4, InitialRevision: 100, ProgressInterval: 100 * time.Millisecond})
		})
	})
}
