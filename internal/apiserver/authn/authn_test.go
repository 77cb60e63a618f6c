package authn_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
	"github.com/nodeplane/nodeplane/internal/pki"
)

const unauthorizedJSON = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`

// whoami answers with the authenticated user as JSON, and the Authorization
// header it still sees.
var whoami = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	u, ok := authn.UserFrom(r.Context())
	if !ok {
		http.Error(w, "no user on context", http.StatusInternalServerError)
		return
	}
	w.Header().Set("X-Seen-Authorization", r.Header.Get("Authorization"))
	_ = json.NewEncoder(w).Encode(u)
})

// testServer starts an HTTPS server with the cluster's serving TLS config,
// wrapping the listener itself so that connections by IP address (no SNI)
// get the cluster's serving certificate, as with http.Server.ServeTLS.
func testServer(t *testing.T, c *pki.Cluster, a authn.Authenticator) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(authn.Middleware(a, whoami, nil))
	srv.Listener = tls.NewListener(srv.Listener, c.ServingTLSConfig())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // expected handshake failures
	srv.Start()
	t.Cleanup(srv.Close)
	return pki.ClientURL(srv.Listener.Addr())
}

func newCluster(t *testing.T) *pki.Cluster {
	t.Helper()
	c, err := pki.EnsureCluster(pki.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func keyPair(t *testing.T, certPEM, keyPEM []byte) []tls.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return []tls.Certificate{pair}
}

func TestMiddlewareOverHTTPS(t *testing.T) {
	cluster := newCluster(t)
	foreign := newCluster(t)
	tokens, err := authn.NewStaticTokens(map[string]authn.User{
		"admin-token": {Name: "token-admin", UID: "u-1", Groups: []string{"system:masters"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	url := testServer(t, cluster, authn.Union{authn.ClientCert{}, tokens})

	adminCert, adminKey := cluster.AdminCredentials()
	nodeCert, nodeKey, err := cluster.IssueClientCert("system:node:n1", []string{"system:nodes"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	foreignCert, foreignKey := foreign.AdminCredentials()

	tests := []struct {
		name          string
		certs         []tls.Certificate
		authorization string
		// wantUser is the expected user; nil means a 401 Status (or, for
		// wantHandshakeErr, a failed handshake).
		wantUser         *authn.User
		wantHandshakeErr bool
	}{
		{
			name:     "the admin certificate authenticates as nodeplane-admin in system:masters",
			certs:    keyPair(t, adminCert, adminKey),
			wantUser: &authn.User{Name: "nodeplane-admin", Groups: []string{"system:masters", "system:authenticated"}},
		},
		{
			name:     "an issued node certificate authenticates as the node",
			certs:    keyPair(t, nodeCert, nodeKey),
			wantUser: &authn.User{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}},
		},
		{
			name:             "a certificate from another CA fails the handshake",
			certs:            keyPair(t, foreignCert, foreignKey),
			wantHandshakeErr: true,
		},
		{
			name: "no certificate and no token is unauthorized",
		},
		{
			name:          "a valid bearer token authenticates as its user",
			authorization: "Bearer admin-token",
			wantUser:      &authn.User{Name: "token-admin", UID: "u-1", Groups: []string{"system:masters", "system:authenticated"}},
		},
		{
			name:          "the bearer scheme is case-insensitive",
			authorization: "bearer admin-token",
			wantUser:      &authn.User{Name: "token-admin", UID: "u-1", Groups: []string{"system:masters", "system:authenticated"}},
		},
		{
			name:          "a wrong bearer token is unauthorized",
			authorization: "Bearer admin-tokeN",
		},
		{
			name:          "a bearer token with trailing garbage is unauthorized",
			authorization: "Bearer admin-token extra",
		},
		{
			name:          "an empty bearer token is unauthorized",
			authorization: "Bearer ",
		},
		{
			name:          "basic authentication is unauthorized",
			authorization: "Basic YWRtaW46YWRtaW4=",
		},
		{
			name:          "a valid certificate wins over a wrong token",
			certs:         keyPair(t, adminCert, adminKey),
			authorization: "Bearer wrong",
			wantUser:      &authn.User{Name: "nodeplane-admin", Groups: []string{"system:masters", "system:authenticated"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
				RootCAs:      cluster.CertPool(),
				Certificates: tt.certs,
			}}}
			defer client.CloseIdleConnections()
			req, err := http.NewRequest(http.MethodGet, url+"/api/v1/nodes", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.authorization != "" {
				req.Header.Set("Authorization", tt.authorization)
			}
			resp, err := client.Do(req)
			if tt.wantHandshakeErr {
				t.Logf("request error: %v", err)
				if err == nil {
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusUnauthorized {
						t.Fatalf("got %d %s, want a failed handshake or 401", resp.StatusCode, body)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("request: %v", err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}

			if tt.wantUser == nil {
				if resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("status = %d (%s), want 401", resp.StatusCode, body)
				}
				if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type = %q, want application/json", ct)
				}
				if got := strings.TrimSpace(string(body)); got != unauthorizedJSON {
					t.Errorf("body = %s, want %s", got, unauthorizedJSON)
				}
				return
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status = %d (%s), want 200", resp.StatusCode, body)
			}
			var got authn.User
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("decode %s: %v", body, err)
			}
			if got.Name != tt.wantUser.Name || got.UID != tt.wantUser.UID || !slices.Equal(got.Groups, tt.wantUser.Groups) {
				t.Errorf("user = %+v, want %+v", got, *tt.wantUser)
			}
			if seen := resp.Header.Get("X-Seen-Authorization"); seen != "" {
				t.Errorf("handler saw Authorization %q, want it removed after authentication", seen)
			}
		})
	}
}

func TestAdminKubeconfigWorksWithClientGo(t *testing.T) {
	cluster := newCluster(t)
	url := testServer(t, cluster, authn.ClientCert{})
	certPEM, keyPEM := cluster.AdminCredentials()
	path := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := pki.WriteKubeconfig(path, url, cluster.CAPEM(), certPEM, keyPEM, ""); err != nil {
		t.Fatal(err)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("BuildConfigFromFlags: %v", err)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatalf("HTTPClientFor: %v", err)
	}
	resp, err := httpClient.Get(cfg.Host + "/api")
	if err != nil {
		t.Fatalf("GET /api with the admin kubeconfig: %v", err)
	}
	defer resp.Body.Close()
	var u authn.User
	if err := json.NewDecoder(resp.Body).Decode(&u); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || u.Name != pki.AdminUser || !u.InGroup(authn.GroupMasters) {
		t.Errorf("got %d %+v, want 200 as %s in %s", resp.StatusCode, u, pki.AdminUser, authn.GroupMasters)
	}
}

func TestMiddlewarePassesTheRejectionToTheCallback(t *testing.T) {
	tokens, err := authn.NewStaticTokens(map[string]authn.User{"t": {Name: "u"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name          string
		authorization string
		wantErr       error
	}{
		{name: "an anonymous request carries no error", authorization: ""},
		{name: "a wrong token carries ErrInvalidToken", authorization: "Bearer nope", wantErr: authn.ErrInvalidToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotErr error
			called := false
			h := authn.Middleware(tokens, whoami, func(w http.ResponseWriter, r *http.Request) {
				called = true
				gotErr = authn.ErrorFrom(r.Context())
				w.WriteHeader(http.StatusTeapot)
			})
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			if tt.authorization != "" {
				req.Header.Set("Authorization", tt.authorization)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if !called || rec.Code != http.StatusTeapot {
				t.Fatalf("callback called = %v, status %d; want the callback to answer", called, rec.Code)
			}
			if !errors.Is(gotErr, tt.wantErr) || (tt.wantErr == nil && gotErr != nil) {
				t.Errorf("ErrorFrom = %v, want %v", gotErr, tt.wantErr)
			}
		})
	}
}

type fixed struct {
	user *authn.User
	err  error
}

func (f fixed) Authenticate(*http.Request) (*authn.User, bool, error) {
	return f.user, f.user != nil, f.err
}

func TestUnion(t *testing.T) {
	errA, errB := errors.New("a rejected"), errors.New("b rejected")
	alice := &authn.User{Name: "alice"}
	tests := []struct {
		name     string
		union    authn.Union
		wantUser *authn.User
		wantErrs []error
	}{
		{name: "an empty union authenticates nobody", union: nil},
		{name: "the first user found wins", union: authn.Union{fixed{}, fixed{user: alice}, fixed{user: &authn.User{Name: "bob"}}}, wantUser: alice},
		{name: "an error does not stop later authenticators", union: authn.Union{fixed{err: errA}, fixed{user: alice}}, wantUser: alice},
		{name: "all errors are reported when nobody is found", union: authn.Union{fixed{err: errA}, fixed{}, fixed{err: errB}}, wantErrs: []error{errA, errB}},
		{name: "an anonymous request is not an error", union: authn.Union{fixed{}, fixed{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, ok, err := tt.union.Authenticate(httptest.NewRequest(http.MethodGet, "/", nil))
			if u != tt.wantUser || ok != (tt.wantUser != nil) {
				t.Errorf("Authenticate = %v, %v; want %v", u, ok, tt.wantUser)
			}
			if len(tt.wantErrs) == 0 && err != nil {
				t.Errorf("err = %v, want nil", err)
			}
			for _, want := range tt.wantErrs {
				if !errors.Is(err, want) {
					t.Errorf("err = %v, want it to include %v", err, want)
				}
			}
		})
	}
}

func TestClientCertTrustsOnlyVerifiedChains(t *testing.T) {
	cluster := newCluster(t)
	certPEM, keyPEM := cluster.AdminCredentials()
	leaf := keyPair(t, certPEM, keyPEM)[0].Leaf
	tests := []struct {
		name    string
		state   *tls.ConnectionState
		wantOK  bool
		wantErr bool
	}{
		{name: "a plain HTTP request is anonymous", state: nil},
		{name: "a TLS request without a certificate is anonymous", state: &tls.ConnectionState{}},
		{name: "an unverified certificate is rejected", state: &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}, wantErr: true},
		{name: "a verified certificate authenticates", state: &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf}}}, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.TLS = tt.state
			u, ok, err := authn.ClientCert{}.Authenticate(req)
			if ok != tt.wantOK || (err != nil) != tt.wantErr {
				t.Fatalf("Authenticate = %v, %v, %v; want ok=%v err=%v", u, ok, err, tt.wantOK, tt.wantErr)
			}
			if ok && fmt.Sprint(u.Groups) != "[system:masters system:authenticated]" {
				t.Errorf("groups = %v", u.Groups)
			}
		})
	}
}
