package apiserver

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/apiserver/admission"
	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
	"github.com/nodeplane/nodeplane/internal/apiserver/authz"
	"github.com/nodeplane/nodeplane/internal/apiserver/scheme"
	"github.com/nodeplane/nodeplane/internal/storage"
	"github.com/nodeplane/nodeplane/internal/storage/memstore"
)

// BenchmarkLeaseRenewal measures one node heartbeat through the server's
// handler chain, in process, without TLS or HTTP/2: a node identity (a
// verified client certificate system:node:<n>, as agents present) PUTs
// its Lease in kube-node-lease as protobuf, built from the object the
// previous renewal returned, accepting protobuf or JSON as agents do. The
// chain is the one serverapp builds: OnWarmWorkers (the hand-off to a
// worker goroutine) → authn.Middleware(ClientCert) → the
// Node,RBAC authorizer's non-resource check → LimitInFlight (flow control seat, request deadline) → Server
// (authorization, decode, admission plugins, validation, protobuf encode,
// etcd compare-and-swap, response encode) over an etcd member without
// WAL fsync, like the lease member the server used before the in-memory
// lease store, or over that store (see the sub-benchmarks below).
//
// One op is one renewal and includes the watch cache taking in its event
// (the loop waits until the cache holds the new revision before the next
// renewal, as it always does with 10 s between renewals), so the
// allocations of etcd's apply and watch path and of the cache's decode are
// counted. Building the request body and decoding the answer (the
// client's work) run with the timer stopped. Run with:
//
//	go test ./internal/apiserver/ -run '^$' -bench BenchmarkLeaseRenewal -benchmem -count 5
//
// store=etcd-nofsync is the etcd member without fsync (the lease store
// before the in-memory one); store=memstore is storage/memstore, where
// leases live by default with the embedded etcd.
func BenchmarkLeaseRenewal(b *testing.B) {
	b.Run("store=etcd-nofsync", func(b *testing.B) { benchLeaseRenewal(b, startStorage(b, true)) })
	b.Run("store=memstore", func(b *testing.B) { benchLeaseRenewal(b, newMemStorage(b)) })
}

// newMemStorage opens an in-memory store (storage/memstore) that closes
// with the test.
func newMemStorage(t testing.TB) *memstore.Store {
	t.Helper()
	cfg := memstore.DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.Logger = quietLogger()
	st, err := memstore.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func benchLeaseRenewal(b *testing.B, st storage.Interface) {
	s, _ := newTestServer(b, Config{
		Storage: st,
		Admission: []admission.Plugin{
			admission.DefaultTolerationSeconds{NotReadySeconds: 300, UnreachableSeconds: 300},
			admission.NodeRestriction{},
			admission.TaintNodesByCondition{},
		},
		Authorizer: authz.New(authz.Config{}),
		Metrics:    NewMetrics(prometheus.NewRegistry()),
	})
	protected := http.NewServeMux()
	limited, err := LimitInFlight(s, InFlightConfig{Seats: 600, RequestTimeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	protected.Handle("/", limited)
	handler := OnWarmWorkers(authn.Middleware(authn.NewClientCert(nil), authz.New(authz.Config{}).NonResourceWith(s.Objects(), protected), authn.Unauthorized), 256)

	const node = "bench-node"
	const path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/" + node
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{authn.GroupNodes}}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	connState := &tls.ConnectionState{
		HandshakeComplete: true, Version: tls.VersionTLS13,
		PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert}},
	}
	info := serializerFor(mediaProtobuf)
	gv := coordinationv1.SchemeGroupVersion
	enc := scheme.Codecs.EncoderForVersion(info.Serializer, gv)
	dec := scheme.Codecs.DecoderToVersion(info.Serializer, gv)
	cache := s.resources[gv.WithResource("leases")].st

	send := func(method, path string, lease *coordinationv1.Lease) (*benchWriter, *http.Request) {
		var body bytes.Buffer
		if err := enc.Encode(lease, &body); err != nil {
			b.Fatal(err)
		}
		req := httptest.NewRequest(method, path, &body)
		req.TLS = connState
		req.Header.Set("Content-Type", mediaProtobuf)
		req.Header.Set("Accept", mediaProtobuf+",application/json") // as agents send
		return &benchWriter{header: http.Header{}, body: make([]byte, 0, 1024)}, req
	}
	decode := func(rec *benchWriter, want int) *coordinationv1.Lease {
		if rec.code != want {
			b.Fatalf("got %d %q, want %d", rec.code, rec.body, want)
		}
		out := &coordinationv1.Lease{}
		if _, _, err := dec.Decode(rec.body, nil, out); err != nil {
			b.Fatal(err)
		}
		return out
	}
	// waitCached spins (without allocating) until the watch cache has
	// taken in revision rv; bounded, the cache gets each event within
	// milliseconds.
	waitCached := func(rv string) {
		want, err := strconv.ParseInt(rv, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for cache.CacheRV() < want {
			if time.Now().After(deadline) {
				b.Fatalf("the watch cache did not reach resourceVersion %s", rv)
			}
			runtime.Gosched()
		}
	}

	holder, duration := node, int32(40)
	rec, req := send(http.MethodPost, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: "kube-node-lease"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: &holder, LeaseDurationSeconds: &duration,
			RenewTime: &metav1.MicroTime{Time: time.Now()},
		},
	})
	handler.ServeHTTP(rec, req)
	lease := decode(rec, http.StatusCreated)
	waitCached(lease.ResourceVersion)

	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		rec, req := send(http.MethodPut, path, lease)
		b.StartTimer()
		handler.ServeHTTP(rec, req)
		b.StopTimer()
		lease = decode(rec, http.StatusOK)
		b.StartTimer()
		waitCached(lease.ResourceVersion)
	}
}

// benchWriter is a lean http.ResponseWriter, like the HTTP/2 server's
// (which reuses its buffers): unlike httptest.ResponseRecorder it does not
// snapshot the header on WriteHeader, and it supports the read and write
// deadlines LimitInFlight sets (as a no-op), so that the benchmark counts
// the handlers' allocations and not the recorder's.
type benchWriter struct {
	header http.Header
	code   int
	body   []byte
}

func (w *benchWriter) Header() http.Header { return w.header }

func (w *benchWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *benchWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.body = append(w.body, p...)
	return len(p), nil
}

func (w *benchWriter) Flush() {}

func (w *benchWriter) SetReadDeadline(time.Time) error { return nil }

func (w *benchWriter) SetWriteDeadline(time.Time) error { return nil }
