package h2server

import (
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// commonHeaders are the header names requests and responses of the API
// mostly carry, canonical form to HTTP/2's lower case; looking them up
// saves an allocation per field either way.
var commonHeaders = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"Accept", "Accept-Encoding", "Accept-Language", "Audit-Id", "Authorization", "Cache-Control",
		"Content-Encoding", "Content-Length", "Content-Type", "Cookie", "Date", "Etag", "Host",
		"If-Match", "If-Modified-Since", "If-None-Match", "Kubectl-Command", "Kubectl-Session", "Last-Modified",
		"Location", "Origin", "Retry-After", "Set-Cookie", "User-Agent", "Vary", "Warning", "Www-Authenticate",
		"X-Content-Type-Options", "X-Forwarded-For", "X-Kubernetes-Pf-Flowschema-Uid",
		"X-Kubernetes-Pf-Prioritylevel-Uid", "Impersonate-User", "Impersonate-Group",
	} {
		m[k] = strings.ToLower(k)
	}
	return m
}()

// canonicalOf maps the lower-case common names back.
var canonicalOf = func() map[string]string {
	m := make(map[string]string, len(commonHeaders))
	for k, v := range commonHeaders {
		m[v] = k
	}
	return m
}()

// canonicalHeader is the net/http key of a request field name.
func canonicalHeader(name string) string {
	if k, ok := canonicalOf[name]; ok {
		return k
	}
	return http.CanonicalHeaderKey(name)
}

// lowerHeader is the HTTP/2 field name of a response header key; false for
// the connection-specific fields HTTP/2 forbids.
func lowerHeader(k string) (string, bool) {
	if v, ok := commonHeaders[k]; ok {
		return v, true
	}
	switch http.CanonicalHeaderKey(k) {
	case "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "Trailer":
		return "", false
	}
	return strings.ToLower(k), true
}

// statusString formats a status code, without allocating for the usual ones.
func statusString(code int) string {
	switch code {
	case http.StatusOK:
		return "200"
	case http.StatusCreated:
		return "201"
	case http.StatusNotFound:
		return "404"
	case http.StatusConflict:
		return "409"
	case http.StatusTooManyRequests:
		return "429"
	}
	return strconv.Itoa(code)
}

// dateCache is the Date header of the current second.
type dateCache struct {
	sec int64
	s   string
}

var lastDate atomic.Pointer[dateCache]

// httpDate is the Date header for now, formatted once a second.
func httpDate() string {
	now := time.Now()
	if d := lastDate.Load(); d != nil && d.sec == now.Unix() {
		return d.s
	}
	d := &dateCache{sec: now.Unix(), s: now.UTC().Format(http.TimeFormat)}
	lastDate.Store(d)
	return d.s
}
