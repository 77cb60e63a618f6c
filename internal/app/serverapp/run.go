package serverapp

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/apiserver"
	"github.com/nodeplane/nodeplane/internal/apiserver/admission"
	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
	"github.com/nodeplane/nodeplane/internal/apiserver/authz"
	"github.com/nodeplane/nodeplane/internal/apiserver/openapi"
	"github.com/nodeplane/nodeplane/internal/apiserver/registry"
	"github.com/nodeplane/nodeplane/internal/apiserver/scheme"
	"github.com/nodeplane/nodeplane/internal/controller/nodelifecycle"
	"github.com/nodeplane/nodeplane/internal/join"
	"github.com/nodeplane/nodeplane/internal/join/joinstate"
	"github.com/nodeplane/nodeplane/internal/pki"
	"github.com/nodeplane/nodeplane/internal/privdir"
	"github.com/nodeplane/nodeplane/internal/storage"
	"github.com/nodeplane/nodeplane/internal/storage/etcd"
	"github.com/nodeplane/nodeplane/internal/version"
)

// Config is the validated server configuration.
type Config struct {
	Options Options
	Logger  *slog.Logger
	Clock   clock.WithTicker
	// Ready, when set, receives the server's URL once it serves requests.
	Ready func(url string)
}

// Paths of the files the server keeps under --data-dir.
const (
	AdminKubeconfigFile = "admin.kubeconfig"
	NodeTokenFile       = "node-token"
	pkiDir              = "pki"
	etcdDir             = "etcd"
	leaseEtcdDir        = "etcd-leases"
)

// Run starts the server and blocks until ctx ends, then stops cleanly:
// readiness goes false, open watches end, in-flight requests finish, and
// storage closes.
func Run(ctx context.Context, cfg Config) (err error) {
	o := cfg.Options
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	start := cfg.Clock.Now()
	loosened, err := privdir.Ensure(o.DataDir)
	if err != nil {
		return fmt.Errorf("--data-dir %s: %w", o.DataDir, err)
	}
	if loosened != 0 {
		// It holds the CA key, the admin credentials, the join secret and
		// the etcd data: a looser mode left by an installer or an older
		// version must not stay.
		log.Warn("tightened the data dir to 0700", "dir", o.DataDir, "was", fmt.Sprintf("%#o", loosened))
	}

	cluster, err := pki.EnsureCluster(pki.Config{Dir: filepath.Join(o.DataDir, pkiDir), Hosts: o.TLSSANs, Clock: cfg.Clock})
	if err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	for _, is := range cluster.Issued() {
		log.Info("issued certificate", "file", is.File, "reason", is.Reason)
	}
	joinSecret, err := pki.EnsureToken(filepath.Join(o.DataDir, NodeTokenFile))
	if err != nil {
		return fmt.Errorf("node token: %w", err)
	}

	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()

	stores, closeStorage, err := openStorage(ctx, o, log)
	if err != nil {
		return err
	}
	defer closeStorage()

	// Our metrics go to reg; the embedded etcd registers its own (WAL fsync,
	// backend commit, ...) and the Go and process collectors in the default
	// registry. /metrics serves both.
	reg := prometheus.NewRegistry()
	storageMetrics, err := etcd.NewMetrics(reg)
	if err != nil {
		return err
	}
	stores.main.Metrics, stores.main.Clock = storageMetrics, cfg.Clock
	store, err := etcd.New(stores.main)
	if err != nil {
		return err
	}
	overrides := map[schema.GroupResource]storage.Interface{}
	compacted := []*etcd.Store{store}
	for gr, c := range stores.overrides {
		c.Metrics, c.Clock = storageMetrics, cfg.Clock
		st, err := etcd.New(c)
		if err != nil {
			return err
		}
		overrides[gr] = st
		compacted = append(compacted, st)
	}
	// Join tokens and issued node identities live in etcd, shared by every
	// server of the cluster; the takeover check reads Nodes and Leases
	// through the API once its client exists (joinNodes.SetClient below).
	joinState, err := joinstate.New(joinstate.Config{Storage: store, CAPEM: cluster.CAPEM(), Clock: cfg.Clock})
	if err != nil {
		return err
	}
	joinNodes := new(joinstate.APINodes)
	joinServer, err := join.NewServer(join.ServerConfig{
		Cluster: cluster, Token: joinSecret, Tokens: joinState, Identities: joinState, Nodes: joinNodes,
		Clock: cfg.Clock, Logger: log,
	})
	if err != nil {
		return fmt.Errorf("join: %w", err)
	}
	joinTokens, err := joinstate.NewHandler(joinstate.HandlerConfig{Store: joinState, Clock: cfg.Clock, Logger: log})
	if err != nil {
		return fmt.Errorf("join: %w", err)
	}
	if o.CompactionInterval > 0 {
		for _, st := range compacted {
			go etcd.RunCompactor(runCtx, st, etcd.CompactorConfig{Interval: o.CompactionInterval, Clock: cfg.Clock, Logger: log})
		}
	}

	authorizer := authz.New(authz.Config{Modes: o.AuthorizationModes})
	nodeClient, err := kubeletClient(cluster)
	if err != nil {
		return err
	}
	resources := registry.All()
	api, err := apiserver.New(apiserver.Config{
		Storage:          store,
		StorageOverrides: overrides,
		Resources:        resources,
		Admission: []admission.Plugin{
			admission.DefaultTolerationSeconds{
				NotReadySeconds:    o.DefaultNotReadyTolerationSeconds,
				UnreachableSeconds: o.DefaultUnreachableTolerationSeconds,
			},
			admission.NodeRestriction{},
			admission.TaintNodesByCondition{},
		},
		Authorizer: authorizer,
		NodeClient: nodeClient,
		Version:    version.Info(),
		Clock:      cfg.Clock,
		Logger:     log,
		Metrics:    apiserver.NewMetrics(reg),

		BookmarkInterval: o.BookmarkInterval,
		EventTTL:         o.EventTTL,
		MinWatchTimeout:  time.Duration(o.MinRequestTimeout) * time.Second,
	})
	if err != nil {
		return err
	}
	docs, err := openapi.New(openAPIResources(resources), openapi.Info{Version: version.Info().GitVersion})
	if err != nil {
		return fmt.Errorf("openapi: %w", err)
	}
	var apiWG sync.WaitGroup
	apiWG.Add(1)
	go func() {
		defer apiWG.Done()
		api.Run(runCtx)
	}()
	defer apiWG.Wait()
	defer cancel()

	authenticator := authn.Union{authn.ClientCert{}, joinServer.NodeTokens()}
	if o.TokenFile != "" {
		tokens, err := authn.LoadTokenFile(o.TokenFile)
		if err != nil {
			return fmt.Errorf("--token-auth-file: %w", err)
		}
		authenticator = append(authenticator, tokens)
	}

	// started turns true once the system namespaces exist: until then a
	// client that trusts /readyz could find "default" missing.
	var started, shuttingDown atomic.Bool
	mux := http.NewServeMux()
	health := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			if !started.Load() {
				http.Error(w, "starting: system namespaces not created yet", http.StatusServiceUnavailable)
				return
			}
			if shuttingDown.Load() {
				http.Error(w, "shutting down", http.StatusServiceUnavailable)
				return
			}
			if err := api.Ready(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		if r.URL.Path != "/livez" {
			cctx, ccancel := context.WithTimeout(r.Context(), 2*time.Second)
			defer ccancel()
			for _, st := range compacted {
				if _, err := st.CurrentRevision(cctx); err != nil {
					http.Error(w, "storage: "+err.Error(), http.StatusServiceUnavailable)
					return
				}
			}
		}
		_, _ = w.Write([]byte("ok"))
	}
	mux.HandleFunc("/healthz", health)
	mux.HandleFunc("/livez", health)
	mux.HandleFunc("/readyz", health)
	mux.HandleFunc("/version", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(version.Info())
	})
	// Joining happens before a node has credentials: the join server
	// checks the join secret (or, to renew, the node's certificate) itself.
	mux.Handle(join.PathPrefix, withDeadline(joinServer, o.RequestTimeout))
	protected := http.NewServeMux()
	var nlc atomic.Pointer[nodelifecycle.Controller] // set once the listener's port is known
	protected.Handle(nodelifecycle.ViewPath, zonesHandler(&nlc))
	protected.Handle(joinstate.Path, joinTokens)
	protected.Handle(joinstate.Path+"/", joinTokens)
	protected.Handle("/metrics", promhttp.HandlerFor(prometheus.Gatherers{reg, prometheus.DefaultGatherer}, promhttp.HandlerOpts{}))
	protected.Handle("/openapi/", docs.Handler())
	protected.Handle("/swagger-2.0.0.pb-v1", docs.Handler())
	limited, err := apiserver.LimitInFlight(api, apiserver.InFlightConfig{
		Seats:          o.MaxRequestsInflight + o.MaxMutatingRequestsInflight,
		RequestTimeout: o.RequestTimeout,
		Registerer:     reg,
	})
	if err != nil {
		return err
	}
	protected.Handle("/", limited)
	mux.Handle("/", authn.Middleware(authenticator, authorizer.NonResourceWith(api.Objects(), protected), authn.Unauthorized))

	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", o.Listen, err)
	}
	url := pki.ClientURL(ln.Addr())
	ctrlClient, err := controllerClient(cluster, url)
	if err != nil {
		ln.Close()
		return err
	}
	controllers, lifecycle, err := buildControllers(controllerDeps{opts: o.Controllers, client: ctrlClient, clock: cfg.Clock, logger: log, registry: reg})
	if err != nil {
		ln.Close()
		return err
	}
	nlc.Store(lifecycle)
	joinNodes.SetClient(ctrlClient)
	certPEM, keyPEM := cluster.AdminCredentials()
	kubeconfig := filepath.Join(o.DataDir, AdminKubeconfigFile)
	if err := pki.WriteKubeconfig(kubeconfig, url, cluster.CAPEM(), certPEM, keyPEM, pki.DefaultContextName); err != nil {
		ln.Close()
		return fmt.Errorf("write %s: %w", kubeconfig, err)
	}
	srv := &http.Server{
		Handler:   mux,
		TLSConfig: cluster.ServingTLSConfig(),
		// Headers must arrive within 30 s (the TLS handshake too); bodies
		// are bounded per request by --request-timeout (LimitInFlight). An
		// idle keep-alive connection is closed after 90 s.
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       90 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.ServeTLS(ln, "", "") }()
	go refreshCertificates(runCtx, cluster, cfg.Clock, log)

	if err := waitReady(ctx, api, cfg.Clock); err != nil {
		shutdown(srv, api, o.ShutdownTimeout, log)
		return err
	}
	started.Store(true)
	log.Info("nodeplane server ready", "url", url, "kubeconfig", kubeconfig, "startup", cfg.Clock.Since(start).Round(time.Millisecond))
	ctrlCtx, stopControllers := context.WithCancel(runCtx)
	ctrlDone := make(chan error, 1)
	go func() {
		ctrlDone <- runControllers(ctrlCtx, o.Controllers, ctrlClient, controllers, cfg.Clock, log)
	}()
	defer func() {
		stopControllers()
		<-ctrlDone
	}()
	if cfg.Ready != nil {
		cfg.Ready(url)
	}
	select {
	case <-ctx.Done():
		log.Info("stopping")
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case err := <-ctrlDone:
		ctrlDone <- err // for the deferred wait
		if err != nil {
			return fmt.Errorf("controllers: %w", err)
		}
	}
	// Controllers stop first (releasing leadership) while the API still serves.
	stopControllers()
	if err := <-ctrlDone; err != nil {
		log.Warn("controllers stopped with an error", "err", err)
	}
	ctrlDone <- nil
	shuttingDown.Store(true)
	if o.ShutdownDelay > 0 {
		<-cfg.Clock.After(o.ShutdownDelay)
	}
	shutdown(srv, api, o.ShutdownTimeout, log)
	return nil
}

// shutdown ends watches, then lets in-flight requests finish, all within
// timeout; past it, every connection is closed.
func shutdown(srv *http.Server, api *apiserver.Server, timeout time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	watchesEnded := make(chan struct{})
	go func() {
		defer close(watchesEnded)
		api.Stop()
	}()
	select {
	case <-watchesEnded:
	case <-ctx.Done():
		// A watch whose client stopped reading is stuck writing to it;
		// closing the connections ends the write and the watch.
		log.Warn("watches did not end in time; closing connections", "timeout", timeout)
		_ = srv.Close()
		<-watchesEnded
		return
	}
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("shutdown did not finish in time", "err", err)
		_ = srv.Close()
	}
}

// waitReady waits for the watch caches and the system namespaces.
func waitReady(ctx context.Context, api *apiserver.Server, clk clock.Clock) error {
	for {
		if api.Ready() == nil {
			if err := api.EnsureSystemNamespaces(ctx); err == nil {
				if err := api.EnsureBootstrapPolicy(ctx); err == nil {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-clk.After(20 * time.Millisecond):
		}
	}
}

func refreshCertificates(ctx context.Context, cluster *pki.Cluster, clk clock.WithTicker, log *slog.Logger) {
	t := clk.NewTicker(12 * time.Hour)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if err := cluster.Refresh(); err != nil {
				log.Warn("refresh certificates", "err", err)
			}
			for _, is := range cluster.Issued() {
				log.Info("issued certificate", "file", is.File, "reason", is.Reason)
			}
		}
	}
}

// storageConfigs are the etcd stores the server uses.
type storageConfigs struct {
	main      etcd.Config
	overrides map[schema.GroupResource]etcd.Config
}

// leasesResource is the resource kept in the soft-state member.
var leasesResource = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

// openStorage starts the embedded etcd members or dials the external
// cluster(s), and returns the store configurations and a close function.
//
// Embedded, leases live in a second member that does not fsync (SPEC P3-1:
// leases are soft state; a process crash loses nothing because writes reach
// the OS before they are acknowledged, a power loss may lose the last
// renewals, and a damaged lease member is discarded and rebuilt by the
// agents' next renewals). --durable-leases keeps them in the main member.
func openStorage(ctx context.Context, o Options, log *slog.Logger) (storageConfigs, func(), error) {
	out := storageConfigs{overrides: map[schema.GroupResource]etcd.Config{}}
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	if len(o.EtcdServer) > 0 {
		dial := func(flag string, endpoints []string) (etcd.Config, error) {
			client, err := etcd.Dial(ctx, etcd.ExternalConfig{Endpoints: endpoints, CAFile: o.EtcdCA, CertFile: o.EtcdCert, KeyFile: o.EtcdKey, Logger: log})
			if err != nil {
				return etcd.Config{}, fmt.Errorf("%s: %w", flag, err)
			}
			closers = append(closers, func() { _ = client.Close() })
			return etcd.Config{Client: client}, nil
		}
		main, err := dial("--etcd-servers", o.EtcdServer)
		if err != nil {
			return out, nil, err
		}
		out.main = main
		for _, ov := range o.EtcdOverrides {
			gr, urls, _ := parseOverride(ov)
			c, err := dial("--etcd-servers-overrides", urls)
			if err != nil {
				closeAll()
				return out, nil, err
			}
			out.overrides[gr] = c
		}
		return out, closeAll, nil
	}
	// The two members elect themselves independently: start them together.
	type started struct {
		m   *etcd.Embedded
		err error
	}
	softCh := make(chan started, 1)
	if !o.DurableLeases {
		go func() {
			m, err := startSoftMember(ctx, filepath.Join(o.DataDir, leaseEtcdDir), log)
			softCh <- started{m, err}
		}()
	} else {
		close(softCh)
	}
	ecfg := etcd.DefaultEmbeddedConfig()
	ecfg.Dir = filepath.Join(o.DataDir, etcdDir)
	ecfg.Logger = log
	member, err := etcd.StartEmbedded(ctx, ecfg)
	soft, softStarted := <-softCh
	if softStarted && soft.m != nil {
		closers = append(closers, soft.m.Close)
	}
	if err != nil {
		closeAll()
		return out, nil, fmt.Errorf("embedded etcd: %w", err)
	}
	closers = append(closers, member.Close)
	out.main = member.StoreConfig()
	if softStarted {
		if soft.err != nil {
			closeAll()
			return out, nil, soft.err
		}
		out.overrides[leasesResource] = soft.m.StoreConfig()
	}
	return out, closeAll, nil
}

// startSoftMember starts the no-fsync member for soft state. If its data
// cannot be opened (e.g. damaged by a power loss without fsync), it is
// discarded and started empty: its content is rebuilt by its writers.
func startSoftMember(ctx context.Context, dir string, log *slog.Logger) (*etcd.Embedded, error) {
	cfg := etcd.DefaultEmbeddedConfig()
	cfg.Dir = dir
	cfg.Name = "nodeplane-leases"
	cfg.ClusterToken = "nodeplane-leases"
	cfg.UnsafeNoFsync = true
	cfg.Logger = log
	m, err := etcd.StartEmbedded(ctx, cfg)
	if err == nil {
		return m, nil
	}
	log.Warn("lease storage unusable; discarding it (leases are rebuilt by their holders)", "dir", dir, "err", err)
	if rerr := os.RemoveAll(dir); rerr != nil {
		return nil, fmt.Errorf("lease storage: %w (and removing it: %v)", err, rerr)
	}
	m, err = etcd.StartEmbedded(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("lease storage: %w", err)
	}
	return m, nil
}

// openAPIResources describes the registry for the OpenAPI documents.
func openAPIResources(resources []*registry.Resource) []openapi.Resource {
	var out []openapi.Resource
	for _, r := range resources {
		res := openapi.Resource{
			GVK: r.GVK(), ListGVK: r.ListGVK(), Resource: r.Resource, Namespaced: r.Namespaced,
			Object: r.New(), List: r.NewList(), Verbs: r.Verbs(),
		}
		for _, s := range r.Subresources {
			sub := openapi.Subresource{Name: s.Name, GVK: s.GVK, Verbs: s.Verbs}
			if s.GVK.Empty() {
				sub.Object = r.New()
			} else if obj, err := scheme.Scheme.New(s.GVK); err == nil {
				sub.Object = obj
			}
			res.Subresources = append(res.Subresources, sub)
		}
		out = append(out, res)
	}
	return out
}

// kubeletClient returns, per node, the HTTP client pods/log uses to reach
// that node's agent. It presents a client certificate for
// pki.KubeletClientUser in no group — an identity that may read logs from
// agents and do nothing on the API server — and accepts only the node's own
// serving certificate from the cluster CA (pki.Cluster.NodeServingClientTLS),
// so that a node cannot pass off another endpoint as its agent. Each
// request gets its own connection: a pooled connection is keyed by address
// alone, and an address, which nodes report themselves, may lead to another
// node's agent later. Redirects are never followed.
func kubeletClient(cluster *pki.Cluster) (func(node string) *http.Client, error) {
	certPEM, keyPEM, err := cluster.IssueClientCert(pki.KubeletClientUser, nil, 365*24*time.Hour)
	if err != nil {
		return nil, fmt.Errorf("kubelet client certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("kubelet client certificate: %w", err)
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	return func(node string) *http.Client {
		tlsCfg := cluster.NodeServingClientTLS(node)
		tlsCfg.Certificates = []tls.Certificate{cert}
		return &http.Client{
			Transport: &http.Transport{
				TLSClientConfig:       tlsCfg,
				DialContext:           dialer.DialContext,
				DisableKeepAlives:     true,
				TLSHandshakeTimeout:   10 * time.Second,
				ResponseHeaderTimeout: 30 * time.Second,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}, nil
}

// withDeadline bounds the time a request outside the API's flow control
// (joining, which needs no credentials) may take to arrive and be answered:
// a client that never finishes sending its body holds its connection only
// until timeout, then the read fails and the connection is closed.
func withDeadline(next http.Handler, timeout time.Duration) http.Handler {
	if timeout <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		deadline := time.Now().Add(timeout)
		_ = rc.SetReadDeadline(deadline)
		_ = rc.SetWriteDeadline(deadline.Add(5 * time.Second))
		next.ServeHTTP(w, r)
	})
}
