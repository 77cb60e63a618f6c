package serverapp

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/apiserver"
	"github.com/nodeplane/nodeplane/internal/apiserver/admission"
	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
	"github.com/nodeplane/nodeplane/internal/apiserver/authz"
	"github.com/nodeplane/nodeplane/internal/apiserver/openapi"
	"github.com/nodeplane/nodeplane/internal/apiserver/registry"
	"github.com/nodeplane/nodeplane/internal/apiserver/scheme"
	"github.com/nodeplane/nodeplane/internal/apiserver/scraper"
	"github.com/nodeplane/nodeplane/internal/controller/cloudnodelifecycle"
	"github.com/nodeplane/nodeplane/internal/controller/manager"
	"github.com/nodeplane/nodeplane/internal/controller/nodelifecycle"
	"github.com/nodeplane/nodeplane/internal/h2server"
	"github.com/nodeplane/nodeplane/internal/join"
	"github.com/nodeplane/nodeplane/internal/join/joinstate"
	"github.com/nodeplane/nodeplane/internal/pki"
	"github.com/nodeplane/nodeplane/internal/privdir"
	"github.com/nodeplane/nodeplane/internal/storage"
	"github.com/nodeplane/nodeplane/internal/storage/etcd"
	"github.com/nodeplane/nodeplane/internal/version"
	"github.com/nodeplane/nodeplane/internal/zoneview"
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
	leasesDir           = "leases"
	// legacyLeaseEtcdDir held the no-fsync etcd member that kept leases
	// before the in-memory lease store; it is removed at start.
	legacyLeaseEtcdDir = "etcd-leases"
)

// Run starts the server and blocks until ctx ends, then stops cleanly:
// controllers stop (releasing leadership), readiness goes false, open
// watches end, in-flight requests finish, and storage closes.
func Run(ctx context.Context, cfg Config) error {
	s := newServer(cfg)
	start := s.clock.Now()
	if err := s.prepareDataDir(); err != nil {
		return err
	}
	if err := s.loadCredentials(); err != nil {
		return err
	}
	cloudCtx, stopCloud := context.WithCancel(context.Background())
	defer stopCloud()
	if err := s.buildCloud(cloudCtx); err != nil {
		return err
	}
	closeStorage, err := s.openStores(ctx)
	if err != nil {
		return err
	}
	defer closeStorage()
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.buildJoin(); err != nil {
		return err
	}
	s.startCompactors(runCtx)
	if err := s.buildAPI(); err != nil {
		return err
	}
	defer s.startAPI(runCtx)() // stops the API's background work before storage closes
	handler, err := s.buildHandler()
	if err != nil {
		return err
	}
	ln, url, err := listen(s.opts.Listen)
	if err != nil {
		return err
	}
	ctrl, err := s.buildControllerSet(url, handler)
	if err == nil {
		err = s.writeAdminKubeconfig(url)
	}
	if err != nil {
		ln.Close()
		return err
	}
	srv, serveErr := s.serve(ln, handler)
	go refreshCertificates(runCtx, s.cluster, s.clock, s.log)
	if err := waitReady(ctx, s.api, s.clock); err != nil {
		shutdown(srv, s.api, s.opts.ShutdownTimeout, s.log)
		return err
	}
	s.started.Store(true)
	s.log.Info("nodeplane server ready", "url", url, "kubeconfig", s.kubeconfigPath(), "startup", s.clock.Since(start).Round(time.Millisecond))
	ctrlDone, stopControllers := s.startControllers(runCtx, ctrl)
	defer stopControllers()
	if cfg.Ready != nil {
		cfg.Ready(url)
	}
	if err := s.wait(ctx, serveErr, ctrlDone, stopControllers); err != nil {
		return err
	}
	// Controllers stop first (releasing leadership) while the API still serves.
	if err := stopControllers(); err != nil {
		s.log.Warn("controllers stopped with an error", "err", err)
	}
	s.shuttingDown.Store(true)
	if s.opts.ShutdownDelay > 0 {
		<-s.clock.After(s.opts.ShutdownDelay)
	}
	shutdown(srv, s.api, s.opts.ShutdownTimeout, s.log)
	return nil
}

// server is what Run's steps build and share.
type server struct {
	opts  Options
	log   *slog.Logger
	clock clock.WithTicker
	// reg holds our metrics; the embedded etcd registers its own (WAL fsync,
	// backend commit, ...) and the Go and process collectors in the default
	// registry. /metrics serves both.
	reg *prometheus.Registry

	cluster    *pki.Cluster
	joinSecret string

	store     *etcd.Store
	overrides map[schema.GroupResource]storage.Interface
	// allStores are the main store, the overrides and the in-memory
	// lease store: compacted and checked by the health endpoints.
	allStores []backend

	joinServer *join.Server
	joinTokens http.Handler
	// joinNodes lets the takeover check read Nodes and Leases through the
	// API once the controllers' client exists.
	joinNodes *joinstate.APINodes

	authorizer *authz.Authorizer
	api        *apiserver.Server
	// usage scrapes the agents for metrics.k8s.io (kubectl top).
	usage *scraper.Scraper
	docs  *openapi.Documents
	// nlc is the node lifecycle controller, set once the listener's port is
	// known, for the zones view.
	nlc atomic.Pointer[nodelifecycle.Controller]
	// zoneView keeps the node lifecycle controller's recent summaries for
	// the browser view (/ui/).
	zoneView *zoneview.Aggregator
	// cloud is the --cloud-provider (nil: none, or external), and cnlc its
	// lifecycle controller for the zones view.
	cloud cloudprovider.Interface
	cnlc  atomic.Pointer[cloudnodelifecycle.Controller]
	// started turns true once the system namespaces exist: until then a
	// client that trusts /readyz could find "default" missing.
	started, shuttingDown atomic.Bool
}

func newServer(cfg Config) *server {
	s := &server{opts: cfg.Options, log: cfg.Logger, clock: cfg.Clock, reg: prometheus.NewRegistry()}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	s.zoneView = zoneview.New(zoneview.Config{Clock: s.clock, Leading: func() bool {
		nlc := s.nlc.Load()
		return nlc != nil && nlc.Leading()
	}})
	return s
}

// prepareDataDir creates --data-dir or tightens its mode to 0700.
func (s *server) prepareDataDir() error {
	loosened, err := privdir.Ensure(s.opts.DataDir)
	if err != nil {
		return fmt.Errorf("--data-dir %s: %w", s.opts.DataDir, err)
	}
	if loosened != 0 {
		// It holds the CA key, the admin credentials, the join secret and
		// the etcd data: a looser mode left by an installer or an older
		// version must not stay.
		s.log.Warn("tightened the data dir to 0700", "dir", s.opts.DataDir, "was", fmt.Sprintf("%#o", loosened))
	}
	return nil
}

// loadCredentials loads or issues the cluster's certificates and the join
// secret.
func (s *server) loadCredentials() error {
	cluster, err := pki.EnsureCluster(pki.Config{Dir: filepath.Join(s.opts.DataDir, pkiDir), Hosts: s.opts.TLSSANs, Clock: s.clock})
	if err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	for _, is := range cluster.Issued() {
		s.log.Info("issued certificate", "file", is.File, "reason", is.Reason)
	}
	secret, err := pki.EnsureToken(filepath.Join(s.opts.DataDir, NodeTokenFile))
	if err != nil {
		return fmt.Errorf("node token: %w", err)
	}
	s.cluster, s.joinSecret = cluster, secret
	return nil
}

// buildJoin builds the join endpoint and the join-token API. Join tokens
// and issued node identities live in etcd, shared by every server of the
// cluster.
func (s *server) buildJoin() error {
	state, err := joinstate.New(joinstate.Config{Storage: s.store, CAPEM: s.cluster.CAPEM(), Clock: s.clock})
	if err != nil {
		return err
	}
	s.joinNodes = new(joinstate.APINodes)
	s.joinServer, err = join.NewServer(join.ServerConfig{
		Cluster: s.cluster, Token: s.joinSecret, Tokens: state, Identities: state, Nodes: s.joinNodes,
		Clock: s.clock, Logger: s.log,
	})
	if err != nil {
		return fmt.Errorf("join: %w", err)
	}
	s.joinTokens, err = joinstate.NewHandler(joinstate.HandlerConfig{Store: state, Clock: s.clock, Logger: s.log})
	if err != nil {
		return fmt.Errorf("join: %w", err)
	}
	return nil
}

// buildAPI builds the API handler over the stores, and the OpenAPI
// documents of the resources it serves.
func (s *server) buildAPI() error {
	nodeClient, err := kubeletClient(s.cluster)
	if err != nil {
		return err
	}
	resources := registry.All()
	o := s.opts
	s.authorizer = authz.New(authz.Config{Modes: s.opts.AuthorizationModes})
	s.usage, err = scraper.New(scraper.Config{
		Resolution: o.MetricResolution,
		Rate:       scrapeRate(o.MetricScrapesPerSecond),
		Targets:    func(ctx context.Context) ([]scraper.Target, error) { return s.api.AgentTargets(ctx) },
		Client:     nodeClient,
		Clock:      s.clock,
		Logger:     s.log.With("component", "resource-metrics"),
	})
	if err != nil {
		return err
	}
	s.api, err = apiserver.New(apiserver.Config{
		Storage:          s.store,
		StorageOverrides: s.overrides,
		Resources:        resources,
		Admission: []admission.Plugin{
			admission.DefaultTolerationSeconds{
				NotReadySeconds:    o.DefaultNotReadyTolerationSeconds,
				UnreachableSeconds: o.DefaultUnreachableTolerationSeconds,
			},
			admission.NodeRestriction{},
			admission.TaintNodesByCondition{},
			admission.StorageObjectInUseProtection{},
		},
		Authorizer:    s.authorizer,
		NodeClient:    nodeClient,
		ResourceUsage: s.usage,
		Version:       version.Info(),
		Clock:         s.clock,
		Logger:        s.log,
		Metrics:       apiserver.NewMetrics(s.reg),

		BookmarkInterval: o.BookmarkInterval,
		MinWatchTimeout:  time.Duration(o.MinRequestTimeout) * time.Second,
	})
	if err != nil {
		return err
	}
	s.docs, err = openapi.New(openAPIResources(resources), openapi.Info{Version: version.Info().GitVersion})
	if err != nil {
		return fmt.Errorf("openapi: %w", err)
	}
	return nil
}

// startAPI runs the API's background work (watch caches) until ctx ends;
// the returned function cancels ctx and waits for it to stop.
func (s *server) startAPI(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); s.usage.Run(ctx) }()
		s.api.Run(ctx)
		wg.Wait()
	}()
	return func() {
		cancel()
		<-done
	}
}

// warmWorkers bounds the goroutines that serve short requests with grown
// stacks (apiserver.WarmWorkers); requests past it run as before.
const warmWorkers = 256

// The values of --http2-server.
const (
	HTTP2Nodeplane = "nodeplane"
	HTTP2Go        = "go"
	// DefaultHTTP2MaxStreams is --http2-max-streams-per-connection's default.
	DefaultHTTP2MaxStreams = 1000
	// maxHTTP2MaxStreams bounds it: each running stream may hold a handler.
	maxHTTP2MaxStreams = 10000
)

// buildHandler is the whole HTTP surface: health and version open to all,
// joining checked by the join server itself, everything else authenticated
// and authorized, the API behind the in-flight limit. serve puts short
// requests on warm workers.
func (s *server) buildHandler() (http.Handler, error) {
	authenticator := authn.Union{authn.NewClientCert(s.clock), s.joinServer.NodeTokens()}
	if s.opts.TokenFile != "" {
		tokens, err := authn.LoadTokenFile(s.opts.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-auth-file: %w", err)
		}
		authenticator = append(authenticator, tokens)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", s.health)
	mux.HandleFunc("/livez", s.health)
	mux.HandleFunc("/readyz", s.health)
	mux.HandleFunc("/version", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(version.Info())
	})
	// Joining happens before a node has credentials: the join server
	// checks the join secret (or, to renew, the node's certificate) itself.
	mux.Handle(join.PathPrefix, withDeadline(s.joinServer, s.opts.RequestTimeout))
	protected := http.NewServeMux()
	protected.Handle(nodelifecycle.ViewPath, zonesHandler(&s.nlc, &s.cnlc))
	protected.Handle(zoneview.APIPrefix, s.zoneView.API())
	protected.Handle(joinstate.Path, s.joinTokens)
	protected.Handle(joinstate.Path+"/", s.joinTokens)
	protected.Handle("/metrics", promhttp.HandlerFor(prometheus.Gatherers{s.reg, prometheus.DefaultGatherer}, promhttp.HandlerOpts{}))
	protected.Handle("/openapi/", s.docs.Handler())
	protected.Handle("/swagger-2.0.0.pb-v1", s.docs.Handler())
	limited, err := apiserver.LimitInFlight(s.api, s.inFlightConfig())
	if err != nil {
		return nil, err
	}
	protected.Handle("/", limited)
	authed := authn.Middleware(authenticator,
		s.authorizer.Impersonation(s.api.Objects(), s.authorizer.NonResourceWith(s.api.Objects(), protected)), authn.Unauthorized)
	mux.Handle("/", authed)
	// The zone view's page (no cluster data) is open to all, so that a
	// browser can load its sign-in form; its data, under /ui/api/, is
	// authenticated and authorized like every other non-resource path.
	mux.Handle(zoneview.Prefix, zoneview.Assets())
	mux.Handle(zoneview.APIPrefix, authed)
	return mux, nil
}

// health serves /healthz, /livez and /readyz: /readyz also needs the
// system namespaces and the watch caches, and fails while shutting down;
// all but /livez check that every store answers.
func (s *server) health(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/readyz" {
		if !s.started.Load() {
			http.Error(w, "starting: system namespaces not created yet", http.StatusServiceUnavailable)
			return
		}
		if s.shuttingDown.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		if err := s.api.Ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	if r.URL.Path != "/livez" {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		for _, st := range s.allStores {
			if _, err := st.CurrentRevision(ctx); err != nil {
				http.Error(w, "storage: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
	}
	_, _ = w.Write([]byte("ok"))
}

// listen opens --listen and returns the URL clients reach it at.
func listen(addr string) (net.Listener, string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("--listen %s: %w", addr, err)
	}
	return ln, pki.ClientURL(ln.Addr()), nil
}

// buildControllerSet builds the controllers with their own client to the
// server at url (served in process by handler), and hands that client to
// the join server's takeover check.
func (s *server) buildControllerSet(url string, handler http.Handler) (controllerSet, error) {
	client, md, err := controllerClient(s.cluster, url, handler, s.log)
	if err != nil {
		return controllerSet{}, err
	}
	controllers, lifecycle, err := buildControllers(controllerDeps{opts: s.opts.Controllers, client: client, metadata: md, clock: s.clock, logger: s.log, registry: s.reg, summaries: s.zoneView, cloud: s.cloud})
	if err != nil {
		return controllerSet{}, err
	}
	s.nlc.Store(lifecycle.nlc)
	s.cnlc.Store(lifecycle.cnlc)
	s.joinNodes.SetClient(client)
	return controllerSet{client: client, controllers: controllers}, nil
}

// controllerSet is the controllers and the client they share.
type controllerSet struct {
	client      kubernetes.Interface
	controllers []manager.Controller
}

func (s *server) kubeconfigPath() string { return filepath.Join(s.opts.DataDir, AdminKubeconfigFile) }

// writeAdminKubeconfig writes the admin's kubeconfig for the server at url.
func (s *server) writeAdminKubeconfig(url string) error {
	certPEM, keyPEM := s.cluster.AdminCredentials()
	path := s.kubeconfigPath()
	if err := pki.WriteKubeconfig(path, url, s.cluster.CAPEM(), certPEM, keyPEM, pki.DefaultContextName); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// httpServer is what stops serving: an *http.Server, or one whose HTTP/2
// connections internal/h2server accepts (h2server.Serving).
type httpServer interface {
	Shutdown(ctx context.Context) error
	Close() error
}

// inFlightConfig is the API's in-flight limit: the one LimitInFlight
// enforces and whose request deadline the HTTP/2 server gives a stream.
func (s *server) inFlightConfig() apiserver.InFlightConfig {
	return apiserver.InFlightConfig{
		Seats:          s.opts.MaxRequestsInflight + s.opts.MaxMutatingRequestsInflight,
		RequestTimeout: s.opts.RequestTimeout,
		Registerer:     s.reg,
	}
}

// serve serves handler over TLS on ln, short requests on warm workers;
// the channel receives the error that ends serving.
func (s *server) serve(ln net.Listener, handler http.Handler) (httpServer, <-chan error) {
	workers := apiserver.NewWarmWorkers(warmWorkers)
	srv := &http.Server{
		Handler:   workers.Handler(handler),
		TLSConfig: s.cluster.ServingTLSConfig(),
		// Headers must arrive within 30 s (the TLS handshake too); bodies
		// are bounded per request by --request-timeout (LimitInFlight). An
		// idle keep-alive connection is closed after 90 s.
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       90 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	if s.opts.HTTP2Server == HTTP2Nodeplane {
		// Its handler goroutines start on the warm workers directly; it
		// runs the TLS handshakes and hands net/http the HTTP/1.1
		// connections.
		return h2server.New(h2server.Config{
			MaxConcurrentStreams: uint32(s.opts.HTTP2MaxStreamsPerConnection),
			PrefaceTimeout:       srv.ReadHeaderTimeout,
			IdleTimeout:          srv.IdleTimeout,
			// The API's requests get LimitInFlight's deadline as their
			// stream starts: it then derives no context of its own.
			Deadline: s.inFlightConfig().Deadline,
			Go:       workers.GoServe,
			Logger:   s.log.With("component", "http2"),
		}).Serve(srv, ln, handler)
	}
	srv.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: s.opts.HTTP2MaxStreamsPerConnection}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.ServeTLS(ln, "", "") }()
	return srv, serveErr
}

// startControllers runs the controller manager until ctx ends or stop is
// called. done is closed when it has ended (by itself or stopped); stop
// cancels it, waits for it and returns its result, and may be called more
// than once.
func (s *server) startControllers(ctx context.Context, set controllerSet) (done <-chan struct{}, stop func() error) {
	ctx, cancel := context.WithCancel(ctx)
	finished := make(chan struct{})
	var err error
	go func() {
		defer close(finished)
		id, release := leaderIdentity(s.opts.DataDir, s.log)
		defer release()
		err = runControllers(ctx, s.opts.Controllers, set.client, set.controllers, id, s.clock, s.log)
	}()
	return finished, func() error {
		cancel()
		<-finished
		return err
	}
}

// wait blocks until ctx ends (nil), serving fails, or the controllers end
// by themselves (an error unless they ended cleanly).
func (s *server) wait(ctx context.Context, serveErr <-chan error, ctrlDone <-chan struct{}, stopControllers func() error) error {
	select {
	case <-ctx.Done():
		s.log.Info("stopping")
		return nil
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctrlDone:
		if err := stopControllers(); err != nil {
			return fmt.Errorf("controllers: %w", err)
		}
		return nil
	}
}

// shutdown ends watches, then lets in-flight requests finish, all within
// timeout; past it, every connection is closed.
func shutdown(srv httpServer, api *apiserver.Server, timeout time.Duration, log *slog.Logger) {
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

// scrapeRate is scraper.Config.Rate for --metric-scrapes-per-second, whose
// 0 means no bound.
func scrapeRate(perSecond float64) float64 {
	if perSecond == 0 {
		return -1
	}
	return perSecond
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
