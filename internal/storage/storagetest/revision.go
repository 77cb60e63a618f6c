package storagetest

import (
	"testing"

	"github.com/nodeplane/nodeplane/internal/storage"
)

var revisionCases = []testCase{
	{"current revision is the revision of the latest write", func(t *testing.T, s storage.Interface, p string) {
		before := mustRevision(t, s)
		rev := mustCreate(t, s, p+"k", "v")
		if rev <= before {
			t.Errorf("Create revision %d, want > %d", rev, before)
		}
		// Other writers may share the store, so the current revision is at
		// least the write's.
		if now := mustRevision(t, s); now < rev {
			t.Errorf("CurrentRevision = %d, want >= %d", now, rev)
		}
	}},
	{"compaction keeps the latest values readable", func(t *testing.T, s storage.Interface, p string) {
		rev := mustCreate(t, s, p+"k", "v1")
		mustUpdate(t, s, p+"k", "v2", rev)
		if err := s.Compact(t.Context(), mustRevision(t, s)); err != nil {
			t.Fatalf("Compact = %v", err)
		}
		got, err := s.Get(t.Context(), p+"k")
		if err != nil || string(got.Value) != "v2" {
			t.Errorf("Get after Compact = %+v, %v; want v2", got, err)
		}
		list, err := s.List(t.Context(), p, storage.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			t.Errorf("List after Compact = %+v, %v; want one item", list, err)
		}
	}},
	{"compact to a future revision fails with ErrFutureRevision", func(t *testing.T, s storage.Interface, p string) {
		err := s.Compact(t.Context(), mustRevision(t, s)+1000)
		wantErr(t, "Compact", err, storage.ErrFutureRevision)
	}},
}
