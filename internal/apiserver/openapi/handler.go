package openapi

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Accept media types clients send for the protobuf documents. The "@" forms
// are the deprecated spellings kubectl still uses.
var (
	v2ProtoAccepts = []string{mediaV2Proto, "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"}
	v3ProtoAccepts = []string{mediaV3Proto, "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"}
	jsonAccepts    = []string{mediaJSON, "application/*", "*/*"}
)

// Handler serves the documents. Mount it at "/openapi/" and at
// "/swagger-2.0.0.pb-v1"; it answers:
//
//	GET /openapi/v2                    Swagger 2.0, JSON or gnostic protobuf by Accept
//	GET /swagger-2.0.0.pb-v1           Swagger 2.0 protobuf (legacy path)
//	GET /openapi/v3                    the root: one serverRelativeURL per group-version
//	GET /openapi/v3/api/v1?hash=H      one group-version, JSON or protobuf by Accept
//	GET /openapi/v3/apis/<g>/<v>?hash=H
//
// Responses carry an ETag and honour If-None-Match. Anything else is 404.
func (d *Documents) Handler() http.Handler {
	return http.HandlerFunc(d.serveHTTP)
}

func (d *Documents) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	switch path := strings.TrimSuffix(r.URL.Path, "/"); {
	case path == "/openapi/v2":
		w.Header().Add("Vary", "Accept")
		switch negotiate(r.Header.Get("Accept"), jsonAccepts, v2ProtoAccepts) {
		case 0:
			serve(w, r, d.v2JSON)
		case 1:
			serve(w, r, d.v2Proto)
		default:
			http.Error(w, "not acceptable: use application/json or "+mediaV2Proto, http.StatusNotAcceptable)
		}
	case path == "/swagger-2.0.0.pb-v1":
		serve(w, r, d.v2Proto)
	case path == "/openapi/v3":
		serve(w, r, d.v3Root)
	case strings.HasPrefix(path, "/openapi/v3/"):
		key := strings.TrimPrefix(path, "/openapi/v3/")
		g, ok := d.v3[key]
		if !ok {
			http.NotFound(w, r)
			return
		}
		d.serveGroupVersion(w, r, key, g)
	default:
		http.NotFound(w, r)
	}
}

// serveGroupVersion serves one OpenAPI v3 document. A request whose hash
// matches may be cached forever; a stale hash is redirected to the current one,
// as kube-apiserver does.
func (d *Documents) serveGroupVersion(w http.ResponseWriter, r *http.Request, key string, g *groupVersionDoc) {
	w.Header().Add("Vary", "Accept")
	rep := g.json
	switch negotiate(r.Header.Get("Accept"), jsonAccepts, v3ProtoAccepts) {
	case 0:
	case 1:
		var err error
		if rep, err = g.protobuf(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	default:
		http.Error(w, "not acceptable: use application/json or "+mediaV3Proto, http.StatusNotAcceptable)
		return
	}
	if hash := r.URL.Query().Get("hash"); hash != "" {
		if hash != g.json.etag {
			http.Redirect(w, r, serverRelativeURL(key, g.json.etag), http.StatusMovedPermanently)
			return
		}
		w.Header().Set("Cache-Control", "public, immutable, max-age=31536000")
	}
	serve(w, r, rep)
}

// serve writes rep; http.ServeContent handles HEAD, Range and If-None-Match.
func serve(w http.ResponseWriter, r *http.Request, rep representation) {
	w.Header().Set("Content-Type", rep.contentType)
	w.Header().Set("Etag", strconv.Quote(rep.etag))
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(rep.body))
}

// negotiate returns the index of the first group in groups holding a media
// type the Accept header asks for, in the header's order of preference, or -1.
// An empty header accepts anything, so the first group wins. Quality values
// only exclude (q=0); otherwise the header order decides, which is how
// kubectl and client-go write it.
func negotiate(accept string, groups ...[]string) int {
	if strings.TrimSpace(accept) == "" {
		return 0
	}
	for clause := range strings.SplitSeq(accept, ",") {
		mediaType, params, _ := strings.Cut(clause, ";")
		mediaType = strings.ToLower(strings.TrimSpace(mediaType))
		if q, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok && strings.TrimSpace(q) == "0" {
			continue
		}
		for i, group := range groups {
			for _, m := range group {
				if mediaType == m {
					return i
				}
			}
		}
	}
	return -1
}
