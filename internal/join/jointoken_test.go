package join_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/internal/join"
)

// addToken stores a new token in tokens for f's cluster and returns it.
func addToken(t *testing.T, f *fixture, tokens *memTokens, expires *time.Time) (token string, rec join.TokenRecord) {
	t.Helper()
	token, rec, err := join.NewTokenRecord(f.cluster.CAPEM(), f.clock.Now(), expires, "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := join.ParseToken(token); !ok {
		t.Fatalf("generated token %q does not parse", token)
	}
	tokens.put(rec)
	return token, rec
}

func TestEnsureWithJoinTokens(t *testing.T) {
	inAnHour := start.Add(time.Hour)
	tests := []struct {
		name        string
		token       func(t *testing.T, f *fixture, tokens *memTokens) string
		after       time.Duration // between making the token and joining
		wantExpired bool
		wantReject  bool
	}{
		{name: "a stored token that has not expired joins", token: func(t *testing.T, f *fixture, tokens *memTokens) string {
			tok, _ := addToken(t, f, tokens, &inAnHour)
			return tok
		}, after: 59 * time.Minute},
		{name: "a token without expiry joins much later", token: func(t *testing.T, f *fixture, tokens *memTokens) string {
			tok, _ := addToken(t, f, tokens, nil)
			return tok
		}, after: 1000 * time.Hour},
		{name: "the server's node-token still joins", token: func(*testing.T, *fixture, *memTokens) string { return secret }},
		{name: "an expired token is refused as expired", token: func(t *testing.T, f *fixture, tokens *memTokens) string {
			tok, _ := addToken(t, f, tokens, &inAnHour)
			return tok
		}, after: time.Hour, wantExpired: true, wantReject: true},
		{name: "a deleted token is refused like a wrong one", token: func(t *testing.T, f *fixture, tokens *memTokens) string {
			tok, rec := addToken(t, f, tokens, nil)
			tokens.delete(rec.ID)
			return tok
		}, wantReject: true},
		{name: "a token with an unknown id is refused like a wrong one", token: func(*testing.T, *fixture, *memTokens) string {
			return "zzzzzz.0123456789abcdef"
		}, wantReject: true},
		{name: "a known id with another secret is refused", token: func(t *testing.T, f *fixture, tokens *memTokens) string {
			_, rec := addToken(t, f, tokens, nil)
			return rec.ID + ".0123456789abcdef"
		}, wantReject: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tokens := newMemTokens()
			f := newFixture(t, fixtureOptions{tokens: tokens})
			cfg := f.clientConfig(t, "worker-1")
			cfg.Token = tt.token(t, f, tokens)
			f.clock.Step(tt.after)
			id, err := join.Ensure(context.Background(), cfg)
			if tt.wantReject {
				if !errors.Is(err, join.ErrTokenRejected) {
					t.Fatalf("Ensure: %v, want a refusal matching ErrTokenRejected", err)
				}
				if got := errors.Is(err, join.ErrTokenExpired); got != tt.wantExpired {
					t.Errorf("errors.Is(ErrTokenExpired) = %v, want %v (%v)", got, tt.wantExpired, err)
				}
				if f.count("v1/certificate") != 0 {
					t.Errorf("the token was sent although the cluster info did not verify")
				}
				if entries, _ := os.ReadDir(filepath.Join(cfg.DataDir, join.PKIDir)); len(entries) > 0 {
					t.Errorf("identity files written despite the refusal: %v", entries)
				}
				t.Logf("error: %v", err)
				return
			}
			if err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			if cn := id.Certificate().Subject.CommonName; cn != "system:node:worker-1" {
				t.Errorf("certificate CN = %q", cn)
			}
		})
	}
}

// TestCertificateEndpointChecksJoinTokens posts directly, as a client
// that skipped the cluster-info check would.
func TestCertificateEndpointChecksJoinTokens(t *testing.T) {
	tokens := newMemTokens()
	f := newFixture(t, fixtureOptions{tokens: tokens})
	inAnHour := f.clock.Now().Add(time.Hour)
	valid, _ := addToken(t, f, tokens, nil)
	expiring, expRec := addToken(t, f, tokens, &inAnHour)
	f.clock.Step(2 * time.Hour)
	csr := csrFor(t, newKey(t), "whatever")
	url := f.url + join.PathPrefix + "v1/certificate"

	tests := []struct {
		name     string
		token    string
		wantCode int
		wantMsg  string
	}{
		{name: "a valid token gets a certificate", token: valid, wantCode: http.StatusOK},
		{name: "an expired token with its secret is refused as expired", token: expiring, wantCode: http.StatusUnauthorized, wantMsg: "join token expired"},
		{name: "an expired token's id with a wrong secret says nothing of the expiry", token: expRec.ID + ".aaaaaaaaaaaaaaaa", wantCode: http.StatusUnauthorized, wantMsg: "join token rejected"},
		{name: "an unknown id is refused", token: "qqqqqq.aaaaaaaaaaaaaaaa", wantCode: http.StatusUnauthorized, wantMsg: "join token rejected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := post(t, f.httpClient(t), url, map[string]string{"token": tt.token, "nodeName": "n-" + tt.token[:6], "csr": csr})
			if code != tt.wantCode {
				t.Fatalf("code = %d, want %d: %s", code, tt.wantCode, body)
			}
			if tt.wantMsg != "" {
				if st := decodeStatus(t, body); st.Message != tt.wantMsg {
					t.Errorf("message = %q, want %q", st.Message, tt.wantMsg)
				}
			}
		})
	}
}

func TestClusterInfoMACUsesTheNamedToken(t *testing.T) {
	tokens := newMemTokens()
	f := newFixture(t, fixtureOptions{tokens: tokens})
	inAnHour := f.clock.Now().Add(time.Hour)
	token, rec := addToken(t, f, tokens, nil)
	_, expRec := addToken(t, f, tokens, &inAnHour)
	f.clock.Step(time.Hour)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	caPEM := f.cluster.CAPEM()

	tests := []struct {
		name     string
		query    string
		wantCode int
		wantKey  string // the MAC verifies with this key
	}{
		{name: "a token's id gets the MAC keyed with that token", query: "?tokenID=" + rec.ID, wantCode: http.StatusOK, wantKey: token},
		{name: "no id gets the MAC keyed with the node-token", query: "", wantCode: http.StatusOK, wantKey: secret},
		{name: "an unknown id gets the node-token's MAC, which the agent cannot verify", query: "?tokenID=zzzzzz", wantCode: http.StatusOK, wantKey: secret},
		{name: "an expired token's id is refused", query: "?tokenID=" + expRec.ID, wantCode: http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := client.Get(f.url + join.PathPrefix + "v1/cluster-info" + tt.query)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("code = %d, want %d", resp.StatusCode, tt.wantCode)
			}
			if tt.wantKey == "" {
				return
			}
			var info struct {
				CA    string `json:"ca"`
				CAMAC []byte `json:"caMAC"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
				t.Fatal(err)
			}
			if !hmac.Equal(info.CAMAC, clusterInfoMACWith(tt.wantKey, caPEM)) {
				t.Errorf("caMAC does not verify with the expected key")
			}
		})
	}
}

// clusterInfoMACWith is the agent's computation of the cluster-info MAC.
func clusterInfoMACWith(key string, caPEM []byte) []byte {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte("nodeplane-cluster-info-v1\n"))
	m.Write(caPEM)
	return m.Sum(nil)
}
