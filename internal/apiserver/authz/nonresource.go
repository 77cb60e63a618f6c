package authz

import (
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// publicPaths may be read by any authenticated user (upstream's
// system:discovery and system:public-info-viewer roles).
var publicPaths = map[string]bool{
	"/api": true, "/apis": true, "/openapi": true,
	"/version": true, "/version/": true,
	"/healthz": true, "/livez": true, "/readyz": true,
	"/swagger-2.0.0.pb-v1": true,
}

// publicPrefixes: every path below these is public too.
var publicPrefixes = []string{"/api/", "/apis/", "/openapi/"}

// publicPath reports whether a non-resource request is a read of a public
// path. Everything else (/metrics, for one) is for administrators and
// controllers only.
func publicPath(a Attributes) bool {
	if a.Verb != "get" {
		return false
	}
	if publicPaths[a.Path] {
		return true
	}
	for _, p := range publicPrefixes {
		if strings.HasPrefix(a.Path, p) {
			return true
		}
	}
	return false
}

// NonResourceAttributes describes a request for a non-resource path: the
// verb is the lower-case HTTP method, HEAD counting as get.
func NonResourceAttributes(r *http.Request) Attributes {
	verb := strings.ToLower(r.Method)
	if r.Method == http.MethodHead {
		verb = "get"
	}
	return Attributes{Verb: verb, Path: r.URL.Path}
}

// NonResource authorizes requests for paths outside the API (/metrics,
// /openapi/..., /version ...) before passing them to next, with no RBAC
// policy (only the fixed rules apply); see NonResourceWith.
func (z *Authorizer) NonResource(next http.Handler) http.Handler {
	return z.NonResourceWith(nil, next)
}

// NonResourceWith authorizes requests for paths outside the API (/metrics,
// /openapi/..., /version ...) before passing them to next; RBAC rules with
// nonResourceURLs are read through objs. Paths under /api and /apis go to
// next unchecked: the API server authorizes them itself, resource by
// resource (see apiserver.Config.Authorizer). It must sit behind
// authn.Middleware, which puts the user on the request.
func (z *Authorizer) NonResourceWith(objs Objects, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if p == "/api" || p == "/apis" || strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/apis/") {
			next.ServeHTTP(w, r)
			return
		}
		if err := z.Authorize(r.Context(), objs, NonResourceAttributes(r)); err != nil {
			writeError(w, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// writeError writes err as a JSON metav1.Status.
func writeError(w http.ResponseWriter, err error) {
	var st apierrors.APIStatus
	status := metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError, Message: err.Error()}
	if errors.As(err, &st) {
		status = st.Status()
	}
	status.Kind, status.APIVersion = "Status", "v1"
	data, jerr := json.Marshal(status)
	if jerr != nil {
		http.Error(w, err.Error(), int(status.Code))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(int(status.Code))
	_, _ = w.Write(append(data, '\n'))
}

// PublicPaths lists the non-resource paths every authenticated user may
// read, as RBAC nonResourceURLs ("/apis/*" for a prefix), for
// SelfSubjectRulesReview.
func PublicPaths() []string {
	var out []string
	for p := range publicPaths {
		out = append(out, p)
	}
	for _, p := range publicPrefixes {
		out = append(out, p+"*")
	}
	sort.Strings(out)
	return out
}
