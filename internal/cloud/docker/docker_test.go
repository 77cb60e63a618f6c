package docker_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/nodeplane/nodeplane/internal/cloud/docker"
)

const running = `{"Id":"abc123","Name":"/n1","State":{"Status":"running","Running":true},
 "Config":{"Hostname":"n1host","Labels":{"topology.kubernetes.io/zone":"z1","topology.kubernetes.io/region":"r1","node.kubernetes.io/instance-type":"small"}},
 "NetworkSettings":{"Networks":{"bridge":{"IPAddress":"172.17.0.5","GlobalIPv6Address":""},"lab":{"IPAddress":"10.9.0.2","GlobalIPv6Address":"fd00::2"}}}}`

const exited = `{"Id":"def456","Name":"/n2","State":{"Status":"exited","Running":false},"Config":{"Hostname":"n2"},"NetworkSettings":{"Networks":{}}}`

// fakeEngine serves a few canned containers over a unix socket.
func fakeEngine(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/_ping", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("OK")) })
	mux.HandleFunc("/containers/{id}/json", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("id") {
		case "n1", "abc123":
			_, _ = w.Write([]byte(running))
		case "n2", "def456":
			_, _ = w.Write([]byte(exited))
		case "broken":
			http.Error(w, "engine trouble", http.StatusInternalServerError)
		default:
			http.Error(w, `{"message":"No such container"}`, http.StatusNotFound)
		}
	})
	mux.HandleFunc("/containers/json", func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Query().Get("filters"), "nodeplane.io/node-name=labelled") {
			_, _ = w.Write([]byte(`[{"Id":"def456"}]`))
			return
		}
		_, _ = w.Write([]byte(`[]`))
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "unix://" + sock
}

func node(name, providerID string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
}

func TestProvider(t *testing.T) {
	p, err := docker.New(docker.Config{Host: fakeEngine(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name           string
		node           *corev1.Node
		exists         bool
		existsErr      bool
		shutdown       bool
		shutdownErrIs  error
		shutdownFailed bool
	}{
		{"a running container found by name exists and is up", node("n1", ""), true, false, false, nil, false},
		{"a container found by provider ID exists", node("x", "docker://abc123"), true, false, false, nil, false},
		{"an exited container is shut down", node("n2", ""), true, false, true, nil, false},
		{"a container found by its node-name label", node("labelled", ""), true, false, true, nil, false},
		{"a missing container does not exist", node("gone", ""), false, false, false, cloudprovider.InstanceNotFound, true},
		{"a removed container named by provider ID does not exist", node("n1", "docker://feed"), false, false, false, cloudprovider.InstanceNotFound, true},
		{"an engine error is an error, never 'does not exist'", node("x", "docker://broken"), false, true, false, nil, true},
		{"another provider's ID is an error, never 'does not exist'", node("x", "static://a"), false, true, false, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, err := p.InstanceExists(ctx, tt.node)
			if ok != tt.exists || (err != nil) != tt.existsErr {
				t.Fatalf("InstanceExists = %v, %v; want %v (error %v)", ok, err, tt.exists, tt.existsErr)
			}
			down, err := p.InstanceShutdown(ctx, tt.node)
			if down != tt.shutdown || (err != nil) != tt.shutdownFailed || (tt.shutdownErrIs != nil && !errors.Is(err, tt.shutdownErrIs)) {
				t.Fatalf("InstanceShutdown = %v, %v; want %v", down, err, tt.shutdown)
			}
		})
	}
	md, err := p.InstanceMetadata(ctx, node("n1", ""))
	if err != nil {
		t.Fatal(err)
	}
	want := []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "172.17.0.5"},
		{Type: corev1.NodeInternalIP, Address: "10.9.0.2"},
		{Type: corev1.NodeInternalIP, Address: "fd00::2"},
		{Type: corev1.NodeHostName, Address: "n1host"},
	}
	if md.ProviderID != "docker://abc123" || md.Zone != "z1" || md.Region != "r1" || md.InstanceType != "small" || len(md.NodeAddresses) != len(want) {
		t.Fatalf("metadata %+v", md)
	}
	for i := range want {
		if md.NodeAddresses[i] != want[i] {
			t.Errorf("address %d = %v, want %v", i, md.NodeAddresses[i], want[i])
		}
	}
}

func TestUnreachableEngine(t *testing.T) {
	p, err := docker.New(docker.Config{Host: "unix://" + filepath.Join(t.TempDir(), "none.sock")})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Ping(context.Background()); err == nil || !strings.Contains(err.Error(), "docker engine at unix://") {
		t.Fatalf("Ping = %v, want an error naming the engine", err)
	}
	if ok, err := p.InstanceExists(context.Background(), node("n1", "")); ok || err == nil {
		t.Fatalf("InstanceExists = %v, %v; want an error", ok, err)
	}
	if _, err := docker.New(docker.Config{Host: "tcp://1.2.3.4:2375"}); err == nil {
		t.Fatal("a tcp DOCKER_HOST was accepted")
	}
}
