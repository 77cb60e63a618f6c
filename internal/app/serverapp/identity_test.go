package serverapp

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLeaderIdentity(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		name string
		// before runs on the data dir before leaderIdentity; it returns
		// what must be released after the check.
		before func(t *testing.T, dir string) (held func())
		// same: the identity must equal the one in the file beforehand.
		same bool
		// kept: the file must hold the returned identity afterwards.
		kept bool
	}{
		{
			name:   "a server started for the first time stores a new identity",
			before: func(*testing.T, string) func() { return func() {} },
			kept:   true,
		},
		{
			name: "a server started again after its process died campaigns under the identity it had",
			before: func(t *testing.T, dir string) func() {
				_, release := leaderIdentity(dir, quiet)
				release() // what the kernel does when the process is killed
				return func() {}
			},
			same: true, kept: true,
		},
		{
			name: "a second live process on the same data dir campaigns under another identity",
			before: func(t *testing.T, dir string) func() {
				_, release := leaderIdentity(dir, quiet)
				return release
			},
		},
		{
			name: "a file that holds no identity is replaced by a new one",
			before: func(t *testing.T, dir string) func() {
				if err := os.WriteFile(filepath.Join(dir, IdentityFile), []byte("two words\x00\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				return func() {}
			},
			kept: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			held := tt.before(t, dir)
			defer held()
			prev := readIdentity(t, dir)
			id, release := leaderIdentity(dir, quiet)
			defer release()
			if !validIdentity(id) {
				t.Fatalf("identity %q is not a valid holder identity", id)
			}
			if host, _ := os.Hostname(); !strings.HasPrefix(id, host+"_") {
				t.Errorf("identity %q does not start with the host name %q", id, host)
			}
			if tt.same && id != prev {
				t.Errorf("identity %q, want the stored %q", id, prev)
			}
			if !tt.same && id == prev {
				t.Errorf("identity %q is the stored one, want another", id)
			}
			if got := readIdentity(t, dir); tt.kept && got != id {
				t.Errorf("file holds %q, want %q", got, id)
			}
		})
	}
}

func readIdentity(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, IdentityFile))
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
