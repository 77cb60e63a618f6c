package cluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nodeplane/nodeplane/internal/cluster"
)

// fakeDocker answers docker commands from a table keyed by the command's
// leading words and records every command run.
type fakeDocker struct {
	answers map[string]string
	fail    map[string]error
	calls   []string
}

func (f *fakeDocker) Run(_ context.Context, args ...string) (string, error) {
	line := strings.Join(args, " ")
	f.calls = append(f.calls, line)
	for prefix, err := range f.fail {
		if strings.HasPrefix(line, prefix) {
			return "", err
		}
	}
	best := ""
	for prefix := range f.answers {
		if strings.HasPrefix(line, prefix) && len(prefix) > len(best) {
			best = prefix
		}
	}
	return f.answers[best], nil
}

func (f *fakeDocker) ran(prefix string) bool {
	for _, c := range f.calls {
		if strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return false
}

func TestConfigValidate(t *testing.T) {
	ok := cluster.Config{Name: "dev", Nodes: 3, Zones: []string{"a", "b"}}
	for _, tt := range []struct {
		name   string
		change func(*cluster.Config)
		want   string
	}{
		{"a named cluster of 3 nodes in 2 zones is valid", func(*cluster.Config) {}, ""},
		{"zero nodes names --nodes", func(c *cluster.Config) { c.Nodes = 0 }, "--nodes 0"},
		{"an upper-case name names --name", func(c *cluster.Config) { c.Name = "Dev" }, `--name "Dev"`},
		{"a zone with a slash names --zones", func(c *cluster.Config) { c.Zones = []string{"a/b"} }, `zone "a/b"`},
		{"a repeated zone names --zones", func(c *cluster.Config) { c.Zones = []string{"a", "a"} }, `zone "a" given twice`},
		{"a port out of range names --port", func(c *cluster.Config) { c.HostPort = 70000 }, "--port 70000"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.change(&c)
			err := c.Validate()
			if tt.want == "" && err != nil {
				t.Errorf("err = %v, want nil", err)
			}
			if tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestDeleteOfNothingIsANoOp(t *testing.T) {
	d := &fakeDocker{answers: map[string]string{"info": "20.10"}}
	out := new(strings.Builder)
	c := &cluster.Cluster{Name: "dev", Docker: d, Out: out}
	if err := c.Delete(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"rm", "network rm", "rmi"} {
		if d.ran(verb + " ") {
			t.Errorf("ran docker %s with nothing to delete: %v", verb, d.calls)
		}
	}
	if !strings.Contains(out.String(), `no cluster "dev": nothing to delete`) {
		t.Errorf("output %q, want it to say there was nothing to delete", out)
	}
}

func TestCreateRefusals(t *testing.T) {
	for _, tt := range []struct {
		name string
		d    *fakeDocker
		want string
	}{
		{"an unreachable engine is named and nothing is created",
			&fakeDocker{fail: map[string]error{"info": errors.New("docker info: Cannot connect to the Docker daemon")}},
			"the Docker engine is not reachable"},
		{"an existing cluster of the same name is refused",
			&fakeDocker{answers: map[string]string{"info": "20.10", "ps": "dev-server\ndev-node-1"}},
			`cluster "dev" exists already (2 containers)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &cluster.Cluster{Name: "dev", Docker: tt.d}
			err := c.Create(context.Background(), cluster.Config{Name: "dev", Nodes: 1, Binary: "/nonexistent", BusyBox: "/nonexistent"})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
			for _, verb := range []string{"build", "network create", "run", "rm"} {
				if tt.d.ran(verb + " ") {
					t.Errorf("ran docker %s after a refusal: %v", verb, tt.d.calls)
				}
			}
		})
	}
}

func TestNodeActions(t *testing.T) {
	for _, tt := range []struct {
		name, action, want string
	}{
		{"kill sends SIGKILL to the node's container", "kill", "kill dev-node-2"},
		{"stop stops the container (SIGTERM, a graceful node shutdown)", "stop", "stop dev-node-2"},
		{"pause freezes the container", "pause", "pause dev-node-2"},
		{"isolate disconnects the node from its zone's network", "isolate", "network disconnect dev-zone-b dev-node-2"},
		{"connect puts it back on its zone's network", "connect", "network connect dev-zone-b dev-node-2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := &fakeDocker{answers: map[string]string{"info": "20.10", "ps": "dev-node-2", "inspect": "dev-zone-b"}}
			c := &cluster.Cluster{Name: "dev", Docker: d}
			if err := c.Node(context.Background(), tt.action, "dev-node-2"); err != nil {
				t.Fatal(err)
			}
			if !d.ran(tt.want) {
				t.Errorf("docker calls %v, want %q", d.calls, tt.want)
			}
		})
	}
	d := &fakeDocker{answers: map[string]string{"info": "20.10"}}
	err := (&cluster.Cluster{Name: "dev", Docker: d}).Node(context.Background(), "kill", "ghost")
	if err == nil || !strings.Contains(err.Error(), `no node "ghost" in cluster "dev"`) {
		t.Errorf("unknown node: err = %v, want one naming it", err)
	}
}
