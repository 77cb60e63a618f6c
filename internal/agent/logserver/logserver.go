// Package logserver serves container logs from the node agent to the API
// server, which proxies `kubectl logs` (pods/log) here: GET
// /containerLogs/<namespace>/<pod>/<container> with the kubelet's query
// parameters (follow, previous, timestamps, tailLines, limitBytes,
// sinceSeconds).
//
// It also serves the agent's own metrics at GET /metrics (Prometheus text
// format), as the kubelet does on the same port, and the resource usage of
// the node and its pods at GET /metrics/resource (package resourcemetrics).
//
// Callers authenticate with a client certificate issued by the cluster CA
// (a caller without one gets 401; a certificate from another CA fails the
// handshake). Logs are for the API server's kubelet-client identity
// (pki.KubeletClientUser, which may do nothing else) and administrators
// (group system:masters); metrics also for the controller identity
// (system:kube-controller-manager). Everyone else — a node's certificate
// included — gets 403. It presents the agent's serving certificate, issued
// by the cluster CA for this node (join.Identity.EnsureServing), which the
// API server checks names the node it meant to reach.
//
// It reads logs only through the runtime.Runtime interface.
package logserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/agent/runtime"
	"github.com/nodeplane/nodeplane/internal/pki"
)

// Config configures a Server.
type Config struct {
	// Listen is host:port (port 0 picks a free one).
	Listen  string
	Runtime runtime.Runtime
	// ClientCAs verifies callers (the cluster CA).
	ClientCAs *x509.CertPool
	// Certificate returns the serving certificate at each handshake (so a
	// renewed one is served without a restart). Required.
	Certificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// Metrics serves GET /metrics (nil: 404).
	Metrics http.Handler
	// ResourceMetrics serves GET /metrics/resource, the pods' and node's
	// CPU and memory (package resourcemetrics; nil: 404), to the same
	// callers as Metrics.
	ResourceMetrics http.Handler
	Clock           clock.PassiveClock
	Logger          *slog.Logger
}

// Server is the agent's HTTPS endpoint.
type Server struct {
	cfg Config
	ln  net.Listener
	srv *http.Server
}

// Listen opens the listener; Serve serves it.
func Listen(cfg Config) (*Server, error) {
	if cfg.Runtime == nil || cfg.ClientCAs == nil || cfg.Certificate == nil {
		return nil, errors.New("logserver: Runtime, ClientCAs and Certificate are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	s := &Server{cfg: cfg, ln: ln}
	mux := http.NewServeMux()
	mux.Handle("GET /containerLogs/{namespace}/{pod}/{container}", s.authorize("read logs", mayReadLogs, http.HandlerFunc(s.logs)))
	mux.Handle("GET /healthz", s.authorize("read logs", mayReadLogs, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })))
	if cfg.Metrics != nil {
		mux.Handle("GET /metrics", s.authorize("read metrics", mayReadMetrics, cfg.Metrics))
	}
	if cfg.ResourceMetrics != nil {
		mux.Handle("GET /metrics/resource", s.authorize("read metrics", mayReadMetrics, cfg.ResourceMetrics))
	}
	s.srv = &http.Server{
		Handler: authenticate(mux),
		TLSConfig: &tls.Config{
			GetCertificate: cfg.Certificate,
			// Verified when given, so a caller without one gets 401.
			ClientAuth: tls.VerifyClientCertIfGiven,
			ClientCAs:  cfg.ClientCAs,
			MinVersion: tls.VersionTLS12,
		},
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
	}
	return s, nil
}

// Port is the port listened on.
func (s *Server) Port() int32 { return int32(s.ln.Addr().(*net.TCPAddr).Port) }

// Serve serves until ctx ends.
func (s *Server) Serve(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = s.srv.Shutdown(sctx)
	}()
	err := s.srv.ServeTLS(s.ln, "", "")
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// authenticate answers 401 to a caller without a verified client
// certificate from the cluster CA.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			w.Header().Set("WWW-Authenticate", `Certificate realm="nodeplane agent"`)
			http.Error(w, "Unauthorized: a client certificate from the cluster CA is required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authorize admits the callers allowed by may (an authenticated request)
// and answers 403 to every other.
func (s *Server) authorize(what string, may func(pkix.Name) bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		subject := r.TLS.VerifiedChains[0][0].Subject
		if !may(subject) {
			s.cfg.Logger.Info("request refused", "user", subject.CommonName, "path", r.URL.Path, "remote", r.RemoteAddr)
			http.Error(w, fmt.Sprintf("forbidden: user %q may not %s here", subject.CommonName, what), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// mayReadLogs: the API server's kubelet-client identity, or a member of
// system:masters.
func mayReadLogs(subject pkix.Name) bool {
	return subject.CommonName == pki.KubeletClientUser || slices.Contains(subject.Organization, pki.AdminGroup)
}

// ControllerUser is the controllers' identity (the server's
// system:kube-controller-manager client certificate), which may scrape
// metrics.
const ControllerUser = "system:kube-controller-manager"

// mayReadMetrics: whoever may read logs, and the controllers.
func mayReadMetrics(subject pkix.Name) bool {
	return mayReadLogs(subject) || subject.CommonName == ControllerUser
}

func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	ns, name, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	opts, err := parseOptions(r, s.cfg.Clock.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var found *runtime.PodStatus
	for _, p := range s.cfg.Runtime.Pods() {
		if p.Namespace == ns && p.Name == name && (found == nil || !p.Killed) {
			found = &p
		}
	}
	if found == nil {
		http.Error(w, fmt.Sprintf("pod %s/%s is not running on this node", ns, name), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fw := &flushWriter{w: w}
	if f, ok := w.(http.Flusher); ok {
		fw.f = f
	}
	if err := s.cfg.Runtime.Logs(r.Context(), found.UID, container, opts, fw); err != nil && !fw.wrote {
		http.Error(w, err.Error(), http.StatusNotFound)
	}
}

func parseOptions(r *http.Request, now time.Time) (runtime.LogOptions, error) {
	q := r.URL.Query()
	opts := runtime.LogOptions{TailLines: -1}
	var err error
	boolean := func(name string) bool {
		v := q.Get(name)
		if v == "" || err != nil {
			return false
		}
		b, perr := strconv.ParseBool(v)
		if perr != nil {
			err = fmt.Errorf("%s: %q is not a boolean", name, v)
		}
		return b
	}
	number := func(name string) int64 {
		v := q.Get(name)
		if v == "" || err != nil {
			return -1
		}
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil || n < 0 {
			err = fmt.Errorf("%s: %q is not a non-negative integer", name, v)
		}
		return n
	}
	opts.Follow = boolean("follow")
	opts.Previous = boolean("previous")
	opts.Timestamps = boolean("timestamps")
	opts.TailLines = number("tailLines")
	if n := number("limitBytes"); n > 0 {
		opts.LimitBytes = n
	}
	if n := number("sinceSeconds"); n > 0 {
		opts.Since = now.Add(-time.Duration(n) * time.Second)
	}
	if t := q.Get("sinceTime"); t != "" && err == nil {
		ts, perr := time.Parse(time.RFC3339, t)
		if perr != nil {
			err = fmt.Errorf("sinceTime: %q is not RFC3339", t)
		}
		opts.Since = ts
	}
	return opts, err
}

type flushWriter struct {
	w     http.ResponseWriter
	f     http.Flusher
	wrote bool
}

func (f *flushWriter) Write(p []byte) (int, error) {
	f.wrote = true
	n, err := f.w.Write(p)
	if f.f != nil {
		f.f.Flush()
	}
	return n, err
}
