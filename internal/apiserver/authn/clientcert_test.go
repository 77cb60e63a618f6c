package authn

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

var certEpoch = time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)

func nodeCert(name string) *x509.Certificate {
	return &x509.Certificate{
		Subject:   pkix.Name{CommonName: "system:node:" + name, Organization: []string{GroupNodes}},
		NotBefore: certEpoch, NotAfter: certEpoch.Add(24 * time.Hour),
	}
}

func requestWith(chain ...*x509.Certificate) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.TLS = &tls.ConnectionState{PeerCertificates: chain[:1], VerifiedChains: [][]*x509.Certificate{chain}}
	return r
}

func TestClientCertChecksValidityOnEveryRequest(t *testing.T) {
	ca := &x509.Certificate{Subject: pkix.Name{CommonName: "ca"}, NotBefore: certEpoch, NotAfter: certEpoch.Add(12 * time.Hour)}
	tests := []struct {
		name   string
		now    time.Time
		wantOK bool
	}{
		{"a certificate inside its validity period authenticates", certEpoch.Add(time.Hour), true},
		{"a certificate before its notBefore is refused", certEpoch.Add(-time.Second), false},
		{"a certificate past its notAfter is refused", certEpoch.Add(25 * time.Hour), false},
		{"a chain whose CA has expired is refused", certEpoch.Add(13 * time.Hour), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, cc := range []ClientCert{{}, NewClientCert(nil)} {
				cc.Clock = clocktesting.NewFakePassiveClock(tt.now)
				u, ok, err := cc.Authenticate(requestWith(nodeCert("a"), ca))
				if ok != tt.wantOK || (err != nil) == tt.wantOK {
					t.Fatalf("cached=%v: Authenticate = %v, %v, %v; want ok=%v", cc.users != nil, u, ok, err, tt.wantOK)
				}
			}
		})
	}
}

func TestClientCertExpiryOnAnOpenConnectionIsRefused(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(certEpoch.Add(time.Hour))
	cc := NewClientCert(clk)
	handler := Middleware(cc, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }), nil)
	r := requestWith(nodeCert("a")) // one connection: the same certificate on every request
	for _, step := range []struct {
		now  time.Time
		want int
	}{
		{certEpoch.Add(time.Hour), http.StatusOK},
		{certEpoch.Add(23 * time.Hour), http.StatusOK},
		{certEpoch.Add(24*time.Hour + time.Second), http.StatusUnauthorized},
	} {
		clk.SetTime(step.now)
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, r)
		if w.Code != step.want {
			t.Fatalf("at %s: status %d, want %d", step.now, w.Code, step.want)
		}
	}
}

func TestClientCertSharesOneUserPerCertificate(t *testing.T) {
	cc := NewClientCert(clocktesting.NewFakePassiveClock(certEpoch.Add(time.Hour)))
	a, b := nodeCert("a"), nodeCert("b")
	ua1, _, _ := cc.Authenticate(requestWith(a))
	ua2, _, _ := cc.Authenticate(requestWith(a))
	ub, _, _ := cc.Authenticate(requestWith(b))
	if ua1 != ua2 {
		t.Errorf("two requests with one certificate got two Users")
	}
	if ub == ua1 || ub.Name != "system:node:b" || ua1.Name != "system:node:a" {
		t.Errorf("users = %+v, %+v; want system:node:a and system:node:b", ua1, ub)
	}
	if got := ua1.Groups; len(got) != 2 || got[0] != GroupNodes || got[1] != GroupAuthenticated {
		t.Errorf("groups = %v, want [%s %s]", got, GroupNodes, GroupAuthenticated)
	}
}

func TestClientCertForgetsCertificatesNoLongerInMemory(t *testing.T) {
	cc := NewClientCert(clocktesting.NewFakePassiveClock(certEpoch.Add(time.Hour)))
	for i := range 100 {
		if _, ok, err := cc.Authenticate(requestWith(nodeCert(string(rune('a' + i%26))))); !ok || err != nil {
			t.Fatalf("Authenticate = %v, %v", ok, err)
		}
	}
	if n := cc.users.size(); n != 100 {
		t.Fatalf("%d certificates kept, want 100", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for cc.users.size() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d certificates still kept after they were freed", cc.users.size())
		}
		runtime.GC()
		runtime.Gosched()
	}
}
