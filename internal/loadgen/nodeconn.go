package loadgen

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

// NodeClient is one simulated node's own connection, as a real agent has:
// one TCP+TLS connection (HTTP/2) carrying its lease renewals and its
// watches, optionally with its own identity (system:node:<name>).
type NodeClient struct {
	Coordination coordinationv1client.CoordinationV1Interface
	Core         corev1client.CoreV1Interface
	// Watch is the same API over the same connection without a request
	// timeout, so long-running watches are not cut.
	Watch corev1client.CoreV1Interface
}

// NodeIdentity returns the client certificate and key (PEM) a node
// authenticates with.
type NodeIdentity func(node string) (certPEM, keyPEM []byte, err error)

// NewNodeClients returns one NodeClient per name, each with its own
// transport (so its own connection). With identity, node i authenticates
// with the certificate identity(names[i]) instead of base's credentials;
// without, every node uses base's identity. Only the coordination and core
// clients are built, so 10,000 nodes stay cheap in the generator.
func NewNodeClients(base *rest.Config, names []string, identity NodeIdentity) ([]NodeClient, error) {
	out := make([]NodeClient, len(names))
	for i, name := range names {
		cfg := rest.CopyConfig(base)
		cfg.ContentType = ProtobufContentType
		cfg.AcceptContentTypes = ProtobufContentType + ",application/json"
		cfg.QPS = -1
		cfg.Burst = 0
		cfg.UserAgent = "nodeplane-load/" + name
		if identity != nil {
			certPEM, keyPEM, err := identity(name)
			if err != nil {
				return nil, fmt.Errorf("identity of node %s: %w", name, err)
			}
			cfg.BearerToken, cfg.BearerTokenFile, cfg.Username, cfg.Password = "", "", "", ""
			cfg.AuthProvider, cfg.ExecProvider = nil, nil
			cfg.CertFile, cfg.KeyFile = "", ""
			cfg.CertData, cfg.KeyData = certPEM, keyPEM
		}
		// A distinct Dial keeps client-go from caching (and sharing) the
		// transport.
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		cfg.Dial = d.DialContext
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", name, err)
		}
		watchHC := &http.Client{Transport: hc.Transport}
		coord, err := coordinationv1client.NewForConfigAndClient(cfg, hc)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", name, err)
		}
		core, err := corev1client.NewForConfigAndClient(cfg, hc)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", name, err)
		}
		wcfg := rest.CopyConfig(cfg)
		wcfg.Timeout = 0
		wcore, err := corev1client.NewForConfigAndClient(wcfg, watchHC)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", name, err)
		}
		out[i] = NodeClient{Coordination: coord, Core: core, Watch: wcore}
	}
	return out, nil
}

// nodeWatches are the agents' two watches per node — its Node (by
// metadata.name) and its pods (by spec.nodeName) — held open and drained
// for the run.
type nodeWatches struct {
	wg      sync.WaitGroup
	stops   []watch.Interface
	mu      sync.Mutex
	events  atomic.Int64
	ended   atomic.Int64
	started int
}

// openNodeWatches opens both watches of every node, SetupConcurrency at a
// time, and drains them until stop is called.
func (r *runner) openNodeWatches(ctx context.Context) (*nodeWatches, error) {
	nw := &nodeWatches{}
	nodes := r.cfg.NodeClients
	// The watches live on ctx, not on parallel's context, which ends with
	// the setup.
	_, err := r.parallel(ctx, len(nodes), func(_ context.Context, _ kubernetes.Interface, i int) (bool, error) {
		name := NodeName(r.cfg.Prefix, i)
		c := nodes[i].Watch
		node, err := c.Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, AllowWatchBookmarks: true})
		if err != nil {
			return false, fmt.Errorf("watch node %s: %w", name, err)
		}
		nw.add(node)
		pods, err := c.Pods(metav1.NamespaceAll).Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name, AllowWatchBookmarks: true})
		if err != nil {
			return false, fmt.Errorf("watch pods of %s: %w", name, err)
		}
		nw.add(pods)
		return false, nil
	})
	if err != nil {
		nw.stop()
		return nil, err
	}
	return nw, nil
}

func (nw *nodeWatches) add(wi watch.Interface) {
	nw.mu.Lock()
	nw.stops = append(nw.stops, wi)
	nw.started++
	nw.mu.Unlock()
	nw.wg.Go(func() {
		for range wi.ResultChan() {
			nw.events.Add(1)
		}
		nw.ended.Add(1)
	})
}

// stop closes every watch and waits for the drains to end. Watches that
// ended before stop (closed by the server) are counted in ended first.
func (nw *nodeWatches) stop() (endedEarly int) {
	endedEarly = int(nw.ended.Load())
	nw.mu.Lock()
	stops := nw.stops
	nw.mu.Unlock()
	for _, wi := range stops {
		wi.Stop()
	}
	nw.wg.Wait()
	return endedEarly
}
