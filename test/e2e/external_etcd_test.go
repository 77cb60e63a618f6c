package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// TestExternalEtcdCluster runs two nodeplane servers over one external
// three-member etcd cluster that serves its client API over mutual TLS.
func TestExternalEtcdCluster(t *testing.T) {
	cluster := startEtcdCluster(t, 3, newEtcdPKI(t))
	ctx := t.Context()

	s1 := startServer(t, serverOptions{apiOnly: true, args: cluster.serverArgs()})
	cs1 := s1.client()
	if _, err := os.Stat(filepath.Join(s1.dataDir, "etcd")); !os.IsNotExist(err) {
		t.Errorf("stat %s/etcd = %v; want no embedded etcd data with --etcd-servers", s1.dataDir, err)
	}
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		if _, err := cs1.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
			t.Errorf("get namespace %s: %v", ns, err)
		}
	}

	// An informer (list, then watch; re-watch or re-list when a watch ends)
	// is how clients follow the API; raw is a single watch.
	events := startNodeEventLog(t, cs1)
	list, err := cs1.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := cs1.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Stop()

	t.Run("CRUD and watch through the API", func(t *testing.T) {
		if _, err := cs1.CoreV1().Nodes().Create(ctx, plainNode("n1"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitNodeEvent(t, raw, watch.Added, "n1")
		events.waitFor(t, "add n1")
		nodes, err := cs1.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := sortedNodeNames(nodes.Items); !slices.Equal(got, []string{"n1"}) {
			t.Errorf("list nodes = %v, want [n1]", got)
		}
		setNodeLabel(t, cs1, "n1", "step", "before-failover")
		if n := waitNodeEvent(t, raw, watch.Modified, "n1"); n.Labels["step"] != "before-failover" {
			t.Errorf("watched n1 label step = %q, want before-failover", n.Labels["step"])
		}
		events.waitFor(t, "update n1 step=before-failover")
	})

	t.Run("objects are stored in every etcd member", func(t *testing.T) {
		for i, ep := range cluster.endpoints() {
			member := cluster.client(ep)
			// A serializable read answers from the member's own copy.
			eventually(t, 10*time.Second, fmt.Sprintf("m%d has /registry/nodes/n1", i), func() error {
				return wantEtcdKeys(member, "/registry/nodes/", []string{"/registry/nodes/n1"}, clientv3.WithSerializable())
			})
		}
	})

	leader := cluster.leader()
	cluster.stop(leader)
	t.Logf("stopped etcd leader m%d", leader)

	t.Run("writes and watches continue with the leader stopped", func(t *testing.T) {
		// The first writes may find no leader while the others elect one.
		eventually(t, 20*time.Second, "create n2 with the leader stopped", func() error {
			_, err := cs1.CoreV1().Nodes().Create(ctx, plainNode("n2"), metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
		events.waitFor(t, "add n2")
		setNodeLabel(t, cs1, "n1", "step", "after-failover")
		events.waitFor(t, "update n1 step=after-failover")

		// A watch opened after the stop sees changes.
		list, err := cs1.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := cs1.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer fresh.Stop()
		setNodeLabel(t, cs1, "n2", "step", "after-failover")
		waitNodeEvent(t, fresh, watch.Modified, "n2")

		var running []string
		for i, ep := range cluster.endpoints() {
			if i != leader {
				running = append(running, ep)
			}
		}
		if err := wantEtcdKeys(cluster.client(running...), "/registry/nodes/", []string{"/registry/nodes/n1", "/registry/nodes/n2"}); err != nil {
			t.Error(err)
		}
	})

	t.Run("a second server shares the storage", func(t *testing.T) {
		s2 := startServer(t, serverOptions{apiOnly: true, args: cluster.serverArgs()})
		cs2 := s2.client()
		n1, err := cs2.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get n1 through the second server: %v", err)
		}
		if n1.Labels["step"] != "after-failover" {
			t.Errorf("n1 label step through the second server = %q, want after-failover", n1.Labels["step"])
		}
		nodes, err := cs2.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := sortedNodeNames(nodes.Items); !slices.Equal(got, []string{"n1", "n2"}) {
			t.Errorf("list nodes through the second server = %v, want [n1 n2]", got)
		}

		// A write through the second server reaches the first one's informer.
		if _, err := cs2.CoreV1().Nodes().Create(ctx, plainNode("n3"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		events.waitFor(t, "add n3")
		if err := cs2.CoreV1().Nodes().Delete(ctx, "n2", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		events.waitFor(t, "delete n2")
		if _, err := cs1.CoreV1().Nodes().Get(ctx, "n2", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("get n2 through the first server after deleting it through the second = %v, want NotFound", err)
		}
		if err := s2.stop(); err != nil {
			t.Errorf("stop the second server: %v\n%s", err, s2.logs())
		}
	})

	var lastNode string // created with the last member stopped
	t.Run("a rolling restart of the members keeps the API working", func(t *testing.T) {
		cluster.restart(leader)
		for i := range cluster.members {
			if i == leader {
				continue
			}
			cluster.stop(i)
			name := fmt.Sprintf("rolling-m%d", i)
			eventually(t, 20*time.Second, fmt.Sprintf("create %s with m%d stopped", name, i), func() error {
				_, err := cs1.CoreV1().Nodes().Create(ctx, plainNode(name), metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					return nil
				}
				return err
			})
			events.waitFor(t, "add "+name)
			lastNode = name
			cluster.restart(i)
		}
	})

	// Every member has been stopped once, so the one serving the server's
	// own etcd watch too. clientv3 resumes that watch on another member;
	// if it cannot (e.g. a member without a leader cancels it), the server
	// reloads its watch cache and ends every API watch, and clients
	// re-list. The informer above is the contract; report which happened.
	if drainUntil(raw, watch.Added, lastNode, 10*time.Second) {
		t.Log("the API watch opened before the first member stopped saw every change")
	} else {
		t.Logf("the API watch opened before the first member stopped was ended by the server; server log:\n%s", grepLines(s1.logs(), "watch cache restarting"))
	}

	raw.Stop()
	events.stop()
	if err := s1.stop(); err != nil {
		t.Errorf("stop the first server: %v\n%s", err, s1.logs())
	}
}

// TestExternalEtcdFlagErrors checks that bad --etcd-* flags stop the server
// at once with a message naming the flag.
func TestExternalEtcdFlagErrors(t *testing.T) {
	p := newEtcdPKI(t)
	live := startEtcdCluster(t, 1, p).endpoints()[0]
	nobody := fmt.Sprintf("https://127.0.0.1:%d", freePort(t))
	notPEM := writeFile(t, "not-a-certificate.pem", "not a certificate\n")
	tlsFlags := []string{"--etcd-cafile=" + p.caFile, "--etcd-certfile=" + p.clientCert, "--etcd-keyfile=" + p.clientKey}
	tests := []struct {
		name   string
		args   []string
		want   []string
		within time.Duration
	}{
		{
			name: "a missing CA file is named",
			args: []string{"--etcd-servers=" + nobody, "--etcd-cafile=/nonexistent"},
			want: []string{"--etcd-cafile", "/nonexistent"},
		},
		{
			name: "a CA file without a certificate is named",
			args: []string{"--etcd-servers=" + nobody, "--etcd-cafile=" + notPEM},
			want: []string{"--etcd-cafile"},
		},
		{
			name: "an ftp URL is refused",
			args: []string{"--etcd-servers=ftp://x"},
			want: []string{"--etcd-servers", "ftp://x"},
		},
		{
			name: "a certificate without a key names both flags",
			args: []string{"--etcd-servers=" + nobody, "--etcd-cafile=" + p.caFile, "--etcd-certfile=" + p.clientCert},
			want: []string{"--etcd-certfile", "--etcd-keyfile"},
		},
		{
			name: "a key without a certificate names both flags",
			args: []string{"--etcd-servers=" + nobody, "--etcd-keyfile=" + p.clientKey},
			want: []string{"--etcd-certfile", "--etcd-keyfile"},
		},
		{
			name: "a key that does not match the certificate is named",
			args: []string{"--etcd-servers=" + nobody, "--etcd-cafile=" + p.caFile, "--etcd-certfile=" + p.clientCert, "--etcd-keyfile=" + p.serverKey},
			want: []string{"--etcd-certfile", "--etcd-keyfile"},
		},
		{
			name: "TLS files without --etcd-servers are refused",
			args: tlsFlags,
			want: []string{"--etcd-servers"},
		},
		{
			name: "a CA that did not sign the members' certificates is refused",
			args: []string{"--etcd-servers=" + live, "--etcd-cafile=" + p.otherCAFile, "--etcd-certfile=" + p.clientCert, "--etcd-keyfile=" + p.clientKey},
			want: []string{"--etcd-servers", live, "TLS handshake", "certificate signed by unknown authority"},
			// The first read to the cluster is bounded by a 5s dial timeout.
			within: 15 * time.Second,
		},
		{
			name:   "a cluster that requires a client certificate refuses none",
			args:   []string{"--etcd-servers=" + live, "--etcd-cafile=" + p.caFile},
			want:   []string{"--etcd-servers", live},
			within: 15 * time.Second,
		},
		{
			name: "an unreachable cluster is named",
			args: append([]string{"--etcd-servers=" + nobody}, tlsFlags...),
			want: []string{"--etcd-servers", nobody},
			// The first read to the cluster is bounded by a 5s dial timeout.
			within: 15 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.within == 0 {
				tt.within = 5 * time.Second
			}
			args := append([]string{"server", "--data-dir", filepath.Join(t.TempDir(), "data"), "--listen", "127.0.0.1:0"}, tt.args...)
			res := runNodeplaneCmd(t, 30*time.Second, args...)
			if res.code == 0 {
				t.Fatalf("nodeplane %s exited 0; want a failure\nstderr:\n%s", strings.Join(args, " "), res.stderr)
			}
			t.Logf("error: %s", grepLines(res.stderr, "nodeplane:"))
			for _, want := range tt.want {
				if !strings.Contains(res.stderr, want) {
					t.Errorf("stderr does not name %q:\n%s", want, res.stderr)
				}
			}
			if res.elapsed > tt.within {
				t.Errorf("failed after %v, want within %v", res.elapsed.Round(time.Millisecond), tt.within)
			}
		})
	}
}

func plainNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"e2e": "true"}}}
}

func sortedNodeNames(nodes []corev1.Node) []string {
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	return names
}

// setNodeLabel sets one label, retrying conflicts and the errors of an
// etcd leader election.
func setNodeLabel(t *testing.T, cs kubernetes.Interface, name, key, value string) {
	t.Helper()
	eventually(t, 20*time.Second, fmt.Sprintf("label node %s %s=%s", name, key, value), func() error {
		n, err := cs.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Labels[key] = value
		_, err = cs.CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{})
		return err
	})
}

// waitNodeEvent reads w until an event of type typ for node name arrives,
// skipping others, and fails the test if the watch ends or reports an
// error first.
func waitNodeEvent(t *testing.T, w watch.Interface, typ watch.EventType, name string) *corev1.Node {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch ended while waiting for %s %s", typ, name)
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch error while waiting for %s %s: %v", typ, name, apierrors.FromObject(ev.Object))
			}
			n, ok := ev.Object.(*corev1.Node)
			if ok && ev.Type == typ && n.Name == name {
				return n
			}
		case <-timeout:
			t.Fatalf("no %s event for node %s within 20s", typ, name)
		}
	}
}

// drainUntil reads w until an event of type typ for node name arrives
// (true), or the watch ends, reports an error or timeout passes (false).
func drainUntil(w watch.Interface, typ watch.EventType, name string, timeout time.Duration) bool {
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return false
			}
			if n, ok := ev.Object.(*corev1.Node); ok && ev.Type == typ && n.Name == name {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

func grepLines(text, substr string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// nodeEventLog records what a node informer delivers, as "add NAME",
// "update NAME step=VALUE" and "delete NAME".
type nodeEventLog struct {
	mu     sync.Mutex
	seen   map[string]bool
	cancel context.CancelFunc
}

func startNodeEventLog(t *testing.T, cs kubernetes.Interface) *nodeEventLog {
	t.Helper()
	l := &nodeEventLog{seen: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	t.Cleanup(cancel)
	factory := informers.NewSharedInformerFactory(cs, 0)
	informer := factory.Core().V1().Nodes().Informer()
	record := func(what string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.seen[what] = true
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { record("add " + obj.(*corev1.Node).Name) },
		UpdateFunc: func(_, obj any) {
			n := obj.(*corev1.Node)
			record(fmt.Sprintf("update %s step=%s", n.Name, n.Labels["step"]))
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			record("delete " + obj.(*corev1.Node).Name)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(t.Context().Done(), informer.HasSynced) {
		t.Fatal("node informer did not sync")
	}
	return l
}

func (l *nodeEventLog) waitFor(t *testing.T, what string) {
	t.Helper()
	eventually(t, 20*time.Second, "informer saw "+what, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.seen[what] {
			return errors.New("not yet")
		}
		return nil
	})
}

func (l *nodeEventLog) stop() { l.cancel() }

// wantEtcdKeys checks that the keys under prefix are exactly want.
func wantEtcdKeys(c *clientv3.Client, prefix string, want []string, opts ...clientv3.OpOption) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, prefix, append([]clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly()}, opts...)...)
	if err != nil {
		return fmt.Errorf("etcd get %s: %w", prefix, err)
	}
	var got []string
	for _, kv := range resp.Kvs {
		got = append(got, string(kv.Key))
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("etcd keys under %s = %v, want %v", prefix, got, want)
	}
	return nil
}
