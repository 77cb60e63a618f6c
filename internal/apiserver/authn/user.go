// Package authn decides who is making an API request: it turns a verified
// client certificate or a bearer token into a User and puts it on the
// request's context for authorization and admission to read.
//
// It does not verify certificates itself (the TLS layer does, configured by
// pki.Cluster.ServingTLSConfig), does not decide what a user may do
// (authorization), and exempts no path: the server chooses which handlers
// it wraps with Middleware.
package authn

import (
	"context"
	"slices"
)

// Well-known groups.
const (
	// GroupAuthenticated is added to every authenticated user.
	GroupAuthenticated = "system:authenticated"
	// GroupMasters is the superuser group (the admin certificate's O).
	GroupMasters = "system:masters"
	// GroupNodes is the group of agent (node) client certificates.
	GroupNodes = "system:nodes"
)

// User is an authenticated requester.
type User struct {
	// Name is the user name: a client certificate's CN or a token's user.
	Name string
	// UID is an optional stable identifier (token files have one; client
	// certificates do not).
	UID string
	// Groups always includes GroupAuthenticated.
	Groups []string
}

// InGroup reports whether u is a member of group.
func (u *User) InGroup(group string) bool { return slices.Contains(u.Groups, group) }

type userKey struct{}

// WithUser returns a copy of ctx carrying u.
func WithUser(ctx context.Context, u *User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the user WithUser put on ctx.
func UserFrom(ctx context.Context) (*User, bool) {
	u, ok := ctx.Value(userKey{}).(*User)
	return u, ok && u != nil
}

// withAuthenticatedGroup returns groups plus GroupAuthenticated, as a new
// slice.
func withAuthenticatedGroup(groups []string) []string {
	out := make([]string, 0, len(groups)+1)
	for _, g := range groups {
		if g != "" && !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	if !slices.Contains(out, GroupAuthenticated) {
		out = append(out, GroupAuthenticated)
	}
	return out
}
