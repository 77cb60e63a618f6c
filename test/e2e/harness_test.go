// Package e2e starts the real nodeplane binary and drives it with the real
// kubectl and client-go over HTTPS, as users do. These tests wait on real
// time (processes, network), bounded by deadlines.
package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// binary is the nodeplane binary built once for the package.
var binary string

// releaseBuilt: binary was built here by scripts/release-build.sh (not
// given with NODEPLANE_BIN).
var releaseBuilt bool

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if b := os.Getenv("NODEPLANE_BIN"); b != "" {
		binary = b
		return m.Run()
	}
	flag.Parse()
	if testing.Short() {
		// The short tier (go test -short ./...) needs neither a built
		// binary nor Docker: every test here starts the real binary.
		fmt.Println("e2e: skipped under -short: these tests build and start the nodeplane binary (set NODEPLANE_BIN to run them anyway)")
		return 0
	}
	dir, err := os.MkdirTemp("", "nodeplane-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "nodeplane")
	// Built as `make release` builds it (scripts/release-build.sh), so the
	// tests run the code that ships and TestBinarySizeBudget weighs it.
	if out, err := exec.Command("../../scripts/release-build.sh", binary).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build nodeplane: %v\n%s", err, out)
		return 1
	}
	releaseBuilt = true
	return m.Run()
}

// serverProc is one running `nodeplane server`.
type serverProc struct {
	t       *testing.T
	dataDir string
	port    int
	args    []string
	cmd     *exec.Cmd
	logPath string
	done    chan error
}

type serverOptions struct {
	dataDir string
	port    int
	args    []string
	// apiOnly runs no controller but the namespace controller
	// (--controllers=namespace-controller): for tests of the API server
	// alone, which expect nothing but the test to write. Namespace deletion
	// is part of the API's contract and needs that controller, which acts
	// only on namespaces being deleted.
	apiOnly bool
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startServer starts a server and waits until it is ready.
func startServer(t *testing.T, o serverOptions) *serverProc {
	t.Helper()
	if o.dataDir == "" {
		o.dataDir = filepath.Join(t.TempDir(), "data")
	}
	// Port 0 lets the server pick a free port (no race with other tests);
	// start reads the real one from admin.kubeconfig for later restarts.
	if o.apiOnly {
		o.args = append([]string{"--controllers=namespace-controller"}, o.args...)
	}
	s := &serverProc{t: t, dataDir: o.dataDir, port: o.port, args: o.args}
	s.start()
	t.Cleanup(func() { s.stop() })
	return s
}

func (s *serverProc) start() {
	s.t.Helper()
	args := append([]string{"server", "--data-dir", s.dataDir, "--listen", fmt.Sprintf("127.0.0.1:%d", s.port)}, s.args...)
	s.cmd = exec.Command(binary, args...)
	// client-go's cache mutation detector: the in-process controllers'
	// informers hold the server's own objects (package loopback's
	// handoff), so a controller that modified one would corrupt the
	// server's cache. The detector keeps a copy of each object an informer
	// receives for two minutes and ends the server (a panic in its log)
	// when one differs from its copy.
	s.cmd.Env = append(os.Environ(), "KUBE_CACHE_MUTATION_DETECTOR=true")
	s.logPath = filepath.Join(s.t.TempDir(), "server.log")
	logFile, err := os.Create(s.logPath)
	if err != nil {
		s.t.Fatal(err)
	}
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.done = make(chan error, 1)
	go func() {
		s.done <- s.cmd.Wait()
		logFile.Close()
	}()
	s.waitReady(60 * time.Second)
	if s.port == 0 {
		u, err := url.Parse(s.restConfig().Host)
		if err != nil {
			s.t.Fatal(err)
		}
		if s.port, err = strconv.Atoi(u.Port()); err != nil {
			s.t.Fatalf("port of %s: %v", u, err)
		}
	}
}

// waitReady polls /readyz with the admin credentials.
func (s *serverProc) waitReady(timeout time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case err := <-s.done:
			s.t.Fatalf("server exited before ready: %v\n%s", err, s.logs())
		default:
		}
		if _, err := os.Stat(s.kubeconfig()); err == nil {
			cs, err := kubernetes.NewForConfig(s.restConfig())
			if err == nil {
				body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
				if err == nil && string(body) == "ok" {
					return
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("server not ready after %v\n%s", timeout, s.logs())
}

func (s *serverProc) logs() string {
	data, _ := os.ReadFile(s.logPath)
	return string(data)
}

func (s *serverProc) kubeconfig() string { return filepath.Join(s.dataDir, "admin.kubeconfig") }

func (s *serverProc) restConfig() *rest.Config {
	s.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig())
	if err != nil {
		s.t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	return cfg
}

func (s *serverProc) client() kubernetes.Interface {
	s.t.Helper()
	cs, err := kubernetes.NewForConfig(s.restConfig())
	if err != nil {
		s.t.Fatal(err)
	}
	return cs
}

// stop sends SIGTERM and waits for a clean exit.
func (s *serverProc) stop() error {
	if s.cmd == nil || s.cmd.Process == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.cmd = nil
		return err
	case <-time.After(40 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		s.cmd = nil
		return fmt.Errorf("server did not stop within 40s after SIGTERM")
	}
}

// kill9 kills the server without warning.
func (s *serverProc) kill9() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s.cmd = nil
}

// kubectlPath returns the kubectl to drive: $KUBECTL, else kubectl on PATH.
func kubectlPath(t *testing.T) string {
	t.Helper()
	if k := os.Getenv("KUBECTL"); k != "" {
		return k
	}
	p, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatal("no kubectl on PATH (CI builds one from tools/kubectl; see .ci/run)")
	}
	return p
}

// kubectl runs kubectl against the server and returns stdout, stderr.
func (s *serverProc) kubectl(t *testing.T, bin string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.kubeconfig(), "HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// mustKubectl runs kubectl and fails the test on a non-zero exit.
func (s *serverProc) mustKubectl(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, errOut, err := s.kubectl(t, bin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// eventually polls cond until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not true after %v: %v", what, timeout, err)
}

// never observes for window, polling sighting every 100 ms, and fails on the
// first call that returns an error: the error describes the thing that must
// not happen, seen. A check that something does not happen thus watches the
// whole window instead of sleeping and looking once.
func never(t *testing.T, window time.Duration, what string, sighting func() error) {
	t.Helper()
	deadline := time.Now().Add(window)
	for {
		if err := sighting(); err != nil {
			t.Fatalf("%s: happened within %v: %v", what, window, err)
		}
		if !time.Now().Before(deadline) {
			return
		}
		time.Sleep(100 * time.Millisecond) // poll interval inside the window
	}
}

// needDocker skips t with a one-line reason when no Docker engine answers
// (`docker info` fails), except under CI=true, where a missing engine fails
// the test: CI runs every tier, so a CI machine without Docker goes red
// instead of silently green.
func needDocker(t *testing.T) {
	t.Helper()
	out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput()
	if err == nil {
		return
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	reason := fmt.Sprintf("needs a Docker engine: docker info: %v: %s", err, first)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true runs every tier)", reason)
	}
	t.Skip(reason)
}
