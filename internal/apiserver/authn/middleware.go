package authn

import (
	"context"
	"encoding/json"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Middleware authenticates every request with a before calling next with
// the user on the request context (see UserFrom). A request that no
// authenticator accepts (anonymous, or invalid credentials) goes to
// onUnauthenticated instead, with the rejection reason, if any, on its
// context (see ErrorFrom); nil means Unauthorized.
//
// On success the Authorization header is removed so that no handler can
// forward the credential by accident.
func Middleware(a Authenticator, next http.Handler, onUnauthenticated func(w http.ResponseWriter, r *http.Request)) http.Handler {
	if onUnauthenticated == nil {
		onUnauthenticated = Unauthorized
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, ok, err := a.Authenticate(r)
		if err != nil || !ok {
			if err != nil {
				r = r.WithContext(context.WithValue(r.Context(), errorKey{}, err))
			}
			onUnauthenticated(w, r)
			return
		}
		r.Header.Del("Authorization")
		next.ServeHTTP(w, r.WithContext(WithUser(r.Context(), user)))
	})
}

type errorKey struct{}

// ErrorFrom returns why Middleware rejected the request whose context this
// is, or nil when the request simply carried no credentials.
func ErrorFrom(ctx context.Context) error {
	err, _ := ctx.Value(errorKey{}).(error)
	return err
}

// unauthorizedBody is the Status Kubernetes API servers answer 401 with.
var unauthorizedBody = mustJSON(metav1.Status{
	TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
	Status:   metav1.StatusFailure,
	Message:  "Unauthorized",
	Reason:   metav1.StatusReasonUnauthorized,
	Code:     http.StatusUnauthorized,
})

// Unauthorized writes a 401 with a metav1.Status body, as kube-apiserver
// does:
//
//	{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}
func Unauthorized(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write(unauthorizedBody)
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return append(data, '\n')
}
