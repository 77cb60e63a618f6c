package storagetest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/nodeplane/nodeplane/internal/storage"
)

var listCases = []testCase{
	{"list returns the keys under the prefix in key order at the current revision", func(t *testing.T, s storage.Interface, p string) {
		for _, k := range []string{"c", "a", "b"} {
			mustCreate(t, s, p+k, "value-"+k)
		}
		rev := mustRevision(t, s)
		got, err := s.List(t.Context(), p, storage.ListOptions{})
		if err != nil {
			t.Fatalf("List = %v", err)
		}
		if keys := keysOf(got.Items); !slices.Equal(keys, []string{p + "a", p + "b", p + "c"}) {
			t.Errorf("List keys = %q", keys)
		}
		if string(got.Items[0].Value) != "value-a" {
			t.Errorf("first value = %q, want value-a", got.Items[0].Value)
		}
		if got.Revision < rev || got.More || got.Remaining != 0 {
			t.Errorf("List = revision %d, more %v, remaining %d; want revision >= %d, no more, 0 remaining", got.Revision, got.More, got.Remaining, rev)
		}
	}},
	{"list of an empty prefix returns no items", func(t *testing.T, s storage.Interface, p string) {
		got, err := s.List(t.Context(), p, storage.ListOptions{})
		if err != nil || len(got.Items) != 0 || got.More {
			t.Errorf("List = %+v, %v; want nothing", got, err)
		}
	}},
	{"list of a directory prefix excludes siblings that share its leading characters", func(t *testing.T, s storage.Interface, p string) {
		mustCreate(t, s, p+"a/b/1", "in")
		mustCreate(t, s, p+"a/bc/1", "sibling")
		mustCreate(t, s, p+"a/b", "parent")
		got, err := s.List(t.Context(), p+"a/b/", storage.ListOptions{})
		if err != nil {
			t.Fatalf("List = %v", err)
		}
		if keys := keysOf(got.Items); !slices.Equal(keys, []string{p + "a/b/1"}) {
			t.Errorf("List(%q) keys = %q, want only %q", p+"a/b/", keys, p+"a/b/1")
		}
		n, err := s.Count(t.Context(), p+"a/b/")
		if err != nil || n != 1 {
			t.Errorf("Count(%q) = %d, %v; want 1", p+"a/b/", n, err)
		}
	}},
	{"list pages with limit and start key form one consistent snapshot", func(t *testing.T, s storage.Interface, p string) {
		var want []string
		for i := range 10 {
			k := fmt.Sprintf("%sk%02d", p, i)
			mustCreate(t, s, k, "before")
			want = append(want, k)
		}
		first, err := s.List(t.Context(), p, storage.ListOptions{Limit: 3})
		if err != nil {
			t.Fatalf("first page: %v", err)
		}
		if len(first.Items) != 3 || !first.More || first.Remaining != 7 {
			t.Fatalf("first page = %d items, more %v, remaining %d; want 3, true, 7", len(first.Items), first.More, first.Remaining)
		}
		// Writes after the first page must not show in the later ones.
		last, err := s.Get(t.Context(), want[9])
		if err != nil {
			t.Fatal(err)
		}
		mustUpdate(t, s, want[9], "after", last.ModRevision)
		mustCreate(t, s, p+"k05a", "after")

		got := keysOf(first.Items)
		page := first
		for page.More {
			next := page.Items[len(page.Items)-1].Key + "\x00"
			page, err = s.List(t.Context(), p, storage.ListOptions{Limit: 3, StartKey: next, Revision: first.Revision})
			if err != nil {
				t.Fatalf("page from %q: %v", next, err)
			}
			if page.Revision != first.Revision {
				t.Errorf("page revision %d, want %d", page.Revision, first.Revision)
			}
			for _, kv := range page.Items {
				if string(kv.Value) != "before" {
					t.Errorf("%s = %q in the snapshot, want before", kv.Key, kv.Value)
				}
			}
			got = append(got, keysOf(page.Items)...)
			if len(got) > len(want) {
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("paged keys = %q, want %q", got, want)
		}
	}},
	{"list at an old revision returns the values of that revision", func(t *testing.T, s storage.Interface, p string) {
		ra := mustCreate(t, s, p+"a", "a1")
		mustCreate(t, s, p+"b", "b1")
		old := mustRevision(t, s)
		mustUpdate(t, s, p+"a", "a2", ra)
		mustDelete(t, s, p+"b")
		mustCreate(t, s, p+"c", "c1")
		got, err := s.List(t.Context(), p, storage.ListOptions{Revision: old})
		if err != nil {
			t.Fatalf("List at %d = %v", old, err)
		}
		if got.Revision != old {
			t.Errorf("List revision = %d, want %d", got.Revision, old)
		}
		var values []string
		for _, kv := range got.Items {
			values = append(values, string(kv.Value))
		}
		if !slices.Equal(values, []string{"a1", "b1"}) {
			t.Errorf("List at %d values = %q, want [a1 b1]", old, values)
		}
	}},
	{"list at a compacted revision fails with ErrCompacted", func(t *testing.T, s storage.Interface, p string) {
		rev := mustCreate(t, s, p+"a", "a1")
		mustUpdate(t, s, p+"a", "a2", rev)
		if err := s.Compact(t.Context(), mustRevision(t, s)); err != nil {
			t.Fatalf("Compact = %v", err)
		}
		_, err := s.List(t.Context(), p, storage.ListOptions{Revision: rev})
		wantErr(t, "List at a compacted revision", err, storage.ErrCompacted)
	}},
	{"list at a future revision fails with ErrFutureRevision", func(t *testing.T, s storage.Interface, p string) {
		future := mustRevision(t, s) + 1000
		_, err := s.List(t.Context(), p, storage.ListOptions{Revision: future})
		wantErr(t, "List at a future revision", err, storage.ErrFutureRevision)
	}},
	{"list with a start key outside the prefix fails", func(t *testing.T, s storage.Interface, p string) {
		if _, err := s.List(t.Context(), p+"a/", storage.ListOptions{StartKey: p + "b/x"}); err == nil {
			t.Error("List with a foreign start key succeeded")
		}
	}},
	{"count returns the number of keys under the prefix", func(t *testing.T, s storage.Interface, p string) {
		for i := range 5 {
			mustCreate(t, s, fmt.Sprintf("%sin/%d", p, i), "v")
		}
		mustCreate(t, s, p+"out", "v")
		n, err := s.Count(t.Context(), p+"in/")
		if err != nil || n != 5 {
			t.Errorf("Count = %d, %v; want 5", n, err)
		}
		n, err = s.Count(t.Context(), p+"none/")
		if err != nil || n != 0 {
			t.Errorf("Count of an empty prefix = %d, %v; want 0", n, err)
		}
	}},
}

func keysOf(items []storage.KeyValue) []string {
	keys := make([]string, len(items))
	for i, kv := range items {
		keys[i] = kv.Key
	}
	return keys
}
