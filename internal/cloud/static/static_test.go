package static_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/cloud/static"
)

const good = `instances:
- name: rack1-n1
  providerID: static://rack1/n1
  addresses: [{type: InternalIP, address: 10.0.0.5}]
  zone: z1
  region: r1
  instanceType: m1.large
  state: running
- name: rack1-n2
  state: stopped
`

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string // substring; "" = valid
	}{
		{"the issue's example parses", good, ""},
		{"an empty file lists no machines", "", ""},
		{"a syntax error names its line", "instances:\n- name: a\n  zone: [z1\n", "line"},
		{"a duplicate provider ID names the line and field", "instances:\n- name: a\n  providerID: static://x\n- name: b\n  providerID: static://x\n", "line 4: instances[1].providerID: duplicate provider ID \"static://x\""},
		{"a duplicate name names the line and field", "instances:\n- name: a\n- name: a\n", "line 3: instances[1].name: duplicate name"},
		{"an unknown field is refused with its line", "instances:\n- name: a\n  zones: z1\n", "line 3: field zones not found"},
		{"a missing name is refused", "instances:\n- zone: z1\n", "instances[0].name: required"},
		{"a bad state is refused", "instances:\n- name: a\n  state: paused\n", "line 2: instances[0].state: \"paused\": want running or stopped"},
		{"an InternalIP that is not an IP is refused", "instances:\n- name: a\n  addresses: [{type: InternalIP, address: nope}]\n", "instances[0].addresses[0].address: \"nope\" is not an IP address"},
		{"an unknown address type is refused", "instances:\n- name: a\n  addresses: [{type: Internal, address: 10.0.0.1}]\n", "instances[0].addresses[0].type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := static.Parse([]byte(tt.in))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func node(name, providerID string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestProviderAnswersFromTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cloud.yaml")
	write(t, path, good)
	p, err := static.New(static.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tt := range []struct {
		name               string
		node               *corev1.Node
		exists, shutdown   bool
		wantShutdownErrors bool
	}{
		{"a running machine found by name exists and is not shut down", node("rack1-n1", ""), true, false, false},
		{"a machine found by provider ID exists", node("other-name", "static://rack1/n1"), true, false, false},
		{"a stopped machine is shut down", node("rack1-n2", ""), true, true, false},
		{"the default provider ID is static://<name>", node("x", "static://rack1-n2"), true, true, false},
		{"a machine missing from the file does not exist", node("rack9", ""), false, false, true},
		{"a provider ID missing from the file does not exist, whatever the name", node("rack1-n1", "static://gone"), false, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ok, err := p.InstanceExists(ctx, tt.node)
			if err != nil || ok != tt.exists {
				t.Fatalf("InstanceExists = %v, %v; want %v", ok, err, tt.exists)
			}
			down, err := p.InstanceShutdown(ctx, tt.node)
			if (err != nil) != tt.wantShutdownErrors || down != tt.shutdown {
				t.Fatalf("InstanceShutdown = %v, %v; want %v", down, err, tt.shutdown)
			}
		})
	}
	md, err := p.InstanceMetadata(ctx, node("rack1-n1", ""))
	if err != nil {
		t.Fatal(err)
	}
	if md.ProviderID != "static://rack1/n1" || md.Zone != "z1" || md.Region != "r1" || md.InstanceType != "m1.large" ||
		len(md.NodeAddresses) != 1 || md.NodeAddresses[0] != (corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}) {
		t.Fatalf("metadata %+v", md)
	}
}

// TestReload runs in a synctest bubble: the reload loop's ticker runs on
// bubble time, and synctest.Wait lets it finish each pass.
func TestReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cloud.yaml")
	synctest.Test(t, func(t *testing.T) { testReload(t, path) })
}

func testReload(t *testing.T, path string) {
	write(t, path, good)
	p, err := static.New(static.Config{Path: path, ReloadPeriod: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	p.Initialize(nil, stop)
	ctx := context.Background()
	n2 := node("rack1-n2", "")

	// tick lets one reload period pass (bubble time) and the loop run, then
	// checks cond.
	tick := func(what string, cond func() bool) {
		t.Helper()
		time.Sleep(time.Second)
		synctest.Wait()
		if !cond() {
			t.Fatalf("after a reload: %s does not hold", what)
		}
	}

	write(t, path, strings.Replace(good, "state: stopped", "state: running", 1))
	tick("rack1-n2 running after the file changed", func() bool {
		down, _ := p.InstanceShutdown(ctx, n2)
		return !down
	})

	write(t, path, "instances:\n- name: rack1-n1\n- name: rack1-n1\n")
	tick("a bad file is reported", func() bool { return p.LastError() != nil })
	if !strings.Contains(p.LastError().Error(), "line 3: instances[1].name: duplicate name") {
		t.Errorf("LastError = %v", p.LastError())
	}
	if ok, _ := p.InstanceExists(ctx, n2); !ok {
		t.Error("a bad file replaced the last good state: rack1-n2 no longer exists")
	}

	write(t, path, "instances: []\n")
	tick("a good file after a bad one is taken", func() bool {
		ok, _ := p.InstanceExists(ctx, n2)
		return !ok && p.LastError() == nil
	})

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := p.Reload(); err == nil {
		t.Error("Reload of a missing file succeeded")
	}
}

func TestNewRefusesABadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cloud.yaml")
	write(t, path, "instances:\n- name: a\n  providerID: static://x\n- name: b\n  providerID: static://x\n")
	if _, err := static.New(static.Config{Path: path}); err == nil || !strings.Contains(err.Error(), "line 4") {
		t.Fatalf("New = %v, want the duplicate's line", err)
	}
}
