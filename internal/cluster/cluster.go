// Package cluster runs a local multi-node nodeplane cluster in Docker, the
// way kind does for Kubernetes: one server container and N agent
// containers, one Docker network per zone (the server is on all of them),
// each Node labelled with its zone, and an admin kubeconfig for the user.
// The node image is built on the fly FROM scratch with the nodeplane binary
// and a static BusyBox (Debian's busybox-static), so pods can run sh, sleep
// and wget. Everything it creates carries the label io.nodeplane.cluster,
// which is how Delete and the node commands find it. It drives the docker
// CLI (the same engine and DOCKER_HOST the user's docker uses).
package cluster

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
)

// Labels on everything a cluster owns.
const (
	LabelCluster    = "io.nodeplane.cluster"
	LabelRole       = "io.nodeplane.role"
	LabelNode       = "io.nodeplane.node"
	LabelNetwork    = "io.nodeplane.network"
	LabelKubeconfig = "io.nodeplane.kubeconfig"
	// ZoneLabel is the well-known Node label the zone goes in.
	ZoneLabel = "topology.kubernetes.io/zone"
)

// DefaultName is the cluster name when none is given.
const DefaultName = "nodeplane"

// APIPort is the server's port inside its container.
const APIPort = 6443

// Docker runs one docker CLI command and returns its standard output.
type Docker interface {
	Run(ctx context.Context, args ...string) (string, error)
}

// CLI is the docker command on PATH.
type CLI struct{}

// Run runs `docker args...`; a failure carries docker's own message.
func (CLI) Run(ctx context.Context, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errOut.String())
		if errors.Is(err, exec.ErrNotFound) {
			return "", errors.New("the docker CLI is not on PATH: install Docker (apt-get install docker.io)")
		}
		return "", fmt.Errorf("docker %s: %w: %s", args[0], err, msg)
	}
	if args[0] == "logs" {
		// A container's log is its stdout and stderr.
		return strings.TrimSpace(out.String() + errOut.String()), nil
	}
	return strings.TrimSpace(out.String()), nil
}

// Config describes a cluster to create.
type Config struct {
	Name  string
	Nodes int
	// Zones are assigned to nodes in turn; empty: no zone label, one network.
	Zones []string
	// Binary is the nodeplane executable copied into the image.
	Binary string
	// BusyBox is a static busybox executable copied into the image.
	BusyBox string
	// Kubeconfig is where the admin kubeconfig is written.
	Kubeconfig string
	// HostPort publishes the API on 127.0.0.1:HostPort (0: a free port).
	HostPort int
	// ServerArgs and AgentArgs are extra flags for every server and agent.
	ServerArgs, AgentArgs []string
	// Wait bounds the wait for the server and for every Node to be Ready.
	Wait time.Duration
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$`)

// Validate checks c and names the flag at fault.
func (c Config) Validate() error {
	var errs []error
	if !nameRE.MatchString(c.Name) {
		errs = append(errs, fmt.Errorf("--name %q: want lower-case letters, digits and '-', at most 40, starting and ending with a letter or digit", c.Name))
	}
	if c.Nodes < 1 {
		errs = append(errs, fmt.Errorf("--nodes %d: a cluster needs at least 1 node", c.Nodes))
	}
	seen := map[string]bool{}
	for _, z := range c.Zones {
		if !nameRE.MatchString(z) {
			errs = append(errs, fmt.Errorf("--zones: zone %q: want lower-case letters, digits and '-'", z))
		}
		if seen[z] {
			errs = append(errs, fmt.Errorf("--zones: zone %q given twice", z))
		}
		seen[z] = true
	}
	if c.HostPort < 0 || c.HostPort > 65535 {
		errs = append(errs, fmt.Errorf("--port %d: want 0-65535", c.HostPort))
	}
	return errors.Join(errs...)
}

// Cluster is a handle on the Docker objects of one named cluster.
type Cluster struct {
	Name   string
	Docker Docker
	Clock  clock.Clock
	Out    io.Writer
}

func (c *Cluster) clk() clock.Clock {
	if c.Clock == nil {
		return clock.RealClock{}
	}
	return c.Clock
}

func (c *Cluster) logf(format string, args ...any) {
	if c.Out != nil {
		fmt.Fprintf(c.Out, format+"\n", args...)
	}
}

// Names of the cluster's Docker objects.
func (c *Cluster) serverName() string    { return c.Name + "-server" }
func (c *Cluster) image() string         { return c.Name + "-node:latest" }
func (c *Cluster) nodeName(i int) string { return fmt.Sprintf("%s-node-%d", c.Name, i) }
func (c *Cluster) network(zone string) string {
	if zone == "" {
		return c.Name + "-net"
	}
	return c.Name + "-zone-" + zone
}

// CheckEngine reports an unreachable Docker engine in a sentence.
func (c *Cluster) CheckEngine(ctx context.Context) error {
	if _, err := c.Docker.Run(ctx, "info", "--format", "{{.ServerVersion}}"); err != nil {
		return fmt.Errorf("the Docker engine is not reachable (is it running? DOCKER_HOST=%q): %w", os.Getenv("DOCKER_HOST"), err)
	}
	return nil
}

// containers lists the cluster's containers (all states) matching extra
// label filters.
func (c *Cluster) containers(ctx context.Context, filters ...string) ([]string, error) {
	args := []string{"ps", "-a", "--format", "{{.Names}}", "--filter", "label=" + LabelCluster + "=" + c.Name}
	for _, f := range filters {
		args = append(args, "--filter", "label="+f)
	}
	out, err := c.Docker.Run(ctx, args...)
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// Create builds the image, creates the networks and containers, writes the
// admin kubeconfig and waits until every Node is Ready. On failure it
// removes what it created.
func (c *Cluster) Create(ctx context.Context, cfg Config) (err error) {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := c.CheckEngine(ctx); err != nil {
		return err
	}
	existing, err := c.containers(ctx)
	if err != nil {
		return err
	}
	if len(existing) > 0 {
		return fmt.Errorf("cluster %q exists already (%d containers): delete it first with `nodeplane cluster delete --name %s`", c.Name, len(existing), c.Name)
	}
	defer func() {
		if err != nil {
			c.logf("creating cluster %q failed; removing what was created", c.Name)
			if derr := c.Delete(context.WithoutCancel(ctx)); derr != nil {
				err = errors.Join(err, derr)
			}
		}
	}()
	if err := c.buildImage(ctx, cfg); err != nil {
		return err
	}
	zones := cfg.Zones
	if len(zones) == 0 {
		zones = []string{""}
	}
	for _, z := range zones {
		if _, err := c.Docker.Run(ctx, "network", "create", "--label", LabelCluster+"="+c.Name, c.network(z)); err != nil {
			return fmt.Errorf("network for zone %q: %w", z, err)
		}
	}
	kubeconfig, err := filepath.Abs(cfg.Kubeconfig)
	if err != nil {
		return err
	}
	serverArgs := []string{"run", "-d", "--name", c.serverName(), "--hostname", c.serverName(),
		"--label", LabelCluster + "=" + c.Name, "--label", LabelRole + "=server", "--label", LabelKubeconfig + "=" + kubeconfig,
		"--network", c.network(zones[0]), "-p", fmt.Sprintf("127.0.0.1:%d:%d", cfg.HostPort, APIPort),
		c.image(), "server", "--data-dir", "/data", "--listen", fmt.Sprintf("0.0.0.0:%d", APIPort), "--tls-san", c.serverName()}
	if _, err := c.Docker.Run(ctx, append(serverArgs, cfg.ServerArgs...)...); err != nil {
		return fmt.Errorf("server container: %w", err)
	}
	for _, z := range zones[1:] {
		if _, err := c.Docker.Run(ctx, "network", "connect", c.network(z), c.serverName()); err != nil {
			return fmt.Errorf("connect the server to zone %q: %w", z, err)
		}
	}
	c.logf("server %s started; waiting for it to be ready", c.serverName())
	cs, err := c.waitServer(ctx, kubeconfig, cfg.Wait)
	if err != nil {
		return err
	}
	token, err := c.Docker.Run(ctx, "exec", c.serverName(), "cat", "/data/node-token")
	if err != nil {
		return fmt.Errorf("read the join secret: %w", err)
	}
	var names []string
	for i := 1; i <= cfg.Nodes; i++ {
		zone := zones[(i-1)%len(zones)]
		name := c.nodeName(i)
		args := []string{"run", "-d", "--name", name, "--hostname", name,
			"--label", LabelCluster + "=" + c.Name, "--label", LabelRole + "=agent", "--label", LabelNode + "=" + name,
			"--label", LabelNetwork + "=" + c.network(zone),
			"--network", c.network(zone), "--stop-timeout", "60",
			c.image(), "agent", "--server", fmt.Sprintf("https://%s:%d", c.serverName(), APIPort),
			"--token", token, "--node-name", name, "--data-dir", "/agent"}
		if zone != "" {
			args = append(args, "--node-labels", ZoneLabel+"="+zone)
		}
		if _, err := c.Docker.Run(ctx, append(args, cfg.AgentArgs...)...); err != nil {
			return fmt.Errorf("node %s: %w", name, err)
		}
		names = append(names, name)
		c.logf("node %s started (zone %q)", name, zone)
	}
	return c.waitNodes(ctx, cs, names, cfg.Wait)
}

// buildImage builds the node image: FROM scratch, BusyBox linked as every
// applet under /bin, the nodeplane binary as the entrypoint.
func (c *Cluster) buildImage(ctx context.Context, cfg Config) error {
	dir, err := os.MkdirTemp("", c.Name+"-image")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := checkStatic(cfg.Binary); err != nil {
		return err
	}
	for name, src := range map[string]string{"nodeplane": cfg.Binary, "busybox": cfg.BusyBox} {
		data, err := os.ReadFile(src)
		if err != nil {
			if name == "busybox" {
				return fmt.Errorf("--busybox %s: %w (install Debian's static BusyBox: apt-get install busybox-static)", src, err)
			}
			return fmt.Errorf("nodeplane binary %s: %w", src, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o755); err != nil {
			return err
		}
	}
	dockerfile := `FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
RUN ["/bin/busybox", "mkdir", "-p", "/tmp", "/data", "/agent"]
COPY nodeplane /nodeplane
ENV PATH=/bin
LABEL ` + LabelCluster + `=` + c.Name + `
ENTRYPOINT ["/nodeplane"]
`
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return err
	}
	c.logf("building image %s (nodeplane + BusyBox)", c.image())
	if _, err := c.Docker.Run(ctx, "build", "-q", "-t", c.image(), dir); err != nil {
		return fmt.Errorf("build the node image: %w", err)
	}
	return nil
}

// checkStatic refuses a dynamically linked nodeplane binary: the image
// has no C library or loader to run it.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("--binary %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("--binary %s is dynamically linked and cannot run in the FROM scratch node image: use a static build (make build, make release, or CGO_ENABLED=0 go build ./cmd/nodeplane)", path)
		}
	}
	return nil
}

// waitServer waits for the server's admin kubeconfig, rewrites it to the
// published port on 127.0.0.1, writes it for the user and waits for /readyz.
func (c *Cluster) waitServer(ctx context.Context, kubeconfig string, wait time.Duration) (kubernetes.Interface, error) {
	var cs kubernetes.Interface
	err := c.poll(ctx, wait, "the server to serve /readyz", func() error {
		if cs == nil {
			raw, err := c.Docker.Run(ctx, "exec", c.serverName(), "cat", "/data/admin.kubeconfig")
			if err != nil {
				if state, _ := c.Docker.Run(ctx, "inspect", "-f", "{{.State.Status}}", c.serverName()); state == "exited" {
					logs, _ := c.Docker.Run(ctx, "logs", "--tail", "20", c.serverName())
					return permanentErr(fmt.Errorf("the server container exited:\n%s", logs))
				}
				return err
			}
			port, err := c.Docker.Run(ctx, "port", c.serverName(), fmt.Sprintf("%d/tcp", APIPort))
			if err != nil {
				return err
			}
			first, _, _ := strings.Cut(port, "\n")
			_, hostPort, ok := strings.Cut(strings.TrimSpace(first), ":")
			if !ok {
				return fmt.Errorf("docker port %s: %q", c.serverName(), port)
			}
			kc, err := clientcmd.Load([]byte(raw))
			if err != nil {
				return fmt.Errorf("admin kubeconfig: %w", err)
			}
			for _, cl := range kc.Clusters {
				cl.Server = "https://127.0.0.1:" + hostPort
			}
			for name := range kc.Contexts {
				kc.Contexts[name].Namespace = ""
			}
			if err := os.MkdirAll(filepath.Dir(kubeconfig), 0o755); err != nil {
				return permanentErr(err)
			}
			if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
				return permanentErr(fmt.Errorf("write %s: %w", kubeconfig, err))
			}
			if err := os.Chmod(kubeconfig, 0o600); err != nil {
				return permanentErr(err)
			}
			rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return permanentErr(err)
			}
			if cs, err = kubernetes.NewForConfig(rc); err != nil {
				return permanentErr(err)
			}
		}
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return err
		}
		if string(body) != "ok" {
			return fmt.Errorf("/readyz: %s", body)
		}
		return nil
	})
	return cs, err
}

// waitNodes waits until every named Node is Ready.
func (c *Cluster) waitNodes(ctx context.Context, cs kubernetes.Interface, names []string, wait time.Duration) error {
	return c.poll(ctx, wait, fmt.Sprintf("%d nodes to be Ready", len(names)), func() error {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ready := map[string]bool{}
		for _, n := range list.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready[n.Name] = true
				}
			}
		}
		var missing []string
		for _, n := range names {
			if !ready[n] {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("not Ready yet: %s", strings.Join(missing, ", "))
		}
		return nil
	})
}

// permanent is an error that ends a poll at once.
type permanent struct{ error }

func permanentErr(err error) error { return permanent{err} }

// poll calls try every 500 ms until it returns nil, a permanent error, or
// wait passes.
func (c *Cluster) poll(ctx context.Context, wait time.Duration, what string, try func() error) error {
	if wait <= 0 {
		wait = 2 * time.Minute
	}
	deadline := c.clk().Now().Add(wait)
	for {
		err := try()
		if err == nil {
			return nil
		}
		var p permanent
		if errors.As(err, &p) {
			return fmt.Errorf("waiting for %s: %w", what, p.error)
		}
		if !c.clk().Now().Before(deadline) {
			return fmt.Errorf("waiting for %s: not done after %v: %w", what, wait, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-c.clk().After(500 * time.Millisecond):
		}
	}
}

// Delete removes the cluster's containers, networks, image and the
// kubeconfig it wrote. A cluster that does not exist is no error.
func (c *Cluster) Delete(ctx context.Context) error {
	if err := c.CheckEngine(ctx); err != nil {
		return err
	}
	server, err := c.containers(ctx, LabelRole+"=server")
	if err != nil {
		return err
	}
	var kubeconfig string
	if len(server) > 0 {
		kubeconfig, _ = c.Docker.Run(ctx, "inspect", "-f", `{{index .Config.Labels "`+LabelKubeconfig+`"}}`, server[0])
	}
	names, err := c.containers(ctx)
	if err != nil {
		return err
	}
	var errs []error
	if len(names) > 0 {
		if _, err := c.Docker.Run(ctx, append([]string{"rm", "-f", "-v"}, names...)...); err != nil {
			errs = append(errs, err)
		}
		c.logf("removed containers %s", strings.Join(names, " "))
	}
	nets, err := c.Docker.Run(ctx, "network", "ls", "--format", "{{.Name}}", "--filter", "label="+LabelCluster+"="+c.Name)
	if err != nil {
		return err
	}
	if ns := strings.Fields(nets); len(ns) > 0 {
		if _, err := c.Docker.Run(ctx, append([]string{"network", "rm"}, ns...)...); err != nil {
			errs = append(errs, err)
		}
		c.logf("removed networks %s", strings.Join(ns, " "))
	}
	images, err := c.Docker.Run(ctx, "images", "-q", "--filter", "label="+LabelCluster+"="+c.Name)
	if err != nil {
		return err
	}
	if ids := strings.Fields(images); len(ids) > 0 {
		if _, err := c.Docker.Run(ctx, append([]string{"rmi", "-f"}, uniq(ids)...)...); err != nil {
			errs = append(errs, err)
		}
		c.logf("removed image %s", c.image())
	}
	if kubeconfig != "" {
		if err := os.Remove(kubeconfig); err == nil {
			c.logf("removed %s", kubeconfig)
		}
	}
	if len(names) == 0 && len(nets) == 0 {
		c.logf("no cluster %q: nothing to delete", c.Name)
	}
	return errors.Join(errs...)
}

func uniq(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// NodeActions are what `nodeplane node ACTION NAME` does to a node's
// container.
var NodeActions = []string{"stop", "start", "kill", "pause", "unpause", "isolate", "connect"}

// Node acts on the container of the named node: stop (SIGTERM: a graceful
// node shutdown, then the container exits), start, kill (SIGKILL: the
// machine vanishes), pause/unpause (frozen: no heartbeats), isolate (cut
// off from its zone's network, so from the server) and connect (back).
func (c *Cluster) Node(ctx context.Context, action, name string) error {
	if err := c.CheckEngine(ctx); err != nil {
		return err
	}
	found, err := c.containers(ctx, LabelNode+"="+name)
	if err != nil {
		return err
	}
	if len(found) == 0 {
		all, _ := c.containers(ctx, LabelRole+"=agent")
		return fmt.Errorf("no node %q in cluster %q (nodes: %s)", name, c.Name, strings.Join(all, ", "))
	}
	container := found[0]
	switch action {
	case "stop", "start", "kill", "pause", "unpause":
		_, err = c.Docker.Run(ctx, action, container)
	case "isolate", "connect":
		var network string
		network, err = c.Docker.Run(ctx, "inspect", "-f", `{{index .Config.Labels "`+LabelNetwork+`"}}`, container)
		if err == nil {
			verb := "disconnect"
			if action == "connect" {
				verb = "connect"
			}
			_, err = c.Docker.Run(ctx, "network", verb, network, container)
		}
	default:
		return fmt.Errorf("node action %q: want one of %s", action, strings.Join(NodeActions, ", "))
	}
	if err != nil {
		return fmt.Errorf("%s node %s: %w", action, name, err)
	}
	return nil
}
