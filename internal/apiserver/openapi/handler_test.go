package openapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

func TestHandler(t *testing.T) {
	d := buildDocs(t)
	core := d.v3["api/v1"]
	coreURL := serverRelativeURL("api/v1", core.json.etag)
	coreProto, err := core.protobuf()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		method       string
		target       string
		header       map[string]string
		wantCode     int
		wantType     string
		wantBody     []byte // nil: not compared
		wantHeader   map[string]string
		wantNoHeader []string
	}{
		{
			name: "kubectl 1.27 gets the v2 protobuf with the deprecated Accept spelling", target: "/openapi/v2?timeout=32s",
			header:   map[string]string{"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"},
			wantCode: 200, wantType: mediaV2Proto, wantBody: d.v2Proto.body,
		},
		{
			name: "the current protobuf spelling also selects protobuf", target: "/openapi/v2",
			header:   map[string]string{"Accept": "application/com.github.proto-openapi.spec.v2.v1.0+protobuf, application/json"},
			wantCode: 200, wantType: mediaV2Proto, wantBody: d.v2Proto.body,
		},
		{
			name: "JSON preferred over protobuf gets JSON", target: "/openapi/v2",
			header:   map[string]string{"Accept": "application/json, application/com.github.proto-openapi.spec.v2@v1.0+protobuf"},
			wantCode: 200, wantType: mediaJSON, wantBody: d.v2JSON.body,
		},
		{
			name: "no Accept header gets v2 JSON", target: "/openapi/v2",
			wantCode: 200, wantType: mediaJSON, wantBody: d.v2JSON.body,
		},
		{
			name: "a browser gets v2 JSON", target: "/openapi/v2",
			header:   map[string]string{"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"},
			wantCode: 200, wantType: mediaJSON, wantBody: d.v2JSON.body,
		},
		{
			name: "an unsupported media type is not acceptable", target: "/openapi/v2",
			header:   map[string]string{"Accept": "application/xml"},
			wantCode: 406,
		},
		{
			name: "the legacy protobuf path serves the v2 protobuf", target: "/swagger-2.0.0.pb-v1",
			wantCode: 200, wantType: mediaV2Proto, wantBody: d.v2Proto.body,
		},
		{
			name: "the v3 root lists the group-versions", target: "/openapi/v3?timeout=32s",
			header:   map[string]string{"Accept": "application/json, */*"},
			wantCode: 200, wantType: mediaJSON, wantBody: d.v3Root.body,
		},
		{
			name: "a group-version with the current hash is cacheable forever", target: coreURL,
			header:   map[string]string{"Accept": "application/json"},
			wantCode: 200, wantType: mediaJSON, wantBody: core.json.body,
			wantHeader: map[string]string{"Cache-Control": "public, immutable, max-age=31536000", "Etag": strconv.Quote(core.json.etag)},
		},
		{
			name: "a group-version without a hash is served but not marked immutable", target: "/openapi/v3/api/v1",
			wantCode: 200, wantType: mediaJSON, wantBody: core.json.body, wantNoHeader: []string{"Cache-Control"},
		},
		{
			name: "a stale hash is redirected to the current one", target: "/openapi/v3/api/v1?hash=0123",
			wantCode: 301, wantHeader: map[string]string{"Location": coreURL},
		},
		{
			name: "a group-version in protobuf", target: coreURL,
			header:   map[string]string{"Accept": "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"},
			wantCode: 200, wantType: mediaV3Proto, wantBody: coreProto.body,
		},
		{
			name: "a named group's document", target: "/openapi/v3/apis/coordination.k8s.io/v1",
			wantCode: 200, wantType: mediaJSON, wantBody: d.v3["apis/coordination.k8s.io/v1"].json.body,
		},
		{
			name: "an unserved group-version is not found", target: "/openapi/v3/apis/apps/v1",
			wantCode: 404,
		},
		{
			name: "an unknown path is not found", target: "/openapi/v4",
			wantCode: 404,
		},
		{
			name: "a matching If-None-Match is not modified", target: "/openapi/v2",
			header:   map[string]string{"If-None-Match": strconv.Quote(d.v2JSON.etag)},
			wantCode: 304,
		},
		{
			name: "HEAD sends headers only", method: http.MethodHead, target: "/openapi/v3",
			wantCode: 200, wantType: mediaJSON, wantBody: []byte{},
		},
		{
			name: "POST is not allowed", method: http.MethodPost, target: "/openapi/v2",
			wantCode: 405, wantHeader: map[string]string{"Allow": "GET, HEAD"},
		},
	}
	h := d.Handler()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := tt.method
			if method == "" {
				method = http.MethodGet
			}
			req := httptest.NewRequest(method, tt.target, nil)
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)

			if rec.Code != tt.wantCode {
				t.Fatalf("status %d, want %d; body %.200s", rec.Code, tt.wantCode, rec.Body.String())
			}
			if tt.wantType != "" && rec.Header().Get("Content-Type") != tt.wantType {
				t.Errorf("Content-Type %q, want %q", rec.Header().Get("Content-Type"), tt.wantType)
			}
			if tt.wantBody != nil && !bytes.Equal(rec.Body.Bytes(), tt.wantBody) {
				t.Errorf("body of %d bytes differs from the expected %d bytes", rec.Body.Len(), len(tt.wantBody))
			}
			for k, v := range tt.wantHeader {
				if got := rec.Header().Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			for _, k := range tt.wantNoHeader {
				if got := rec.Header().Get(k); got != "" {
					t.Errorf("header %s = %q, want none", k, got)
				}
			}
		})
	}
}

// BenchmarkServe measures answering the documents kubectl fetches: the v3
// document of the core group (explain, validation) and the v2 protobuf
// (kubectl 1.27–1.28). Both are encoded once at start-up.
func BenchmarkServe(b *testing.B) {
	d, err := New(servedResources(), Info{Version: "v1.33.0"})
	if err != nil {
		b.Fatal(err)
	}
	h := d.Handler()
	for _, bb := range []struct{ name, target, accept string }{
		{"v3 core", "/openapi/v3/api/v1", "application/json"},
		{"v2 protobuf", "/openapi/v2", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"},
	} {
		b.Run(bb.name, func(b *testing.B) {
			for b.Loop() {
				req := httptest.NewRequest("GET", bb.target, nil)
				req.Header.Set("Accept", bb.accept)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatalf("%s: %d", bb.target, rec.Code)
				}
			}
		})
	}
}
