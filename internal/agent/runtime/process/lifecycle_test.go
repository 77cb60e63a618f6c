package process

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func TestBackoffSequence(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &container{rec: record{Instance: 0, LaunchedAt: t0, ExitSeenAt: t0.Add(time.Second)}}
	var got []time.Duration
	for range 8 {
		c.rec.Backoff = c.nextBackoff()
		got = append(got, c.rec.Backoff)
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 300 * time.Second, 300 * time.Second, 300 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("back-off sequence = %v, want %v", got, want)
		}
	}
}

func TestRestartDue(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		backoff time.Duration
		ran     time.Duration
		now     time.Duration // after launch
		want    bool
	}{
		{name: "the first restart is immediate", backoff: 0, ran: time.Second, now: time.Second, want: true},
		{name: "a crash inside the back-off waits", backoff: 40 * time.Second, ran: time.Second, now: 39 * time.Second, want: false},
		{name: "the back-off counts from the last start", backoff: 40 * time.Second, ran: time.Second, now: 40 * time.Second, want: true},
		{name: "a container that ran longer than its back-off restarts at once", backoff: 20 * time.Second, ran: time.Minute, now: time.Minute, want: true},
		{name: "ten minutes of running reset the back-off", backoff: 5 * time.Minute, ran: 10 * time.Minute, now: 10 * time.Minute, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &container{rec: record{Backoff: tt.backoff, LaunchedAt: t0, ExitSeenAt: t0.Add(tt.ran)}}
			if got := c.restartDue(t0.Add(tt.now)); got != tt.want {
				t.Errorf("restartDue = %v, want %v", got, tt.want)
			}
		})
	}
	long := &container{rec: record{Backoff: 5 * time.Minute, LaunchedAt: t0, ExitSeenAt: t0.Add(10 * time.Minute)}}
	if got := long.nextBackoff(); got != 10*time.Second {
		t.Errorf("back-off after ten minutes of running = %v, want 10s", got)
	}
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "x", "EMPTY": ""}
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "x"},
		{"pre-$(A)-post", "pre-x-post"},
		{"$(EMPTY)|", "|"},
		{"$(MISSING)", "$(MISSING)"},
		{"$$(A)", "$(A)"},
		{"$$", "$"},
		{"$A", "$A"},
		{"$(A", "$(A"},
		{"trailing $", "trailing $"},
	}
	for _, tt := range tests {
		if got := expand(tt.in, vars); got != tt.want {
			t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "tool")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "data")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := lookPath("tool", "/nonexistent:"+dir, "/"); err != nil || got != exe {
		t.Errorf("lookPath in PATH = %q, %v; want %q", got, err, exe)
	}
	if got, err := lookPath("./tool", "", dir); err != nil || got != exe {
		t.Errorf("lookPath relative to the working dir = %q, %v; want %q", got, err, exe)
	}
	_, err := lookPath("nosuch", dir, "/")
	if err == nil || err.Error() != `exec: "nosuch": executable file not found in $PATH` || !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("missing executable error = %v", err)
	}
	if _, err := lookPath(plain, "", "/"); err == nil {
		t.Error("a file without execute permission was accepted")
	}
}
