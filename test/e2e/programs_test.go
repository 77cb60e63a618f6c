package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// programs caches the small pod programs built by testProgram, by name.
var programs sync.Map // name → func() (string, error)

// testProgram builds a small static Go program (package main in source)
// once per test run and returns its path: the processes pods run in the
// tests (the SIGTERM recorder, the volume probes).
func testProgram(name, source string) (string, error) {
	build, _ := programs.LoadOrStore(name, sync.OnceValues(func() (string, error) {
		dir, err := os.MkdirTemp("", "nodeplane-"+name)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(source), 0o644); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module "+name+"\n\ngo 1.22\n"), 0o644); err != nil {
			return "", err
		}
		bin := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", bin, ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("build %s: %v\n%s", name, err, out)
		}
		return bin, nil
	}))
	return build.(func() (string, error))()
}

// agentImage builds an image of its own for one test, FROM scratch, with
// the nodeplane binary under test as /nodeplane (the entrypoint) and each
// extra host file at its path in the image (image path → host file), and
// removes it when the test ends. An image per test means a parallel build
// of another test's image cannot swap the binary.
func agentImage(t *testing.T, tag string, extras map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{"/nodeplane": binary}
	for at, src := range extras {
		files[at] = src
	}
	paths := make([]string, 0, len(files))
	for at := range files {
		paths = append(paths, at)
	}
	sort.Strings(paths)
	var dockerfile strings.Builder
	dockerfile.WriteString("FROM scratch\n")
	for i, at := range paths {
		data, err := os.ReadFile(files[at])
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("file%d", i)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o755); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&dockerfile, "COPY %s %s\n", name, at)
	}
	dockerfile.WriteString("ENTRYPOINT [\"/nodeplane\"]\n")
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	image := fmt.Sprintf("nodeplane-e2e-%s:%d", tag, time.Now().UnixNano()%1e9)
	docker(t, "build", "-q", "-t", image, dir)
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", image).Run() })
	return image
}
