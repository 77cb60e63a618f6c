package loadapp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/internal/app/serverapp"
	"github.com/nodeplane/nodeplane/internal/loadgen"
)

func TestFlagErrorsNameTheFlag(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"an unknown mode", []string{"--mode", "burst"}, "--mode"},
		{"no clients", []string{"--clients", "0"}, "--clients"},
		{"a negative request timeout", []string{"--request-timeout", "-1s"}, "--request-timeout"},
		{"node connections outside lease mode", []string{"--mode", "get", "--node-connections"}, "--node-connections"},
		{"node watches without node connections", []string{"--node-watches"}, "--node-watches"},
		{"a node CA directory without node connections", []string{"--node-ca-dir", "/tmp"}, "--node-ca-dir"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := Command(io.Discard, io.Discard)
			cmd.SetArgs(tt.args)
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one naming %s", err, tt.want)
			}
		})
	}
}

// TestLeaseRunAgainstServer runs `nodeplane load` against a real server
// started in-process and reads its JSON result.
func TestLeaseRunAgainstServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir := t.TempDir()
	opts := serverapp.DefaultOptions()
	opts.DataDir, opts.Listen = dir, "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- serverapp.Run(ctx, serverapp.Config{Options: opts, Logger: slog.New(slog.DiscardHandler), Ready: func(string) { close(ready) }})
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case err := <-done:
		t.Fatal(err)
	case <-time.After(60 * time.Second):
		t.Fatal("server not ready")
	}

	var stdout bytes.Buffer
	cmd := Command(&stdout, io.Discard)
	cmd.SetArgs([]string{"--kubeconfig", filepath.Join(dir, serverapp.AdminKubeconfigFile), "--mode", "lease", "--objects", "20",
		"--clients", "2", "--interval", "200ms", "--duration", "1s", "--with-nodes", "--json", "--log-level", "error"})
	if err := cmd.ExecuteContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	var res loadgen.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("output is not a JSON result: %v\n%s", err, stdout.String())
	}
	if res.Mode != loadgen.ModeLease || res.Requests < 50 || res.ErrorCount != 0 || len(res.Setup) != 2 {
		t.Errorf("result: mode %s, %d requests, %d errors, %d setup steps; want lease, about 100 renewals, no errors, nodes and leases set up", res.Mode, res.Requests, res.ErrorCount, len(res.Setup))
	}
}
