package authn_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
)

func TestLoadTokenFile(t *testing.T) {
	tests := []struct {
		name    string
		content string
		token   string
		want    *authn.User
		wantErr string
	}{
		{
			name:    "a three-column record has no groups besides system:authenticated",
			content: "tok1,alice,uid-a\n",
			token:   "tok1",
			want:    &authn.User{Name: "alice", UID: "uid-a", Groups: []string{"system:authenticated"}},
		},
		{
			name:    "a quoted fourth column lists groups",
			content: "tok1,alice,uid-a,\"system:masters, ops\"\n",
			token:   "tok1",
			want:    &authn.User{Name: "alice", UID: "uid-a", Groups: []string{"system:masters", "ops", "system:authenticated"}},
		},
		{
			name:    "comments and blank lines are ignored",
			content: "# admin tokens\n\ntok1,alice,uid-a\n\n# end\ntok2,bob,uid-b\n",
			token:   "tok2",
			want:    &authn.User{Name: "bob", UID: "uid-b", Groups: []string{"system:authenticated"}},
		},
		{
			name:    "a token not in the file is invalid",
			content: "tok1,alice,uid-a\n",
			token:   "tok2",
		},
		{
			name:    "a record with two columns is an error",
			content: "tok1,alice,uid-a\ntok2,bob\n",
			wantErr: "line 2",
		},
		{
			name:    "a duplicate token is an error",
			content: "tok1,alice,uid-a\ntok1,bob,uid-b\n",
			wantErr: "duplicate token",
		},
		{
			name:    "an empty token is an error",
			content: ",alice,uid-a\n",
			wantErr: "empty token",
		},
		{
			name:    "an empty user name is an error",
			content: "tok1,,uid-a\n",
			wantErr: "empty user name",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokens.csv")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			tokens, err := authn.LoadTokenFile(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("LoadTokenFile error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadTokenFile: %v", err)
			}
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.Header.Set("Authorization", "Bearer "+tt.token)
			u, ok, err := tokens.Authenticate(req)
			if tt.want == nil {
				if ok || err == nil {
					t.Fatalf("Authenticate = %v, %v, %v; want an invalid-token error", u, ok, err)
				}
				return
			}
			if !ok || err != nil {
				t.Fatalf("Authenticate = %v, %v, %v; want %+v", u, ok, err, *tt.want)
			}
			if u.Name != tt.want.Name || u.UID != tt.want.UID || !slices.Equal(u.Groups, tt.want.Groups) {
				t.Errorf("user = %+v, want %+v", *u, *tt.want)
			}
		})
	}
}

func TestLoadTokenFileMissingIsAnError(t *testing.T) {
	if _, err := authn.LoadTokenFile(filepath.Join(t.TempDir(), "absent.csv")); err == nil {
		t.Fatal("LoadTokenFile of a missing file succeeded")
	}
}

func TestStaticTokensReturnsACopy(t *testing.T) {
	tokens, err := authn.NewStaticTokens(map[string]authn.User{"t": {Name: "u", Groups: []string{"g"}}})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("Authorization", "Bearer t")
	u, _, _ := tokens.Authenticate(req)
	u.Groups[0] = "system:masters"
	again, _, _ := tokens.Authenticate(req)
	if again.Groups[0] != "g" {
		t.Errorf("a caller's change to a returned user leaked into the token table: groups %v", again.Groups)
	}
}

func TestNewStaticTokensRejectsBadEntries(t *testing.T) {
	tests := []struct {
		name   string
		tokens map[string]authn.User
	}{
		{name: "an empty token is rejected", tokens: map[string]authn.User{"": {Name: "u"}}},
		{name: "a token with a space is rejected", tokens: map[string]authn.User{"a b": {Name: "u"}}},
		{name: "an empty user name is rejected", tokens: map[string]authn.User{"t": {}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := authn.NewStaticTokens(tt.tokens); err == nil {
				t.Fatal("NewStaticTokens succeeded, want an error")
			}
		})
	}
}
