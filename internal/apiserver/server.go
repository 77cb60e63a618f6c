// Package apiserver serves the Kubernetes REST API for the resources declared
// in package registry: request parsing, authorization of every request
// (through the Authorizer it is given; the rules live in package authz),
// content negotiation, the generic verb handlers (get, list, watch, create,
// update, patch, delete, deletecollection), subresources, admission on every
// write, discovery and errors as metav1.Status. pods/log is proxied to the
// node's agent over HTTPS.
//
// It reads and writes objects only through package store; it never talks
// to etcd directly. It does not authenticate: the caller wraps it with
// authn.Middleware.
package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/utils/clock"

	"github.com/nodeplane/nodeplane/internal/apiserver/admission"
	"github.com/nodeplane/nodeplane/internal/apiserver/authz"
	"github.com/nodeplane/nodeplane/internal/apiserver/registry"
	"github.com/nodeplane/nodeplane/internal/apiserver/scheme"
	"github.com/nodeplane/nodeplane/internal/apiserver/store"
	"github.com/nodeplane/nodeplane/internal/intern"
	"github.com/nodeplane/nodeplane/internal/storage"
)

// Config wires the API server.
type Config struct {
	Storage storage.Interface
	// StorageOverrides stores some resources elsewhere (e.g. leases in a
	// soft-state etcd member); others use Storage.
	StorageOverrides map[schema.GroupResource]storage.Interface
	Resources        []*registry.Resource
	// Admission plugins run, in order, on every write: create, update and
	// patch of main resources and of subresources (status, eviction,
	// binding), and delete.
	Admission []admission.Plugin
	// Authorizer decides every request the server handles (resource
	// requests and discovery). Nil allows every request: only for tests and
	// tools that run the server without authentication.
	Authorizer Authorizer
	// NodeClient returns the HTTP client pods/log uses to reach the agent
	// of node: it presents the server's kubelet-client certificate and
	// accepts only that node's serving certificate (see
	// pki.Cluster.NodeServingClientTLS). pods/log never follows a redirect,
	// whatever the client's policy. Nil makes pods/log answer 503.
	NodeClient func(node string) *http.Client
	// ResourceUsage serves metrics.k8s.io/v1beta1 (NodeMetrics,
	// PodMetrics; `kubectl top`). Nil: the group is not served.
	ResourceUsage ResourceUsage
	Version       version.Info
	Clock         clock.WithTicker
	Logger        *slog.Logger
	// Metrics records request metrics (nil: none).
	Metrics *Metrics
	// BookmarkInterval is how often a watch asking for bookmarks gets one (default 1m).
	BookmarkInterval time.Duration
	// MinWatchTimeout: watches without timeoutSeconds end after a random
	// duration in [MinWatchTimeout, 2·MinWatchTimeout) (default 30m).
	MinWatchTimeout time.Duration
	// WatchFlushDelay: a watch stream that has just been flushed waits this
	// long before the next flush, so a busy stream sends its events in
	// batches (one write instead of one per event); an event after a quiet
	// spell goes out at once. Default 5 ms; negative flushes every event.
	WatchFlushDelay time.Duration
	// HistorySize is the watch cache history per resource (default 10000).
	HistorySize int
}

// Authorizer decides whether the user on a request's context (see
// authn.UserFrom) may make the request; objs reads the stored objects a
// decision may depend on. It returns nil to allow, an API error (Forbidden)
// to refuse. *authz.Authorizer implements it.
type Authorizer interface {
	Authorize(ctx context.Context, objs authz.Objects, a authz.Attributes) error
}

// Server is the API handler.
type Server struct {
	cfg       Config
	resources map[schema.GroupVersionResource]*resourceHandler
	// reviews are the create-only access reviews (registry.Reviews),
	// answered by the server's authorizer, never stored.
	reviews map[schema.GroupVersionResource]*resourceHandler
	// usage are metrics.k8s.io's NodeMetrics and PodMetrics (usage.go),
	// present when Config.ResourceUsage is set.
	usage map[schema.GroupVersionResource]*resourceHandler
	// ordered group versions for discovery
	groups     []groupInfo
	namespaces *resourceHandler
	// stopCtx is canceled when the server stops: long-running requests end.
	stopCtx  context.Context
	stopping context.CancelFunc
	// watchMu orders watch registration against Stop (WaitGroup.Add must
	// not race Wait).
	watchMu sync.Mutex
	stopped bool
	watches sync.WaitGroup
	parked  map[*parkedWatch]struct{} // guarded by watchMu: woken by Stop
	stores  []*store.Store
}

type groupInfo struct {
	Group    string
	Versions []string
}

// resourceHandler serves one resource.
type resourceHandler struct {
	s  *Server
	r  *registry.Resource
	st *store.Store
	// fieldNames are the supported field-selector fields.
	fieldNames sets.Set[string]
}

// New builds the server and its stores. Call Run to start the watch caches.
func New(cfg Config) (*Server, error) {
	if cfg.Storage == nil {
		return nil, errors.New("apiserver: Storage is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.BookmarkInterval <= 0 {
		cfg.BookmarkInterval = time.Minute
	}
	if cfg.WatchFlushDelay == 0 {
		cfg.WatchFlushDelay = 5 * time.Millisecond
	}
	if cfg.MinWatchTimeout <= 0 {
		cfg.MinWatchTimeout = 30 * time.Minute
	}
	s := &Server{
		cfg:       cfg,
		resources: map[schema.GroupVersionResource]*resourceHandler{},
		reviews:   map[schema.GroupVersionResource]*resourceHandler{},
		usage:     map[schema.GroupVersionResource]*resourceHandler{},
	}
	s.stopCtx, s.stopping = context.WithCancel(context.Background())
	codec := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	// The watch caches keep one copy of the strings a fleet's Nodes repeat.
	shared := intern.NewTable(0)
	storesByPrefix := map[string]*store.Store{}
	groupVersions := map[string]sets.Set[string]{}
	var groupOrder []string
	for _, r := range cfg.Resources {
		base := r
		if r.Storage != nil {
			base = r.Storage
		}
		st, ok := storesByPrefix[base.Prefix()]
		if !ok {
			var err error
			backing := cfg.Storage
			if o, ok := cfg.StorageOverrides[base.GroupResource()]; ok {
				backing = o
			}
			st, err = store.New(store.Config{
				Storage:       backing,
				Prefix:        base.Prefix(),
				Resource:      base.GroupResource(),
				GVK:           base.GVK(),
				Namespaced:    base.Namespaced,
				NewFunc:       base.New,
				Codec:         codec,
				Fields:        base.AppendFields,
				IndexedFields: base.IndexedFields,
				Intern:        shared.Object,
				InternCached:  shared.Frozen,
				HandWrites:    base.RoundTrips,
				HistorySize:   cfg.HistorySize,
				Clock:         cfg.Clock,
				Logger:        cfg.Logger,
			})
			if err != nil {
				return nil, err
			}
			storesByPrefix[base.Prefix()] = st
			s.stores = append(s.stores, st)
		}
		h := &resourceHandler{s: s, r: r, st: st, fieldNames: sets.New[string]()}
		for f := range base.AllFields(base.New()) {
			h.fieldNames.Insert(f)
		}
		gvr := r.GroupVersion.WithResource(r.Resource)
		if _, dup := s.resources[gvr]; dup {
			return nil, fmt.Errorf("apiserver: resource %s registered twice", gvr)
		}
		s.resources[gvr] = h
		if r.GroupVersion.Group == "" && r.Resource == "namespaces" {
			s.namespaces = h
		}
		g := r.GroupVersion.Group
		if groupVersions[g] == nil {
			groupVersions[g] = sets.New[string]()
			groupOrder = append(groupOrder, g)
		}
		groupVersions[g].Insert(r.GroupVersion.Version)
	}
	for _, r := range registry.Reviews() {
		s.reviews[r.GroupVersion.WithResource(r.Resource)] = &resourceHandler{s: s, r: r, fieldNames: sets.New[string]()}
		g := r.GroupVersion.Group
		if groupVersions[g] == nil {
			groupVersions[g] = sets.New[string]()
			groupOrder = append(groupOrder, g)
		}
		groupVersions[g].Insert(r.GroupVersion.Version)
	}
	if cfg.ResourceUsage != nil {
		for _, r := range usageResources() {
			s.usage[r.GroupVersion.WithResource(r.Resource)] = &resourceHandler{s: s, r: r, fieldNames: sets.New[string]()}
			g := r.GroupVersion.Group
			if groupVersions[g] == nil {
				groupVersions[g] = sets.New[string]()
				groupOrder = append(groupOrder, g)
			}
			groupVersions[g].Insert(r.GroupVersion.Version)
		}
	}
	for _, g := range groupOrder {
		s.groups = append(s.groups, groupInfo{Group: g, Versions: sets.List(groupVersions[g])})
	}
	return s, nil
}

// Run starts the watch caches and blocks until ctx ends.
func (s *Server) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.runNamespaces(ctx)
	}()
	for _, st := range s.stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st.Run(ctx)
		}()
	}
	wg.Wait()
}

// Ready reports whether every watch cache has loaded.
func (s *Server) Ready() error {
	var notReady []string
	for _, st := range s.stores {
		if !st.Ready() {
			notReady = append(notReady, st.Resource().String())
		}
	}
	if len(notReady) > 0 {
		sort.Strings(notReady)
		return fmt.Errorf("watch caches loading: %s", strings.Join(notReady, ", "))
	}
	return nil
}

// Stop ends every open watch cleanly and waits for them to finish writing.
func (s *Server) Stop() {
	s.watchMu.Lock()
	if !s.stopped {
		s.stopped = true
		s.stopping()
		for p := range s.parked {
			p.wake()
		}
	}
	s.watchMu.Unlock()
	s.watches.Wait()
}

// addParked registers a parked watch for Stop to wake; one parked after
// Stop sees the server stopped on its first look.
func (s *Server) addParked(p *parkedWatch) {
	s.watchMu.Lock()
	if s.parked == nil {
		s.parked = map[*parkedWatch]struct{}{}
	}
	s.parked[p] = struct{}{}
	s.watchMu.Unlock()
}

func (s *Server) removeParked(p *parkedWatch) {
	s.watchMu.Lock()
	delete(s.parked, p)
	s.watchMu.Unlock()
}

// beginWatch registers a long-running watch; false once the server stops.
func (s *Server) beginWatch() bool {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if s.stopped {
		return false
	}
	s.watches.Add(1)
	return true
}

func (s *Server) isNamespaced(group, ver, resource string) bool {
	gvr := schema.GroupVersionResource{Group: group, Version: ver, Resource: resource}
	h, ok := s.resources[gvr]
	if !ok {
		h, ok = s.reviews[gvr]
	}
	if !ok {
		h, ok = s.usage[gvr]
	}
	return ok && h.r.Namespaced
}

// ServeHTTP serves resource requests (/api/v1/..., /apis/<g>/<v>/...) and
// discovery documents, each after authorization (see Config.Authorizer).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	info, ok := parseResourcePath(r, s.isNamespaced)
	if !ok {
		if err := s.authorize(r, authz.NonResourceAttributes(r)); err != nil {
			writeError(w, r, err, schema.GroupResource{}, "")
			return
		}
		if s.serveDiscovery(w, r) {
			return
		}
		writeStatus(w, r, notFoundPath())
		return
	}
	// Authorization comes before the resource lookup, as upstream: a
	// refused user learns nothing from 404s.
	if err := s.authorize(r, resourceAttributes(r, info)); err != nil {
		writeError(w, r, err, schema.GroupResource{Group: info.Group, Resource: info.Resource}, info.Name)
		return
	}
	gvr := schema.GroupVersionResource{Group: info.Group, Version: info.Version, Resource: info.Resource}
	if h, ok := s.reviews[gvr]; ok {
		h.review(w, r, info)
		return
	}
	if h, ok := s.usage[gvr]; ok {
		h.serveUsage(w, r, info)
		return
	}
	h, ok := s.resources[gvr]
	if !ok {
		writeStatus(w, r, notFoundPath())
		return
	}
	start := s.cfg.Clock.Now()
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
	h.serve(rec, r, info)
	// A parked watch (watchstream.go) is counted when it ends.
	if s.cfg.Metrics != nil && !rec.parked {
		s.cfg.Metrics.observe(info, h.r, rec.code, s.cfg.Clock.Since(start))
	}
}

// authorize asks the configured Authorizer (none allows everything).
func (s *Server) authorize(r *http.Request, a authz.Attributes) error {
	if s.cfg.Authorizer == nil {
		return nil
	}
	return s.cfg.Authorizer.Authorize(r.Context(), objectReader{s}, a)
}

func (h *resourceHandler) serve(w http.ResponseWriter, r *http.Request, info requestInfo) {
	gr := h.r.GroupResource()
	if h.r.Namespaced && info.Namespace == "" && info.Name != "" {
		writeStatus(w, r, statusOf(apierrors.NewNotFound(gr, info.Name)))
		return
	}
	if !h.r.Namespaced && info.Namespace != "" {
		writeStatus(w, r, statusOf(apierrors.NewNotFound(gr, info.Name)))
		return
	}
	if info.Subresource == "log" && h.r.GroupResource() == podsResource {
		if info.Verb != "get" {
			writeStatus(w, r, statusOf(apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "pods/log"}, info.Verb)))
			return
		}
		h.podLog(w, r, info)
		return
	}
	if info.Subresource != "" {
		sub, ok := h.r.Subresource(info.Subresource)
		if !ok {
			writeStatus(w, r, notFoundPath())
			return
		}
		if !contains(sub.Verbs, info.Verb) {
			writeStatus(w, r, statusOf(apierrors.NewMethodNotSupported(gr, info.Verb)))
			return
		}
		switch info.Subresource {
		case "binding":
			h.bind(w, r, info)
			return
		case "eviction":
			h.evict(w, r, info)
			return
		case "scale":
			h.scale(w, r, info)
			return
		}
		// status and other same-kind subresources use the generic verbs.
	}
	switch info.Verb {
	case "get":
		h.get(w, r, info)
	case "list":
		h.list(w, r, info)
	case "watch":
		h.watch(w, r, info)
	case "create":
		if info.Name != "" && info.Subresource == "" {
			writeStatus(w, r, statusOf(apierrors.NewMethodNotSupported(gr, "create")))
			return
		}
		h.create(w, r, info)
	case "update":
		if info.Name == "" {
			writeStatus(w, r, statusOf(apierrors.NewMethodNotSupported(gr, "update")))
			return
		}
		h.update(w, r, info)
	case "patch":
		if info.Name == "" {
			writeStatus(w, r, statusOf(apierrors.NewMethodNotSupported(gr, "patch")))
			return
		}
		h.patch(w, r, info)
	case "delete":
		if info.Subresource != "" {
			writeStatus(w, r, statusOf(apierrors.NewMethodNotSupported(gr, "delete")))
			return
		}
		h.delete(w, r, info)
	case "deletecollection":
		h.deleteCollection(w, r, info)
	default:
		writeStatus(w, r, statusOf(apierrors.NewMethodNotSupported(gr, info.Verb)))
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// statusRecorder remembers the response code for metrics.
type statusRecorder struct {
	http.ResponseWriter
	code        int
	wroteHeader bool
	parked      bool // a parked watch: it records its metrics when it ends
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wroteHeader {
		s.code, s.wroteHeader = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// notFoundPath is the 404 for a path that names no resource.
func notFoundPath() *metav1.Status {
	return &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound, Message: "the server could not find the requested resource"}
}
