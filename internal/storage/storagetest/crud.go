package storagetest

import (
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/nodeplane/nodeplane/internal/storage"
)

var crudCases = []testCase{
	{"create stores a value that get returns at the create revision", func(t *testing.T, s storage.Interface, p string) {
		rev := mustCreate(t, s, p+"k", "v1")
		got, err := s.Get(t.Context(), p+"k")
		if err != nil {
			t.Fatalf("Get = %v", err)
		}
		want := storage.KeyValue{Key: p + "k", Value: []byte("v1"), ModRevision: rev, CreateRevision: rev}
		if got.Key != want.Key || string(got.Value) != string(want.Value) || got.ModRevision != rev || got.CreateRevision != rev {
			t.Errorf("Get = %+v, want %+v", got, want)
		}
	}},
	{"get of a missing key fails with ErrNotFound", func(t *testing.T, s storage.Interface, p string) {
		_, err := s.Get(t.Context(), p+"missing")
		wantErr(t, "Get", err, storage.ErrNotFound)
	}},
	{"create of an existing key fails with ErrAlreadyExists and keeps the value", func(t *testing.T, s storage.Interface, p string) {
		rev := mustCreate(t, s, p+"k", "first")
		_, err := s.Create(t.Context(), p+"k", []byte("second"))
		wantErr(t, "second Create", err, storage.ErrAlreadyExists)
		got, err := s.Get(t.Context(), p+"k")
		if err != nil || string(got.Value) != "first" || got.ModRevision != rev {
			t.Errorf("Get = %+v, %v; want the first value at revision %d", got, err, rev)
		}
	}},
	{"create stores an empty value", func(t *testing.T, s storage.Interface, p string) {
		mustCreate(t, s, p+"k", "")
		got, err := s.Get(t.Context(), p+"k")
		if err != nil || len(got.Value) != 0 {
			t.Errorf("Get = %+v, %v; want an empty value", got, err)
		}
	}},
	{"update at the current revision replaces the value and keeps the create revision", func(t *testing.T, s storage.Interface, p string) {
		created := mustCreate(t, s, p+"k", "v1")
		rev := mustUpdate(t, s, p+"k", "v2", created)
		if rev <= created {
			t.Errorf("Update revision %d, want > create revision %d", rev, created)
		}
		got, err := s.Get(t.Context(), p+"k")
		if err != nil || string(got.Value) != "v2" || got.ModRevision != rev || got.CreateRevision != created {
			t.Errorf("Get = %+v, %v; want v2 modified at %d, created at %d", got, err, rev, created)
		}
	}},
	{"update at a stale revision fails with a ConflictError carrying the current value", func(t *testing.T, s storage.Interface, p string) {
		created := mustCreate(t, s, p+"k", "v1")
		current := mustUpdate(t, s, p+"k", "v2", created)
		_, err := s.Update(t.Context(), p+"k", []byte("v3"), created)
		wantErr(t, "stale Update", err, storage.ErrConflict)
		var conflict *storage.ConflictError
		if !errors.As(err, &conflict) {
			t.Fatalf("stale Update: got %T, want *storage.ConflictError", err)
		}
		if conflict.Key != p+"k" || string(conflict.Current.Value) != "v2" || conflict.Current.ModRevision != current || conflict.Current.CreateRevision != created {
			t.Errorf("ConflictError = %+v, want key %q with v2 at %d", conflict, p+"k", current)
		}
	}},
	{"update of a missing key fails with ErrNotFound and creates nothing", func(t *testing.T, s storage.Interface, p string) {
		_, err := s.Update(t.Context(), p+"missing", []byte("v"), 1)
		wantErr(t, "Update", err, storage.ErrNotFound)
		_, err = s.Get(t.Context(), p+"missing")
		wantErr(t, "Get after Update", err, storage.ErrNotFound)
	}},
	{"update of a deleted and recreated key at the old revision conflicts", func(t *testing.T, s storage.Interface, p string) {
		old := mustCreate(t, s, p+"k", "v1")
		mustDelete(t, s, p+"k")
		mustCreate(t, s, p+"k", "v2")
		_, err := s.Update(t.Context(), p+"k", []byte("v3"), old)
		wantErr(t, "Update", err, storage.ErrConflict)
	}},
	{"unconditional delete returns the deleted value and the delete revision", func(t *testing.T, s storage.Interface, p string) {
		created := mustCreate(t, s, p+"k", "v1")
		deleted, rev, err := s.Delete(t.Context(), p+"k", 0)
		if err != nil {
			t.Fatalf("Delete = %v", err)
		}
		if deleted.Key != p+"k" || string(deleted.Value) != "v1" || deleted.ModRevision != created || rev <= created {
			t.Errorf("Delete = %+v at %d, want v1 modified at %d, deleted later", deleted, rev, created)
		}
		if now := mustRevision(t, s); now < rev {
			t.Errorf("CurrentRevision = %d after a delete at %d", now, rev)
		}
		_, err = s.Get(t.Context(), p+"k")
		wantErr(t, "Get after Delete", err, storage.ErrNotFound)
	}},
	{"conditional delete at the current revision removes the key", func(t *testing.T, s storage.Interface, p string) {
		rev := mustCreate(t, s, p+"k", "v1")
		deleted, _, err := s.Delete(t.Context(), p+"k", rev)
		if err != nil || string(deleted.Value) != "v1" {
			t.Fatalf("Delete = %+v, %v; want v1", deleted, err)
		}
		_, err = s.Get(t.Context(), p+"k")
		wantErr(t, "Get after Delete", err, storage.ErrNotFound)
	}},
	{"conditional delete at a stale revision fails with a ConflictError and keeps the key", func(t *testing.T, s storage.Interface, p string) {
		created := mustCreate(t, s, p+"k", "v1")
		current := mustUpdate(t, s, p+"k", "v2", created)
		_, _, err := s.Delete(t.Context(), p+"k", created)
		var conflict *storage.ConflictError
		if !errors.Is(err, storage.ErrConflict) || !errors.As(err, &conflict) {
			t.Fatalf("stale Delete: got %v, want a *storage.ConflictError", err)
		}
		if string(conflict.Current.Value) != "v2" || conflict.Current.ModRevision != current {
			t.Errorf("ConflictError.Current = %+v, want v2 at %d", conflict.Current, current)
		}
		if _, err := s.Get(t.Context(), p+"k"); err != nil {
			t.Errorf("Get after a refused Delete = %v", err)
		}
	}},
	{"delete of a missing key fails with ErrNotFound", func(t *testing.T, s storage.Interface, p string) {
		_, _, err := s.Delete(t.Context(), p+"missing", 0)
		wantErr(t, "unconditional Delete", err, storage.ErrNotFound)
		_, _, err = s.Delete(t.Context(), p+"missing", 7)
		wantErr(t, "conditional Delete", err, storage.ErrNotFound)
	}},
	{"concurrent compare-and-swap increments are neither lost nor doubled", func(t *testing.T, s storage.Interface, p string) {
		const writers = 16
		rev := mustCreate(t, s, p+"counter", "0")
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for range writers {
			wg.Go(func() { errs <- increment(t, s, p+"counter", rev) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.Get(t.Context(), p+"counter")
		if err != nil || string(got.Value) != strconv.Itoa(writers) {
			t.Errorf("counter = %q, %v; want %d", got.Value, err, writers)
		}
	}},
}

// increment adds one to the counter at key, retrying on conflict with the
// value the ConflictError carries, without reading again.
func increment(t *testing.T, s storage.Interface, key string, rev int64) error {
	value := "0"
	for {
		n, err := strconv.Atoi(value)
		if err != nil {
			return err
		}
		_, err = s.Update(t.Context(), key, []byte(strconv.Itoa(n+1)), rev)
		var conflict *storage.ConflictError
		if !errors.As(err, &conflict) {
			return err
		}
		value, rev = string(conflict.Current.Value), conflict.Current.ModRevision
	}
}
