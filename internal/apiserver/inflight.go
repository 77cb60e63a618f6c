package apiserver

import (
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// LimitInFlight bounds concurrent non-long-running requests, as
// kube-apiserver's --max-requests-inflight and
// --max-mutating-requests-inflight: past a limit a request gets 429
// TooManyRequests with Retry-After at once instead of queueing until the
// server and its storage collapse. Watches and pod logs are not counted. A
// limit <= 0 means no limit.
func LimitInFlight(next http.Handler, readOnly, mutating int) http.Handler {
	var ro, mu chan struct{}
	if readOnly > 0 {
		ro = make(chan struct{}, readOnly)
	}
	if mutating > 0 {
		mu = make(chan struct{}, mutating)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isLongRunning(r) {
			next.ServeHTTP(w, r)
			return
		}
		sem := ro
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			sem = mu
		}
		if sem != nil {
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			default:
				writeStatus(w, r, statusOf(apierrors.NewTooManyRequests("too many requests in flight, please try again later", 1)))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func isLongRunning(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	if w := r.URL.Query().Get("watch"); w == "true" || w == "1" {
		return true
	}
	// Watches, and pod logs (which may follow for as long as the pod runs).
	return strings.Contains(r.URL.Path, "/watch/") || (strings.Contains(r.URL.Path, "/pods/") && strings.HasSuffix(r.URL.Path, "/log"))
}
