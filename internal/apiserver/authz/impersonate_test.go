package authz

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
)

func TestImpersonationRequest(t *testing.T) {
	tests := []struct {
		name       string
		header     http.Header
		wantErr    bool
		wantUser   string
		wantGroups []string
		wantChecks []string // resource/name of each check, in order
	}{
		{name: "a user alone is checked as users and gets system:authenticated",
			header:   http.Header{"Impersonate-User": {"dave"}},
			wantUser: "dave", wantGroups: []string{authn.GroupAuthenticated}, wantChecks: []string{"users/dave"}},
		{name: "each group and the uid are checked too",
			header:   http.Header{"Impersonate-User": {"dave"}, "Impersonate-Group": {"a", "b"}, "Impersonate-Uid": {"42"}},
			wantUser: "dave", wantGroups: []string{"a", "b", authn.GroupAuthenticated}, wantChecks: []string{"users/dave", "groups/a", "groups/b", "uids/42"}},
		{name: "a service account is checked in its namespace and gets the service account groups",
			header:   http.Header{"Impersonate-User": {"system:serviceaccount:ns1:builder"}},
			wantUser: "system:serviceaccount:ns1:builder", wantGroups: []string{"system:serviceaccounts", "system:serviceaccounts:ns1", authn.GroupAuthenticated},
			wantChecks: []string{"serviceaccounts/builder"}},
		{name: "the anonymous user is unauthenticated",
			header:   http.Header{"Impersonate-User": {"system:anonymous"}},
			wantUser: "system:anonymous", wantGroups: []string{"system:unauthenticated"}, wantChecks: []string{"users/system:anonymous"}},
		{name: "groups without a user are refused", header: http.Header{"Impersonate-Group": {"system:masters"}}, wantErr: true},
		{name: "a uid without a user is refused", header: http.Header{"Impersonate-Uid": {"1"}}, wantErr: true},
		{name: "extra attributes are refused, not ignored", header: http.Header{"Impersonate-User": {"dave"}, "Impersonate-Extra-Scopes": {"x"}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, checks, err := impersonationRequest(tt.header)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got user %+v, want an error", u)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if u.Name != tt.wantUser || !slices.Equal(u.Groups, tt.wantGroups) {
				t.Errorf("got %s %v, want %s %v", u.Name, u.Groups, tt.wantUser, tt.wantGroups)
			}
			var got []string
			for _, c := range checks {
				if c.Verb != "impersonate" || !c.ResourceRequest {
					t.Errorf("check %+v is not an impersonate resource request", c)
				}
				got = append(got, c.Resource+"/"+c.Name)
			}
			if !slices.Equal(got, tt.wantChecks) {
				t.Errorf("checks %v, want %v", got, tt.wantChecks)
			}
		})
	}
}

func TestImpersonationMiddleware(t *testing.T) {
	z := New(Config{Modes: []string{ModeNode, ModeRBAC}})
	var seen *authn.User
	var seenHeader http.Header
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, _ = authn.UserFrom(r.Context())
		seenHeader = r.Header.Clone()
	})
	h := z.Impersonation(nil, next)
	admin := &authn.User{Name: "admin", Groups: []string{authn.GroupMasters, authn.GroupAuthenticated}}
	alice := &authn.User{Name: "alice", Groups: []string{authn.GroupAuthenticated}}
	node := &authn.User{Name: "system:node:n1", Groups: []string{authn.GroupNodes, authn.GroupAuthenticated}}
	tests := []struct {
		name      string
		requester *authn.User
		header    http.Header
		wantCode  int
		wantUser  string
	}{
		{"a request without impersonation goes through as its sender", alice, http.Header{}, 200, "alice"},
		{"an administrator acts as the user asked for", admin, http.Header{"Impersonate-User": {"dave"}}, 200, "dave"},
		{"a user without the grant is refused", alice, http.Header{"Impersonate-User": {"admin"}, "Impersonate-Group": {authn.GroupMasters}}, 403, ""},
		{"a node cannot impersonate", node, http.Header{"Impersonate-User": {"system:node:n2"}, "Impersonate-Group": {authn.GroupNodes}}, 403, ""},
		{"groups alone are a bad request", admin, http.Header{"Impersonate-Group": {"x"}}, 400, ""},
		{"another Impersonate- header alone is no impersonation", alice, http.Header{"Impersonate-Nothing": {"x"}}, 200, "alice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen, seenHeader = nil, nil
			r := httptest.NewRequest(http.MethodGet, "/api/v1/nodes", nil)
			r.Header = tt.header.Clone()
			r = r.WithContext(authn.WithUser(context.Background(), tt.requester))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.wantCode {
				t.Fatalf("code %d, want %d: %s", w.Code, tt.wantCode, w.Body)
			}
			if tt.wantCode != 200 {
				if seen != nil {
					t.Errorf("the refused request reached the handler as %+v", seen)
				}
				return
			}
			if seen == nil || seen.Name != tt.wantUser {
				t.Errorf("handler saw %+v, want %s", seen, tt.wantUser)
			}
			for _, k := range []string{"Impersonate-User", "Impersonate-Group", "Impersonate-Uid"} {
				if _, ok := seenHeader[k]; ok {
					t.Errorf("header %s reached the handler", k)
				}
			}
		})
	}
}
