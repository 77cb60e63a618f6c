package privdir

import (
	"os"
	"path/filepath"
	"testing"
)

func TestEnsure(t *testing.T) {
	tests := []struct {
		name         string
		existing     os.FileMode // 0: the directory does not exist
		wantMode     os.FileMode
		wantLoosened os.FileMode
	}{
		{"a missing directory is created private", 0, 0o700, 0},
		{"a private directory is left alone", 0o700, 0o700, 0},
		{"an owner-only read directory keeps its mode", 0o500, 0o500, 0},
		{"a world-readable directory is tightened and reported", 0o755, 0o700, 0o755},
		{"a group-writable directory is tightened and reported", 0o770, 0o700, 0o770},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "a", "b")
			if tt.existing != 0 {
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(dir, tt.existing); err != nil {
					t.Fatal(err)
				}
			}
			loosened, err := Ensure(dir)
			if err != nil {
				t.Fatal(err)
			}
			if loosened != tt.wantLoosened {
				t.Errorf("loosened = %#o, want %#o", loosened, tt.wantLoosened)
			}
			fi, err := os.Stat(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != tt.wantMode {
				t.Errorf("mode = %#o, want %#o", got, tt.wantMode)
			}
		})
	}
}

func TestEnsureRefusesAFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(f); err == nil {
		t.Fatal("Ensure of a regular file succeeded")
	}
}
