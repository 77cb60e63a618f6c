package authz

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
)

// The request headers of user impersonation (kubectl --as, --as-group,
// --as-uid, client-go rest.Config.Impersonate).
const (
	HeaderImpersonateUser   = "Impersonate-User"
	HeaderImpersonateGroup  = "Impersonate-Group"
	HeaderImpersonateUID    = "Impersonate-Uid"
	headerImpersonateExtra  = "Impersonate-Extra-"
	serviceAccountUserStart = "system:serviceaccount:"
)

// Impersonation lets a user act as another, as kube-apiserver does: a request
// carrying Impersonate-User (and optionally Impersonate-Group and
// Impersonate-Uid) is carried out as that user once the requester is
// authorized for the verb "impersonate" on each of them — resource "users"
// (or "serviceaccounts" in the account's namespace for
// system:serviceaccount:<ns>:<name>), "groups", and "uids" in API group
// authentication.k8s.io. A refusal is the 403 naming the first identity
// refused; the request goes no further. Groups or a UID without a user are
// a 400, as are Impersonate-Extra-* headers, which nodeplane's users do not
// carry (refused rather than ignored). The impersonation headers are removed
// before next sees the request. It must sit behind authn.Middleware and in
// front of everything that reads the user.
func (z *Authorizer) Impersonation(objs Objects, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !impersonating(r.Header) {
			next.ServeHTTP(w, r)
			return
		}
		requester, ok := authn.UserFrom(r.Context())
		if !ok {
			writeError(w, Forbidden(nil, Attributes{Verb: "impersonate"}, "no user on the request"))
			return
		}
		target, checks, err := impersonationRequest(r.Header)
		if err != nil {
			writeError(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		for _, a := range checks {
			allowed, reason, err := z.Decide(r.Context(), requester, objs, a)
			if err != nil {
				writeError(w, err)
				return
			}
			if !allowed {
				writeError(w, Forbidden(requester, a, reason))
				return
			}
		}
		for name := range r.Header {
			switch k := http.CanonicalHeaderKey(name); {
			case k == HeaderImpersonateUser, k == HeaderImpersonateGroup, k == HeaderImpersonateUID:
				r.Header.Del(name)
			}
		}
		next.ServeHTTP(w, r.WithContext(authn.WithUser(r.Context(), target)))
	})
}

// impersonating reports whether h asks for impersonation at all: any of
// the impersonation headers (other Impersonate-* headers mean nothing, as
// upstream).
func impersonating(h http.Header) bool {
	for name := range h {
		switch k := http.CanonicalHeaderKey(name); {
		case k == HeaderImpersonateUser, k == HeaderImpersonateGroup, k == HeaderImpersonateUID, strings.HasPrefix(k, headerImpersonateExtra):
			return true
		}
	}
	return false
}

// impersonationRequest reads the impersonation headers: the user to act as
// and the authorization checks the requester must pass.
func impersonationRequest(h http.Header) (*authn.User, []Attributes, error) {
	name := h.Get(HeaderImpersonateUser)
	groups := slices.Clone(h.Values(HeaderImpersonateGroup))
	uid := h.Get(HeaderImpersonateUID)
	for key := range h {
		if k := http.CanonicalHeaderKey(key); strings.HasPrefix(k, headerImpersonateExtra) {
			return nil, nil, fmt.Errorf("%s headers are not supported: nodeplane users carry no extra attributes", headerImpersonateExtra+"*")
		}
	}
	if name == "" {
		if len(groups) > 0 || uid != "" {
			return nil, nil, errors.New("requested impersonation of groups or a uid without impersonating a user")
		}
		return nil, nil, errors.New("the Impersonate-User header is empty")
	}
	user := &authn.User{Name: name, UID: uid}
	var checks []Attributes
	if ns, sa, ok := serviceAccount(name); ok {
		checks = append(checks, Attributes{Verb: "impersonate", ResourceRequest: true, Resource: "serviceaccounts", Namespace: ns, Name: sa})
		groups = append(groups, "system:serviceaccounts", "system:serviceaccounts:"+ns)
	} else {
		checks = append(checks, Attributes{Verb: "impersonate", ResourceRequest: true, Resource: "users", Name: name})
	}
	for _, g := range h.Values(HeaderImpersonateGroup) {
		checks = append(checks, Attributes{Verb: "impersonate", ResourceRequest: true, Resource: "groups", Name: g})
	}
	if uid != "" {
		checks = append(checks, Attributes{Verb: "impersonate", ResourceRequest: true, APIGroup: "authentication.k8s.io", Resource: "uids", Name: uid})
	}
	// As upstream: the anonymous user is unauthenticated, every other
	// impersonated user authenticated.
	implied := authn.GroupAuthenticated
	if name == "system:anonymous" {
		implied = "system:unauthenticated"
	}
	if !slices.Contains(groups, implied) {
		groups = append(groups, implied)
	}
	user.Groups = groups
	return user, checks, nil
}

// serviceAccount splits system:serviceaccount:<ns>:<name>.
func serviceAccount(user string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(user, serviceAccountUserStart)
	if !found {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, ":")
	return namespace, name, ok && namespace != "" && name != ""
}
