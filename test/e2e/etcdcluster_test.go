package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/nodeplane/nodeplane/internal/pki/pkitest"
	"github.com/nodeplane/nodeplane/internal/storage/etcd"
)

// etcdPKI is a throwaway CA with a serving certificate for 127.0.0.1 and a
// client certificate, as PEM files, plus the client TLS configuration the
// test itself uses to read etcd.
type etcdPKI struct {
	caFile                string
	serverCert, serverKey string
	clientCert, clientKey string
	clientTLS             *tls.Config
	otherCAFile           string // a valid CA that signed nothing here
}

// newEtcdPKI writes the CA, the etcd serving certificate and the etcd
// client certificate (ECDSA P-256) under a temporary directory.
func newEtcdPKI(t *testing.T) etcdPKI {
	t.Helper()
	f := pkitest.Write(t, filepath.Join(t.TempDir(), "etcd"))
	other := pkitest.Write(t, filepath.Join(t.TempDir(), "other"))
	return etcdPKI{
		caFile: f.CA, serverCert: f.ServerCert, serverKey: f.ServerKey,
		clientCert: f.ClientCert, clientKey: f.ClientKey, clientTLS: f.ClientTLS,
		otherCAFile: other.CA,
	}
}

// etcdCluster is a new etcd cluster whose members run inside the test
// process and serve their client API over TLS on loopback, requiring client
// certificates.
type etcdCluster struct {
	t       *testing.T
	pki     etcdPKI
	members []*etcd.Embedded
	configs []etcd.EmbeddedConfig
	stopped []bool
}

// startEtcdCluster starts n members of one new cluster (distinct data dirs,
// peer and client ports) and waits for all of them; they stop with the test.
func startEtcdCluster(t *testing.T, n int, p etcdPKI) *etcdCluster {
	t.Helper()
	var peers, clients, initial []string
	for i := range n {
		peers = append(peers, fmt.Sprintf("http://127.0.0.1:%d", freePort(t)))
		clients = append(clients, fmt.Sprintf("https://127.0.0.1:%d", freePort(t)))
		initial = append(initial, fmt.Sprintf("m%d=%s", i, peers[i]))
	}
	// etcd logs every lost peer at warn; keep errors only, in the test log.
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
	c := &etcdCluster{t: t, pki: p, members: make([]*etcd.Embedded, n), configs: make([]etcd.EmbeddedConfig, n), stopped: make([]bool, n)}
	errs := make([]error, n)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range n {
		cfg := etcd.EmbeddedConfig{
			Dir:               t.TempDir(),
			Name:              fmt.Sprintf("m%d", i),
			Logger:            logger,
			PeerURL:           peers[i],
			ClientURL:         clients[i],
			ClientCertFile:    p.serverCert,
			ClientKeyFile:     p.serverKey,
			ClientCAFile:      p.caFile,
			InitialCluster:    strings.Join(initial, ","),
			ClusterToken:      "e2e-" + t.Name(),
			HeartbeatInterval: 50 * time.Millisecond,
			ElectionTimeout:   500 * time.Millisecond,
			UnsafeNoFsync:     true,
		}
		c.configs[i] = cfg
		// Each member waits for a quorum, so they start together.
		wg.Go(func() { c.members[i], errs[i] = etcd.StartEmbedded(ctx, cfg) })
	}
	wg.Wait()
	for i, m := range c.members {
		if m != nil {
			t.Cleanup(m.Close)
		}
		if errs[i] != nil {
			t.Fatalf("start etcd member m%d: %v", i, errs[i])
		}
	}
	return c
}

// restart starts stopped member i again on its data dir and URLs; it
// rejoins the cluster with its data.
func (c *etcdCluster) restart(i int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), 30*time.Second)
	defer cancel()
	m, err := etcd.StartEmbedded(ctx, c.configs[i])
	if err != nil {
		c.t.Fatalf("restart etcd member m%d: %v", i, err)
	}
	c.t.Cleanup(m.Close)
	c.members[i], c.stopped[i] = m, false
}

// endpoints returns the client URLs of every member, stopped or not.
func (c *etcdCluster) endpoints() []string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, m.ClientURL())
	}
	return eps
}

// serverArgs are the nodeplane server flags that point at this cluster.
func (c *etcdCluster) serverArgs() []string {
	return []string{
		"--etcd-servers=" + strings.Join(c.endpoints(), ","),
		"--etcd-cafile=" + c.pki.caFile,
		"--etcd-certfile=" + c.pki.clientCert,
		"--etcd-keyfile=" + c.pki.clientKey,
	}
}

// client returns a TLS etcd client of the given endpoints, closed with the
// test.
func (c *etcdCluster) client(endpoints ...string) *clientv3.Client {
	c.t.Helper()
	cl, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		TLS:         c.pki.clientTLS,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		c.t.Fatalf("etcd client for %v: %v", endpoints, err)
	}
	c.t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// leader returns the index of the member that leads the cluster, asking
// each running member.
func (c *etcdCluster) leader() int {
	c.t.Helper()
	clients := make([]*clientv3.Client, len(c.members))
	for i, m := range c.members {
		if !c.stopped[i] {
			clients[i] = c.client(m.ClientURL())
		}
	}
	var last error
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for i, m := range c.members {
			if c.stopped[i] {
				continue
			}
			ctx, cancel := context.WithTimeout(c.t.Context(), 2*time.Second)
			st, err := clients[i].Status(ctx, m.ClientURL())
			cancel()
			if err != nil {
				last = err
				continue
			}
			if st.Leader != 0 && st.Leader == st.Header.MemberId {
				return i
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("no etcd member reports itself leader after 10s: %v", last)
	return -1
}

// stop stops member i (its data stays on disk).
func (c *etcdCluster) stop(i int) {
	c.members[i].Close()
	c.stopped[i] = true
}
