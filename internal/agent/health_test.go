package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRuntimeHealth(t *testing.T) {
	dir := t.TempDir()
	shim := filepath.Join(dir, "shim")
	if err := os.WriteFile(shim, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(dir, "gone")
	tests := []struct {
		name      string
		stateDir  string
		shim      string
		wantParts []string // empty: healthy
	}{
		{name: "a writable state directory and an executable shim are healthy", stateDir: dir, shim: shim},
		{name: "a state directory that is gone is not writable", stateDir: gone, shim: shim,
			wantParts: []string{"container runtime not ready: pod state directory " + gone + " is not writable"}},
		{name: "a missing shim cannot be started", stateDir: dir, shim: filepath.Join(dir, "nope"),
			wantParts: []string{"container runtime not ready: runtime shim nope cannot be started"}},
		{name: "a shim without the execute bit cannot be started", stateDir: dir, shim: plain,
			wantParts: []string{"runtime shim " + plain + " cannot be started: not executable"}},
		{name: "both problems are reported", stateDir: gone, shim: plain,
			wantParts: []string{"is not writable", "not executable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := RuntimeHealth(tt.stateDir, tt.shim)()
			if len(tt.wantParts) == 0 {
				if err != nil {
					t.Fatalf("RuntimeHealth = %v, want healthy", err)
				}
				if entries, _ := os.ReadDir(tt.stateDir); len(entries) != 2 {
					t.Fatalf("state dir holds %d entries after the check, want the probe file removed", len(entries))
				}
				return
			}
			if err == nil {
				t.Fatalf("RuntimeHealth = nil, want an error containing %q", tt.wantParts)
			}
			for _, p := range tt.wantParts {
				if !strings.Contains(err.Error(), p) {
					t.Fatalf("RuntimeHealth = %q, want it to contain %q", err, p)
				}
			}
		})
	}
}
