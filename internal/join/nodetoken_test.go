package join_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
	"github.com/nodeplane/nodeplane/internal/join"
)

func TestRequestTokenAuthenticatesAsTheNode(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	cfg := f.clientConfig(t, "sim-node-7")
	token, caPEM, err := join.RequestToken(context.Background(), cfg)
	if err != nil {
		t.Fatalf("RequestToken: %v", err)
	}
	if string(caPEM) != string(f.cluster.CAPEM()) {
		t.Error("RequestToken did not return the cluster CA")
	}
	if !strings.HasPrefix(token, "npn1.") || strings.Contains(token, secret) {
		t.Errorf("token %q is not of the npn1 format, or carries the join secret", token)
	}
	if exp, err := join.TokenExpiry(token); err != nil || !exp.Equal(start.Add(join.DefaultNodeTokenTTL)) {
		t.Errorf("TokenExpiry = %s, %v; want %s", exp, err, start.Add(join.DefaultNodeTokenTTL))
	}
	if entries := entries(t, cfg.DataDir); len(entries) != 0 {
		t.Errorf("RequestToken wrote %v, want nothing", entries)
	}

	req, err := http.NewRequest(http.MethodGet, f.url+"/whoami", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := f.httpClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /whoami with the node token: %d", resp.StatusCode)
	}
	var a whoamiAnswer
	if err := jsonDecode(resp.Body, &a); err != nil {
		t.Fatal(err)
	}
	if a.User.Name != "system:node:sim-node-7" || !slices.Equal(a.User.Groups, []string{"system:nodes", "system:authenticated"}) {
		t.Errorf("authenticated as %+v, want system:node:sim-node-7 in [system:nodes system:authenticated]", a.User)
	}
}

func TestRequestTokenWithAWrongToken(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	cfg := f.clientConfig(t, "sim-node-7")
	cfg.Token = "not-the-secret"
	if _, _, err := join.RequestToken(context.Background(), cfg); !errors.Is(err, join.ErrTokenRejected) {
		t.Fatalf("RequestToken error = %v, want ErrTokenRejected", err)
	}
	if got := f.count("v1/token"); got != 0 {
		t.Errorf("token requests = %d, want 0: the secret must not be sent to an unverified server", got)
	}
	cfg.CAPEM = f.cluster.CAPEM()
	_, _, err := join.RequestToken(context.Background(), cfg)
	if want := "join refused by " + f.url + ": join token rejected"; err == nil || err.Error() != want {
		t.Errorf("with the CA pinned: error = %v, want %q", err, want)
	}
}

func TestNodeTokensAuthenticate(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	cfg := f.clientConfig(t, "sim-node-1")
	valid, _, err := join.RequestToken(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	payload, mac := splitToken(t, valid)
	otherPayload := base64.RawURLEncoding.EncodeToString([]byte(`{"node":"sim-node-2","exp":4102444800}`))
	other := newFixture(t, fixtureOptions{})
	foreignKey, _, err := join.RequestToken(context.Background(), other.clientConfig(t, "sim-node-1"))
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name          string
		authorization string
		after         time.Duration
		wantUser      string
		wantErr       bool
	}{
		{name: "a node token authenticates as its node", authorization: "Bearer " + valid, wantUser: "system:node:sim-node-1"},
		{name: "the bearer scheme is case-insensitive", authorization: "bearer " + valid, wantUser: "system:node:sim-node-1"},
		{name: "a node token is valid until just before it expires", authorization: "Bearer " + valid, after: join.DefaultNodeTokenTTL - time.Second, wantUser: "system:node:sim-node-1"},
		{name: "an expired node token is rejected", authorization: "Bearer " + valid, after: join.DefaultNodeTokenTTL, wantErr: true},
		{name: "a token whose payload was changed is rejected", authorization: "Bearer npn1." + otherPayload + "." + mac, wantErr: true},
		{name: "a token whose signature was changed is rejected", authorization: "Bearer npn1." + payload + "." + flipFirst(mac), wantErr: true},
		{name: "a token signed by another cluster is rejected", authorization: "Bearer " + foreignKey, wantErr: true},
		{name: "a token of our format without a signature is rejected", authorization: "Bearer npn1." + payload, wantErr: true},
		{name: "a bearer token of another format is not ours", authorization: "Bearer 31ada4fd-adec-460c-809a-9e56ceb75269"},
		{name: "a request without credentials is not ours", authorization: ""},
		{name: "basic authentication is not ours", authorization: "Basic YWRtaW46YWRtaW4="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.clock.SetTime(start.Add(tt.after))
			req := httptest.NewRequest(http.MethodGet, "/api", nil)
			if tt.authorization != "" {
				req.Header.Set("Authorization", tt.authorization)
			}
			u, ok, err := f.server.NodeTokens().Authenticate(req)
			if tt.wantErr {
				if err == nil || ok || !errors.Is(err, authn.ErrInvalidToken) {
					t.Fatalf("Authenticate = %v, %v, %v; want an error matching ErrInvalidToken", u, ok, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Authenticate error: %v", err)
			}
			if tt.wantUser == "" {
				if ok || u != nil {
					t.Errorf("Authenticate = %+v, %v; want not ours (nil, false, nil)", u, ok)
				}
				return
			}
			if !ok || u.Name != tt.wantUser || !slices.Equal(u.Groups, []string{authn.GroupNodes, authn.GroupAuthenticated}) {
				t.Errorf("Authenticate = %+v, %v; want %s in [system:nodes system:authenticated]", u, ok, tt.wantUser)
			}
		})
	}
}

func TestNewNodeTokensWantsALongKey(t *testing.T) {
	if _, err := join.NewNodeTokens(make([]byte, 16), nil); err == nil {
		t.Error("NewNodeTokens accepted a 16-byte key")
	}
	if _, err := join.NewNodeTokens(make([]byte, 32), nil); err != nil {
		t.Errorf("NewNodeTokens refused a 32-byte key: %v", err)
	}
}

// splitToken returns the payload and signature parts of a node token.
func splitToken(t *testing.T, token string) (payload, mac string) {
	t.Helper()
	parts := strings.Split(strings.TrimPrefix(token, "npn1."), ".")
	if len(parts) != 2 {
		t.Fatalf("token %q does not have the form npn1.<payload>.<mac>", token)
	}
	return parts[0], parts[1]
}

// flipFirst changes the first character of a base64url string.
func flipFirst(s string) string {
	if s[0] == 'A' {
		return "B" + s[1:]
	}
	return "A" + s[1:]
}

func TestTokenClientServesManyNodesOverOneConnection(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	cfg := f.clientConfig(t, "")
	tc, err := join.NewTokenClient(context.Background(), cfg)
	if err != nil {
		t.Fatalf("NewTokenClient: %v", err)
	}
	defer tc.Close()
	before := f.connectionCount() // the cluster-info connection
	nodes := []string{"sim-a", "sim-b", "sim-c"}
	for _, node := range nodes {
		token, err := tc.Token(context.Background(), node)
		if err != nil {
			t.Fatalf("Token(%s): %v", node, err)
		}
		req := httptest.NewRequest(http.MethodGet, "/api", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		u, ok, err := f.server.NodeTokens().Authenticate(req)
		if err != nil || !ok || u.Name != "system:node:"+node {
			t.Errorf("token for %s authenticates as %+v, %v, %v", node, u, ok, err)
		}
	}
	if got := f.count("v1/cluster-info"); got != 1 {
		t.Errorf("cluster-info requests = %d, want 1", got)
	}
	if got := f.connectionCount() - before; got != 1 {
		t.Errorf("token requests used %d connections, want 1", got)
	}
	if _, err := tc.Token(context.Background(), "Not_A_Node"); err == nil || !strings.Contains(err.Error(), "nodeName") {
		t.Errorf("Token for an invalid name: error = %v, want a refusal naming nodeName", err)
	}
}
