package apiserver

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/apiserver/registry"
)

// fakeAgent stands in for a node agent's /containerLogs endpoint.
type fakeAgent struct {
	srv *httptest.Server
	// release lets a followed log write its second line.
	release chan struct{}
}

func newFakeAgent(t *testing.T) *fakeAgent {
	a := &fakeAgent{release: make(chan struct{})}
	a.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if len(parts) != 4 || parts[0] != "containerLogs" {
			http.Error(w, "no such path", http.StatusNotFound)
			return
		}
		pod, container := parts[2], parts[3]
		switch {
		case container == "gone":
			http.Error(w, "container gone is not running", http.StatusNotFound)
		case pod == "follower" && r.URL.Query().Get("follow") == "true":
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprintln(w, "line 1")
			w.(http.Flusher).Flush()
			select {
			case <-a.release:
				fmt.Fprintln(w, "line 2")
			case <-r.Context().Done():
			}
		default:
			fmt.Fprintf(w, "%s %s\n", r.URL.Path, r.URL.RawQuery)
		}
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// port returns the agent's port.
func (a *fakeAgent) port(t *testing.T) int32 {
	u, err := url.Parse(a.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return int32(p)
}

// closedPort returns a local port nothing listens on.
func closedPort(t *testing.T) int32 {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return int32(port)
}

func agentNode(name string, port int32) *corev1.Node {
	n := testNode(name, nil)
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = port
	return n
}

func TestPodLog(t *testing.T) {
	agent := newFakeAgent(t)
	backing := newStorage(t)
	_, h := newTestServer(t, Config{Storage: backing, NodeClient: func(string) *http.Client { return agent.srv.Client() }})
	const pods = "/api/v1/namespaces/default/pods"
	mustDo(t, h, admin, http.MethodPost, "/api/v1/nodes", agentNode("logs-node", agent.port(t)), http.StatusCreated)
	mustDo(t, h, admin, http.MethodPost, "/api/v1/nodes", agentNode("dead-node", closedPort(t)), http.StatusCreated)
	mustDo(t, h, admin, http.MethodPost, pods, testPod("single", "logs-node"), http.StatusCreated)
	mustDo(t, h, admin, http.MethodPost, pods, testPod("follower", "logs-node"), http.StatusCreated)
	mustDo(t, h, admin, http.MethodPost, pods, testPod("multi", "logs-node", func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{Name: "a", Image: "i"}, {Name: "b", Image: "i"}, {Name: "gone", Image: "i"}}
		p.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "i"}}
	}), http.StatusCreated)
	mustDo(t, h, admin, http.MethodPost, pods, testPod("log-unbound", ""), http.StatusCreated)
	mustDo(t, h, admin, http.MethodPost, pods, testPod("stranded", "dead-node"), http.StatusCreated)

	tests := []struct {
		name     string
		path     string
		wantCode int
		// wantBody is the log for a 200, else a substring of the Status message.
		wantBody string
	}{
		{"the only container is the default", pods + "/single/log", 200, "/containerLogs/default/single/c \n"},
		{"log options reach the agent", pods + "/single/log?tailLines=5&timestamps=true&previous=false&limitBytes=100&sinceSeconds=60", 200,
			"/containerLogs/default/single/c limitBytes=100&sinceSeconds=60&tailLines=5&timestamps=true\n"},
		{"a named container of several is served", pods + "/multi/log?container=b", 200, "/containerLogs/default/multi/b \n"},
		{"an init container is served", pods + "/multi/log?container=setup", 200, "/containerLogs/default/multi/setup \n"},
		{"several containers need a name", pods + "/multi/log", 400, "a container name must be specified for pod multi, choose one of: [a b gone] or one of the init containers: [setup]"},
		{"an unknown container is refused", pods + "/multi/log?container=x", 400, "container x is not valid for pod multi"},
		{"a negative tailLines is refused", pods + "/single/log?tailLines=-1", 400, "tailLines: must be greater than or equal to 0"},
		{"a non-numeric limitBytes is refused", pods + "/single/log?limitBytes=lots", 400, `limitBytes: invalid integer value "lots"`},
		{"a non-boolean follow is refused", pods + "/single/log?follow=perhaps", 400, `follow: invalid boolean value "perhaps"`},
		{"an unbound pod has no log", pods + "/log-unbound/log", 400, "pod log-unbound does not have a host assigned"},
		{"a missing pod is not found", pods + "/nobody/log", 404, `pods "nobody" not found`},
		{"an unreachable agent is named", pods + "/stranded/log", 503, `cannot reach the agent of node "dead-node" at 127.0.0.1:`},
		{"an agent's error is relayed", pods + "/multi/log?container=gone", 404, "container gone is not running"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := do(t, h, admin, http.MethodGet, tt.path, nil)
			if resp.code != tt.wantCode {
				t.Fatalf("got %d %s, want %d", resp.code, resp.body, tt.wantCode)
			}
			if tt.wantCode == 200 {
				if string(resp.body) != tt.wantBody {
					t.Errorf("got log %q, want %q", resp.body, tt.wantBody)
				}
				return
			}
			if st := resp.status(t); !strings.Contains(st.Message, tt.wantBody) || st.Code != int32(tt.wantCode) {
				t.Errorf("got %d %q, want %d with %q", st.Code, st.Message, tt.wantCode, tt.wantBody)
			}
		})
	}

	t.Run("a followed log streams as it is written", func(t *testing.T) {
		srv := httptest.NewServer(h)
		defer srv.Close()
		// The timeout only bounds a failing run.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+pods+"/follower/log?follow=true", nil)
		req.Header.Set(headerUser, admin.name)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/plain" {
			t.Fatalf("got %d %s, want 200 text/plain", resp.StatusCode, ct)
		}
		lines := make(chan string)
		go func() {
			defer close(lines)
			br := bufio.NewReader(resp.Body)
			for {
				l, err := br.ReadString('\n')
				if err != nil {
					return
				}
				lines <- l
			}
		}()
		// The second line is written only after the first has arrived: a
		// server that buffered the stream would never deliver it.
		for i, want := range []string{"line 1\n", "line 2\n"} {
			select {
			case got := <-lines:
				if got != want {
					t.Fatalf("got %q, want %q", got, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("line %d did not arrive", i+1)
			}
			if i == 0 {
				close(agent.release)
			}
		}
	})

	t.Run("a post to pods/log is not allowed", func(t *testing.T) {
		resp := do(t, h, admin, http.MethodPost, pods+"/single/log", "{}")
		if st := resp.status(t); resp.code != http.StatusMethodNotAllowed || st.Reason != metav1.StatusReasonMethodNotAllowed {
			t.Errorf("got %d %s, want 405 MethodNotAllowed", resp.code, resp.body)
		}
	})

	t.Run("a server without a node client says so", func(t *testing.T) {
		// A second server over the same storage, not running: reads go
		// to storage.
		s, err := New(Config{Storage: backing, Resources: registry.All(), Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		resp := do(t, withTestUser(s), admin, http.MethodGet, pods+"/single/log", nil)
		if st := resp.status(t); resp.code != 503 || !strings.Contains(st.Message, "no client for node agents") {
			t.Errorf("got %d %q, want 503 naming the missing client", resp.code, st.Message)
		}
	})
}

func TestAgentLogQuery(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		query   string
		want    string
		wantErr string
	}{
		{"false flags are dropped", "follow=false&previous=0&timestamps=true", "timestamps=true", ""},
		{"unknown parameters are not forwarded", "container=c&pretty=true&tailLines=0", "tailLines=0", ""},
		{"sinceTime becomes sinceSeconds", "sinceTime=2026-03-01T11:58:59Z", "sinceSeconds=61", ""},
		{"a sinceTime in the future asks for the last second", "sinceTime=2026-03-01T12:05:00Z", "sinceSeconds=1", ""},
		{"sinceTime and sinceSeconds together are refused", "sinceTime=2026-03-01T11:58:59Z&sinceSeconds=5", "", "at most one of sinceTime or sinceSeconds"},
		{"a zero limitBytes is refused", "limitBytes=0", "", "limitBytes: must be greater than or equal to 1"},
		{"a zero sinceSeconds is refused", "sinceSeconds=0", "", "sinceSeconds: must be greater than or equal to 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, _ := url.ParseQuery(tt.query)
			got, err := agentLogQuery(q, now)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got.Encode() != tt.want {
				t.Errorf("got %q, %v, want %q", got.Encode(), err, tt.want)
			}
		})
	}
}
