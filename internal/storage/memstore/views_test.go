package memstore

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nodeplane/nodeplane/internal/storage"
)

// listAll pages through prefix from a first page read now, limit at a
// time, calling between before each next page; it returns every key=value.
func listAll(t *testing.T, s *Store, prefix string, limit int64, between func()) ([]string, error) {
	t.Helper()
	page, err := s.List(t.Context(), prefix, storage.ListOptions{Limit: limit})
	if err != nil {
		return nil, err
	}
	out := summary(page.Items)
	for page.More {
		between()
		next := page.Items[len(page.Items)-1].Key + "\x00"
		if page, err = s.List(t.Context(), prefix, storage.ListOptions{Revision: page.Revision, Limit: limit, StartKey: next}); err != nil {
			return out, err
		}
		out = append(out, summary(page.Items)...)
	}
	return out, nil
}

func TestAPaginatedListOutlastsTheHistory(t *testing.T) {
	s := newTestStore(t, Config{History: 16, InitialRevision: 10})
	var want []string
	revs := map[string]int64{}
	for i := range 30 {
		k := fmt.Sprintf("/l/%02d", i)
		revs[k] = mustCreate(t, s, k, "v1")
		want = append(want, k+"=v1")
	}
	// Between pages every key is written again: far more writes than the
	// history holds. The pages still show the content of the first one.
	got, err := listAll(t, s, "/l/", 7, func() {
		for k, r := range revs {
			revs[k] = mustUpdate(t, s, k, "v2", r)
		}
	})
	if err != nil {
		t.Fatalf("continuing the list after %d writes: %v", 4*30, err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("pages = %v\nwant %v", got, want)
	}
}

func TestAListViewLastsUntilCompactedOrReplaced(t *testing.T) {
	for _, tc := range []struct {
		name    string
		between func(t *testing.T, s *Store, first storage.ListResult)
	}{
		{"compacting past the first page's revision ends it", func(t *testing.T, s *Store, first storage.ListResult) {
			cur, _ := s.CurrentRevision(t.Context())
			if err := s.Compact(t.Context(), cur); err != nil {
				t.Fatal(err)
			}
		}},
		{"four newer paginated lists end it", func(t *testing.T, s *Store, first storage.ListResult) {
			for i := range maxListViews {
				// A write between lists: each view is of a revision of its own.
				mustCreate(t, s, fmt.Sprintf("/other/%d", i), "x")
				if _, err := s.List(t.Context(), "/l/", storage.ListOptions{Limit: 2}); err != nil {
					t.Fatal(err)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestStore(t, Config{History: 4, InitialRevision: 10})
			for i := range 10 {
				mustCreate(t, s, fmt.Sprintf("/l/%02d", i), "v1")
			}
			first, err := s.List(t.Context(), "/l/", storage.ListOptions{Limit: 3})
			if err != nil || !first.More {
				t.Fatalf("first page: %v, more %v", err, first.More)
			}
			for i := range 8 { // past the history
				mustCreate(t, s, fmt.Sprintf("/x/%d", i), "x")
			}
			tc.between(t, s, first)
			_, err = s.List(t.Context(), "/l/", storage.ListOptions{Revision: first.Revision, Limit: 3, StartKey: "/l/03"})
			if !errors.Is(err, storage.ErrCompacted) {
				t.Fatalf("continue = %v, want ErrCompacted", err)
			}
		})
	}
}

func TestAnUnpaginatedListKeepsNoView(t *testing.T) {
	s := newTestStore(t, Config{History: 4, InitialRevision: 10})
	for i := range 5 {
		mustCreate(t, s, fmt.Sprintf("/l/%d", i), "v")
	}
	for _, opts := range []storage.ListOptions{{}, {Limit: 5}, {Limit: 9}} {
		if _, err := s.List(t.Context(), "/l/", opts); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(s.views.views); n != 0 {
		t.Fatalf("%d views kept for lists that fit one page", n)
	}
}
