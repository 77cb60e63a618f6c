package memstore

import (
	"slices"
	"sort"
	"sync"

	"github.com/nodeplane/nodeplane/internal/storage"
)

// A paginated list continues at the revision of its first page. Reading a
// past revision undoes the history's later writes, so it works only while
// the ring still holds them: 65,536 writes are 6.5 s of 100,000 nodes'
// renewals at the default 10 s, and kubectl fetching 100,000 leases 500 at
// a time takes longer than that. So a first page that leaves keys for
// later pages keeps what it listed — the keys and values at its revision,
// sharing the value slices (about 64 bytes a key) — and the pages after it
// are read from that view. The last maxListViews views are kept, none
// below the compacted revision: a continue token then lasts until the
// store is compacted past it, as etcd's do, or until four newer paginated
// lists have started.

// maxListViews bounds the views kept: about 25 MB at 100,000 keys.
const maxListViews = 4

// listView is the content under prefix at rev, sorted by key.
type listView struct {
	rev    int64
	prefix string
	kvs    []storage.KeyValue
}

// listViews is the store's kept views, newest last.
type listViews struct {
	mu    sync.Mutex
	views []*listView
}

// add keeps v, dropping the oldest view past the bound.
func (l *listViews) add(v *listView) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.views) == maxListViews {
		l.views[0] = nil
		l.views = l.views[1:]
	}
	l.views = append(l.views, v)
}

// find returns the view of prefix at rev, or nil.
func (l *listViews) find(rev int64, prefix string) *listView {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range l.views {
		if v.rev == rev && v.prefix == prefix {
			return v
		}
	}
	return nil
}

// dropBelow forgets the views of revisions below rev (compacted).
func (l *listViews) dropBelow(rev int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.views = slices.DeleteFunc(l.views, func(v *listView) bool { return v.rev < rev })
}

// newListViewLocked copies the keys under prefix at the current revision.
// s.mu is held (for reading at least).
func (s *Store) newListViewLocked(prefix string) *listView {
	i0, i1 := s.rangeLocked(prefix, prefix)
	kvs := make([]storage.KeyValue, i1-i0)
	for i, k := range s.keys[i0:i1] {
		kvs[i] = s.entries[k].keyValue()
	}
	return &listView{rev: s.rev, prefix: prefix, kvs: kvs}
}

// page is the page of v from start, at most limit items (< 0: all).
func (v *listView) page(start string, limit int) storage.ListResult {
	i := sort.Search(len(v.kvs), func(i int) bool { return v.kvs[i].Key >= start })
	n := len(v.kvs) - i
	if limit >= 0 && limit < n {
		n = limit
	}
	res := storage.ListResult{Revision: v.rev, Items: append([]storage.KeyValue(nil), v.kvs[i:i+n]...)}
	res.Remaining = int64(len(v.kvs) - i - n)
	res.More = res.Remaining > 0
	return res
}
