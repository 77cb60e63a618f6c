package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeplane/nodeplane/internal/app/serverapp"
	"github.com/nodeplane/nodeplane/internal/version"
)

// TestStopOnSIGTERM stops a server that has open watches and an in-flight
// list: the watches end cleanly, the list completes, the process exits 0,
// and a restart on the same data dir has every object.
func TestStopOnSIGTERM(t *testing.T) {
	s := startServer(t, serverOptions{apiOnly: true})
	cs := s.client()
	ctx := t.Context()

	// Nodes with 240 KiB annotations, three times the most a TCP send
	// buffer can hold: the list below cannot all sit in kernel buffers
	// between the server and a client that does not read.
	const payloadSize = 240 << 10
	nodes := max(16, 3*maxSendBuffer()/payloadSize)
	createPayloadNodes(t, cs, nodes, strings.Repeat("x", payloadSize))
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Two watches: client-go's, and a raw stream to see how it ends.
	goWatch, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer goWatch.Stop()
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes").
		Param("watch", "true").Param("resourceVersion", list.ResourceVersion).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rawEvents := json.NewDecoder(raw)
	if _, err := cs.CoreV1().Nodes().Create(ctx, plainNode("marker"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNodeEvent(t, goWatch, watch.Added, "marker")
	if ev := nextWatchLine(t, rawEvents); ev.Type != watch.Added {
		t.Fatalf("raw watch event = %s, want ADDED marker", ev.Type)
	}

	// The in-flight request: a list over HTTP/1.1 whose body the client
	// does not read yet, so the handler blocks writing it.
	slowList, err := slowClient(t, s).CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes").Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer slowList.Close()

	sigterm := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	t.Run("watches end cleanly", func(t *testing.T) {
		timeout := time.After(10 * time.Second)
	goWatchLoop:
		for {
			select {
			case ev, ok := <-goWatch.ResultChan():
				if !ok {
					break goWatchLoop
				}
				t.Errorf("client-go watch event %s during stop; want the channel to close", ev.Type)
			case <-timeout:
				t.Fatal("client-go watch still open 10s after SIGTERM")
			}
		}
		var ev watchLine
		if err := rawEvents.Decode(&ev); !errors.Is(err, io.EOF) {
			t.Errorf("raw watch ended with %v (event %s), want io.EOF: the response must end, not break", err, ev.Type)
		}
	})

	t.Run("the in-flight list completes", func(t *testing.T) {
		select {
		case err := <-s.done:
			s.done <- err
			t.Fatalf("server exited (%v) before the in-flight list was read", err)
		default:
		}
		data, err := io.ReadAll(slowList)
		if err != nil {
			t.Fatalf("read the in-flight list: %v (after %d bytes)", err, len(data))
		}
		var got corev1.NodeList
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatalf("decode the in-flight list: %v", err)
		}
		if len(got.Items) != nodes+1 {
			t.Errorf("in-flight list has %d nodes, want %d", len(got.Items), nodes+1)
		}
	})

	select {
	case err := <-s.done:
		s.cmd = nil
		if err != nil {
			t.Fatalf("server exit after SIGTERM: %v; want exit 0\n%s", err, s.logs())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("server still running 10s after SIGTERM\n%s", s.logs())
	}
	t.Logf("exited %v after SIGTERM", time.Since(sigterm).Round(time.Millisecond))

	s.start()
	after, err := s.client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Items) != nodes+1 {
		t.Errorf("after restart: %d nodes, want %d", len(after.Items), nodes+1)
	}
	for _, n := range after.Items {
		if n.Name != "marker" && len(n.Annotations["e2e/payload"]) != payloadSize {
			t.Errorf("after restart: node %s payload is %d bytes, want %d", n.Name, len(n.Annotations["e2e/payload"]), payloadSize)
		}
	}
}

// TestStopWithStalledWatch stops a server whose watch client has stopped
// reading: the stop must not wait for it longer than --shutdown-timeout.
func TestStopWithStalledWatch(t *testing.T) {
	const shutdownTimeout = 2 * time.Second
	s := startServer(t, serverOptions{apiOnly: true, args: []string{"--shutdown-timeout=" + shutdownTimeout.String()}})
	const payloadSize = 240 << 10
	createPayloadNodes(t, s.client(), max(16, 3*maxSendBuffer()/payloadSize), strings.Repeat("x", payloadSize))

	// Without a resourceVersion the watch starts with every node, more than
	// the socket buffers hold: the server blocks writing to the client.
	stalled, err := slowClient(t, s).CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes").Param("watch", "true").Stream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()

	sigterm := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// While the stop waits for the watch, the server still answers and says
	// it is not ready, so a load balancer stops sending it requests.
	eventually(t, shutdownTimeout, "/readyz answers 503 while stopping", func() error {
		code, err := readyzCode(t, s)
		if err != nil {
			return err
		}
		if code != http.StatusServiceUnavailable {
			return fmt.Errorf("/readyz = %d", code)
		}
		return nil
	})
	limit := shutdownTimeout + 5*time.Second
	select {
	case err := <-s.done:
		s.cmd = nil
		t.Logf("exited %v after SIGTERM: %v", time.Since(sigterm).Round(time.Millisecond), err)
		if err != nil {
			t.Errorf("exit after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(limit):
		t.Fatalf("server still running %v after SIGTERM with --shutdown-timeout=%v and one stalled watch\n%s", limit, shutdownTimeout, s.logs())
	}
}

// TestServerFlagErrors checks that bad flags stop the server at once with a
// message naming the flag.
func TestServerFlagErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The subtests run in parallel after this function returns.
	t.Cleanup(func() { busy.Close() })
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"a listen address without a port", []string{"--listen=bad"}, "--listen"},
		{"a listen address with a bad port", []string{"--listen=127.0.0.1:notaport"}, "--listen"},
		{"a listen address in use", []string{"--listen=" + busy.Addr().String()}, "--listen"},
		{"an empty data dir", []string{"--data-dir="}, "--data-dir"},
		{"a negative toleration", []string{"--default-not-ready-toleration-seconds=-1"}, "--default-not-ready-toleration-seconds"},
		{"an unknown flag", []string{"--no-such-flag"}, "--no-such-flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Later flags win: each case overrides a sane default.
			args := append([]string{"server", "--data-dir", filepath.Join(t.TempDir(), "data"), "--listen", "127.0.0.1:0"}, tt.args...)
			res := runNodeplaneCmd(t, 30*time.Second, args...)
			if res.code == 0 {
				t.Fatalf("exit 0, want a failure\nstderr:\n%s", res.stderr)
			}
			if !strings.Contains(res.stderr, tt.want) {
				t.Errorf("stderr does not name %s:\n%s", tt.want, res.stderr)
			}
			if res.elapsed > 5*time.Second {
				t.Errorf("failed after %v, want within 5s", res.elapsed.Round(time.Millisecond))
			}
		})
	}
}

// TestServerHelpListsFlags checks that `nodeplane server --help` shows
// every flag with its default.
func TestServerHelpListsFlags(t *testing.T) {
	res := runNodeplaneCmd(t, 30*time.Second, "server", "--help")
	if res.code != 0 {
		t.Fatalf("exit %d, want 0\nstderr:\n%s", res.code, res.stderr)
	}
	flagLine := regexp.MustCompile(`^\s+(?:-\w, )?--([a-z0-9-]+)\b`)
	lines := map[string]string{}
	for _, l := range strings.Split(res.stdout, "\n") {
		if m := flagLine.FindStringSubmatch(l); m != nil {
			lines[m[1]] = l
		}
	}
	fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
	o := serverapp.DefaultOptions()
	o.AddFlags(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		line, ok := lines[f.Name]
		if !ok {
			t.Errorf("help does not list --%s", f.Name)
			return
		}
		switch f.DefValue {
		case "", "[]", "false", "0", "0s":
			return // pflag shows no zero default
		}
		want := "(default " + f.DefValue + ")"
		if f.Value.Type() == "string" {
			want = fmt.Sprintf("(default %q)", f.DefValue)
		}
		if !strings.HasSuffix(line, want) {
			t.Errorf("help line of --%s = %q, want it to end with %s", f.Name, strings.TrimSpace(line), want)
		}
	})
	// The defaults the documentation promises.
	for flag, want := range map[string]string{
		"listen":                                 `(default "0.0.0.0:6443")`,
		"default-not-ready-toleration-seconds":   "(default 300)",
		"default-unreachable-toleration-seconds": "(default 300)",
	} {
		if !strings.HasSuffix(lines[flag], want) {
			t.Errorf("help line of --%s = %q, want default %s", flag, strings.TrimSpace(lines[flag]), want)
		}
	}
}

// TestVersionCommand checks the one line `nodeplane version` prints: the
// version, the commit, the Go version, the platform and the Kubernetes API.
func TestVersionCommand(t *testing.T) {
	res := runNodeplaneCmd(t, 30*time.Second, "version")
	if res.code != 0 {
		t.Fatalf("exit %d, want 0\nstderr:\n%s", res.code, res.stderr)
	}
	kube := regexp.QuoteMeta("v" + version.KubeMajor + "." + version.KubeMinor + ".")
	re := regexp.MustCompile(`^nodeplane \S+ \(commit ([0-9a-f]{7,40}(-dirty)?|unknown), go\S+, \w+/\w+; Kubernetes API ` + kube + `\S+\)\n$`)
	if !re.MatchString(res.stdout) {
		t.Errorf("nodeplane version printed %q, want a line matching %s", res.stdout, re)
	}
}

// cliResult is the outcome of one nodeplane command.
type cliResult struct {
	stdout, stderr string
	code           int
	elapsed        time.Duration
}

// runNodeplaneCmd runs the binary to completion, failing the test if it runs
// longer than timeout.
func runNodeplaneCmd(t *testing.T, timeout time.Duration, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	res := cliResult{stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("nodeplane %s still running after %v\nstderr:\n%s", strings.Join(args, " "), timeout, res.stderr)
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	default:
		t.Fatalf("run nodeplane %s: %v", strings.Join(args, " "), err)
	}
	return res
}

// createPayloadNodes creates nodes n0000… with a payload annotation, in parallel.
func createPayloadNodes(t *testing.T, cs kubernetes.Interface, count int, payload string) {
	t.Helper()
	names := make(chan string)
	errs := make(chan error, count)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for name := range names {
				n := plainNode(name)
				n.Annotations = map[string]string{"e2e/payload": payload}
				if _, err := cs.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("create node %s: %w", name, err)
				}
			}
		})
	}
	for i := range count {
		names <- fmt.Sprintf("n%04d", i)
	}
	close(names)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// maxSendBuffer is the largest TCP send buffer the kernel grows a socket
// to (Linux: the last field of net.ipv4.tcp_wmem), or 4 MiB if unknown.
func maxSendBuffer() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/tcp_wmem")
	if err != nil {
		return 4 << 20
	}
	fields := strings.Fields(string(data))
	if len(fields) != 3 {
		return 4 << 20
	}
	n, err := strconv.Atoi(fields[2])
	if err != nil {
		return 4 << 20
	}
	return n
}

// watchLine is one line of a watch response.
type watchLine struct {
	Type   watch.EventType `json:"type"`
	Object json.RawMessage `json:"object"`
}

func nextWatchLine(t *testing.T, d *json.Decoder) watchLine {
	t.Helper()
	var ev watchLine
	if err := d.Decode(&ev); err != nil {
		t.Fatalf("read raw watch: %v", err)
	}
	return ev
}

// slowClient is a client over HTTP/1.1 whose sockets have a small receive
// buffer: a response it does not read soon blocks the server's handler.
// (Over HTTP/2 the transport would read up to its flow-control window on
// its own.)
func slowClient(t *testing.T, s *serverProc) kubernetes.Interface {
	t.Helper()
	cfg := s.restConfig()
	cfg.TLSClientConfig.NextProtos = []string{"http/1.1"}
	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		return errors.Join(err, serr)
	}}
	cfg.Dial = dialer.DialContext
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// readyzCode returns the HTTP status of GET /readyz.
func readyzCode(t *testing.T, s *serverProc) (int, error) {
	t.Helper()
	cfg := s.restConfig()
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: transport, Timeout: 2 * time.Second}
	resp, err := hc.Get(cfg.Host + "/readyz")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}
