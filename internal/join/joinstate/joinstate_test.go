package joinstate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
	"github.com/nodeplane/nodeplane/internal/join"
	"github.com/nodeplane/nodeplane/internal/join/joinstate"
	"github.com/nodeplane/nodeplane/internal/storage/etcd"
)

var start = time.Date(2031, 3, 14, 15, 9, 26, 0, time.UTC)

const caPEM = "-----BEGIN CERTIFICATE-----\nnot parsed here\n-----END CERTIFICATE-----\n"

// newStore runs the store against a real embedded etcd member.
func newStore(t *testing.T) (*joinstate.Store, *testclock.FakeClock) {
	t.Helper()
	cfg := etcd.DefaultEmbeddedConfig()
	cfg.Dir = t.TempDir()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := etcd.StartEmbedded(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	st, err := etcd.New(m.StoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	clk := testclock.NewFakeClock(start)
	s, err := joinstate.New(joinstate.Config{Storage: st, CAPEM: []byte(caPEM), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return s, clk
}

func TestStore(t *testing.T) {
	ctx := context.Background()
	s, clk := newStore(t)

	token, rec, err := s.CreateToken(ctx, time.Hour, "rack 1")
	if err != nil {
		t.Fatal(err)
	}
	id, secret, ok := join.ParseToken(token)
	if !ok || id != rec.ID {
		t.Fatalf("token %q does not parse or has another id than %q", token, rec.ID)
	}
	got, err := s.Token(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(got)
	if bytes.Contains(raw, []byte(secret)) {
		t.Errorf("the stored record contains the secret: %s", raw)
	}
	if !bytes.Equal(got.SecretHash, join.TokenSecretHash(secret)) {
		t.Error("the stored hash is not the secret's")
	}
	if got.Expires == nil || !got.Expires.Equal(start.Add(time.Hour)) || got.Description != "rack 1" {
		t.Errorf("stored expires %v, description %q", got.Expires, got.Description)
	}
	if _, _, err := s.CreateToken(ctx, 0, ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateToken(ctx, -time.Second, ""); err == nil {
		t.Error("a negative ttl was accepted")
	}
	all, err := s.Tokens(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("Tokens = %d records, %v; want 2", len(all), err)
	}
	clk.Step(time.Hour)
	if got, _ := s.Token(ctx, id); !got.Expired(clk.Now()) {
		t.Error("the token is not expired after its ttl")
	}
	if err := s.DeleteToken(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Token(ctx, id); !errors.Is(err, join.ErrTokenNotFound) {
		t.Errorf("Token after delete: %v, want ErrTokenNotFound", err)
	}
	if err := s.DeleteToken(ctx, id); !errors.Is(err, join.ErrTokenNotFound) {
		t.Errorf("second delete: %v, want ErrTokenNotFound", err)
	}

	t.Run("identities are replaced only at the version read", func(t *testing.T) {
		if _, _, err := s.Identity(ctx, "n1"); !errors.Is(err, join.ErrIdentityNotFound) {
			t.Fatalf("Identity of a new node: %v, want ErrIdentityNotFound", err)
		}
		a := join.IssuedIdentity{Node: "n1", KeySHA256: []byte("a"), NotAfter: start.Add(time.Hour)}
		if err := s.PutIdentity(ctx, a, 0); err != nil {
			t.Fatal(err)
		}
		if err := s.PutIdentity(ctx, a, 0); !errors.Is(err, join.ErrIdentityConflict) {
			t.Errorf("second create: %v, want ErrIdentityConflict", err)
		}
		got, version, err := s.Identity(ctx, "n1")
		if err != nil || string(got.KeySHA256) != "a" {
			t.Fatalf("Identity = %+v, %v", got, err)
		}
		b := join.IssuedIdentity{Node: "n1", KeySHA256: []byte("b"), NotAfter: start.Add(time.Hour)}
		if err := s.PutIdentity(ctx, b, version); err != nil {
			t.Fatal(err)
		}
		if err := s.PutIdentity(ctx, a, version); !errors.Is(err, join.ErrIdentityConflict) {
			t.Errorf("update at a stale version: %v, want ErrIdentityConflict", err)
		}
	})
}

func TestHandler(t *testing.T) {
	s, _ := newStore(t)
	h, err := joinstate.NewHandler(joinstate.HandlerConfig{Store: s, Clock: testclock.NewFakeClock(start), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	admin := &authn.User{Name: "admin", Groups: []string{authn.GroupMasters}}
	controller := &authn.User{Name: "system:kube-controller-manager"}
	node := &authn.User{Name: "system:node:n1", Groups: []string{authn.GroupNodes}}
	serve := func(u *authn.User, method, path, body string) (int, []byte) {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		if u != nil {
			r = r.WithContext(authn.WithUser(r.Context(), u))
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Body.Bytes()
	}
	code, body := serve(admin, http.MethodPost, joinstate.Path, `{"ttl":"24h","description":"rack 1"}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	var created joinstate.Token
	if err := json.Unmarshal(body, &created); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		user       *authn.User
		method     string
		path       string
		body       string
		wantCode   int
		wantInBody string
	}{
		{name: "an administrator lists tokens without secrets", user: admin, method: http.MethodGet, path: joinstate.Path, wantCode: http.StatusOK, wantInBody: created.ID},
		{name: "a controller may not mint join tokens", user: controller, method: http.MethodPost, path: joinstate.Path, body: `{"ttl":"1h"}`, wantCode: http.StatusForbidden},
		{name: "a node may not list join tokens", user: node, method: http.MethodGet, path: joinstate.Path, wantCode: http.StatusForbidden},
		{name: "a request without a user is forbidden", method: http.MethodGet, path: joinstate.Path, wantCode: http.StatusForbidden},
		{name: "a ttl that is not a duration is invalid, naming ttl", user: admin, method: http.MethodPost, path: joinstate.Path, body: `{"ttl":"tomorrow"}`, wantCode: http.StatusUnprocessableEntity, wantInBody: `"field":"ttl"`},
		{name: "a negative ttl is invalid", user: admin, method: http.MethodPost, path: joinstate.Path, body: `{"ttl":"-1h"}`, wantCode: http.StatusUnprocessableEntity, wantInBody: `"field":"ttl"`},
		{name: "an unknown field is a bad request", user: admin, method: http.MethodPost, path: joinstate.Path, body: `{"ttl":"1h","secret":"x"}`, wantCode: http.StatusBadRequest},
		{name: "a too long description is invalid", user: admin, method: http.MethodPost, path: joinstate.Path, body: `{"ttl":"1h","description":"` + strings.Repeat("x", 300) + `"}`, wantCode: http.StatusUnprocessableEntity, wantInBody: `"field":"description"`},
		{name: "deleting the node-token says how to rotate it", user: admin, method: http.MethodDelete, path: joinstate.Path + "/node-token", wantCode: http.StatusBadRequest, wantInBody: "restart the server"},
		{name: "deleting a malformed id is invalid", user: admin, method: http.MethodDelete, path: joinstate.Path + "/NOPE", wantCode: http.StatusUnprocessableEntity},
		{name: "deleting an unknown id is not found", user: admin, method: http.MethodDelete, path: joinstate.Path + "/zzzzzz", wantCode: http.StatusNotFound},
		{name: "PUT is not allowed", user: admin, method: http.MethodPut, path: joinstate.Path, wantCode: http.StatusMethodNotAllowed},
		{name: "an administrator deletes a token", user: admin, method: http.MethodDelete, path: joinstate.Path + "/" + created.ID, wantCode: http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := serve(tt.user, tt.method, tt.path, tt.body)
			if code != tt.wantCode {
				t.Fatalf("code = %d, want %d: %s", code, tt.wantCode, body)
			}
			if !strings.Contains(string(body), tt.wantInBody) {
				t.Errorf("body does not contain %q: %s", tt.wantInBody, body)
			}
			if strings.Contains(string(body), created.Token) {
				t.Errorf("the answer contains the secret: %s", body)
			}
			if code >= 400 {
				var st metav1.Status
				if err := json.Unmarshal(body, &st); err != nil || st.Kind != "Status" {
					t.Errorf("error answer is not a Status: %s", body)
				}
			}
		})
	}
}
