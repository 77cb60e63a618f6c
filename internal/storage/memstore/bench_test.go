package memstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/nodeplane/nodeplane/internal/storage"
)

// BenchmarkUpdate is the store's share of a lease renewal: a
// compare-and-swap of one of 10,000 keys, with one watcher of the prefix
// (the API server's watch cache) reading the events. Allocations are the
// figure (docs/performance.md); run with:
//
//	go test ./internal/storage/memstore/ -run '^$' -bench BenchmarkUpdate -benchmem
func BenchmarkUpdate(b *testing.B) {
	s, err := Open(Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const keys = 10000
	names := make([]string, keys)
	revs := make([]int64, keys)
	for i := range keys {
		names[i] = fmt.Sprintf("/registry/leases/kube-node-lease/node-%05d", i)
		if revs[i], err = s.Create(ctx, names[i], []byte("lease")); err != nil {
			b.Fatal(err)
		}
	}
	ch, err := s.Watch(ctx, "/registry/leases/", storage.WatchOptions{})
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for range ch { // the watch cache would decode them here
		}
	}()
	value := []byte("renewed lease value of a realistic-ish size")
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		k := i % keys
		if revs[k], err = s.Update(ctx, names[k], value, revs[k]); err != nil {
			b.Fatal(err)
		}
	}
}
