package apiserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestBadParameters sends every query parameter of get, list, watch,
// create, update, patch and delete a value kube-apiserver refuses (or
// reads differently) through the real handler, and checks the answer has
// kube-apiserver's code and reason: 400 BadRequest for a value that does
// not parse, 422 Invalid for options that do not go together or are not
// supported, 409 Conflict for a failed precondition. Never a 500, never a
// silent 200 for what upstream refuses. After every row the node is
// checked unchanged.
func TestBadParameters(t *testing.T) {
	_, h := newTestServer(t, Config{})
	const (
		nodes = "/api/v1/nodes"
		node  = nodes + "/p-node"
	)
	created := decode[corev1.Node](t, mustDo(t, h, admin, http.MethodPost, nodes, testNode("p-node", map[string]string{"a": "b"}), http.StatusCreated))
	mustDo(t, h, admin, http.MethodPost, nodes, testNode("q-node", nil), http.StatusCreated)
	nodeBody := func(mutate func(*corev1.Node)) string {
		n := testNode("p-node", map[string]string{"a": "b"})
		n.ResourceVersion = created.ResourceVersion
		if mutate != nil {
			mutate(n)
		}
		return string(mustJSON(t, n))
	}
	const (
		merge = "application/merge-patch+json"
		jsonP = "application/json-patch+json"
		plain = "application/json"
	)
	longManager := strings.Repeat("m", 129)
	newNode := func(name string) string { return string(mustJSON(t, testNode(name, nil))) }

	tests := []struct {
		name        string
		method      string
		path        string
		contentType string
		body        string
		want        int
		// reason is the Status reason (empty for a success).
		reason metav1.StatusReason
		// msg is a substring of the Status message.
		msg string
	}{
		// list
		{"a negative limit lists everything, as upstream", "GET", nodes + "?limit=-1", "", "", 200, "", ""},
		{"a limit that is not a number is a bad request", "GET", nodes + "?limit=ten", "", "", 400, metav1.StatusReasonBadRequest, ""},
		{"a continue token we did not issue is a bad request", "GET", nodes + "?limit=1&continue=bogus", "", "", 400, metav1.StatusReasonBadRequest, "continue key is not valid"},
		{"continue with a resourceVersion is a bad request", "GET", nodes + "?continue=bogus&resourceVersion=5", "", "", 400, metav1.StatusReasonBadRequest, "specifying resource version is not allowed when using continue"},
		{"a resourceVersion that is not a number is a bad request", "GET", nodes + "?resourceVersion=abc", "", "", 400, metav1.StatusReasonBadRequest, "invalid resource version"},
		{"a negative resourceVersion is a bad request", "GET", nodes + "?resourceVersion=-1", "", "", 400, metav1.StatusReasonBadRequest, "invalid resource version"},
		{"an unknown resourceVersionMatch is invalid", "GET", nodes + "?resourceVersion=1&resourceVersionMatch=Bogus", "", "", 422, metav1.StatusReasonInvalid,
			`resourceVersionMatch: Unsupported value: "Bogus": supported values: "Exact", "NotOlderThan", ""`},
		{"an unknown resourceVersionMatch without a resourceVersion is invalid", "GET", nodes + "?resourceVersionMatch=Bogus", "", "", 422, metav1.StatusReasonInvalid,
			"resourceVersionMatch is forbidden unless resourceVersion is provided"},
		{"resourceVersionMatch without a resourceVersion is invalid", "GET", nodes + "?resourceVersionMatch=NotOlderThan", "", "", 422, metav1.StatusReasonInvalid,
			"resourceVersionMatch is forbidden unless resourceVersion is provided"},
		{"an exact list at resourceVersion 0 is invalid", "GET", nodes + "?resourceVersion=0&resourceVersionMatch=Exact", "", "", 422, metav1.StatusReasonInvalid,
			`resourceVersionMatch "exact" is forbidden for resourceVersion "0"`},
		{"resourceVersionMatch with continue is invalid", "GET", nodes + "?resourceVersion=0&resourceVersionMatch=NotOlderThan&continue=bogus", "", "", 422, metav1.StatusReasonInvalid,
			"resourceVersionMatch is forbidden when continue is provided"},
		{"sendInitialEvents on a list is invalid", "GET", nodes + "?sendInitialEvents=true", "", "", 422, metav1.StatusReasonInvalid, "sendInitialEvents is forbidden for list"},
		{"a label selector that does not parse is a bad request", "GET", nodes + "?labelSelector=a+in+(", "", "", 400, metav1.StatusReasonBadRequest, ""},
		{"a field selector on an unknown field is a bad request", "GET", nodes + "?fieldSelector=spec.bogus%3Dx", "", "", 400, metav1.StatusReasonBadRequest, "field label not supported: spec.bogus"},
		{"a field selector without an operator is a bad request", "GET", nodes + "?fieldSelector=metadata.name", "", "", 400, metav1.StatusReasonBadRequest, ""},
		{"timeoutSeconds that is not a number is a bad request", "GET", nodes + "?timeoutSeconds=soon", "", "", 400, metav1.StatusReasonBadRequest, ""},
		{"pretty takes any value, as upstream", "GET", nodes + "?pretty=yes-please", "", "", 200, "", ""},

		// watch
		{"a watch with resourceVersionMatch but no sendInitialEvents is invalid", "GET", nodes + "?watch=true&resourceVersion=1&resourceVersionMatch=NotOlderThan", "", "", 422, metav1.StatusReasonInvalid,
			"resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"},
		{"a watch-list with an exact match is invalid", "GET", nodes + "?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=Exact", "", "", 422, metav1.StatusReasonInvalid,
			`resourceVersionMatch: Unsupported value: "Exact": supported values: "NotOlderThan"`},
		{"a watch-list without a match is invalid", "GET", nodes + "?watch=True&sendInitialEvents=true&allowWatchBookmarks=true", "", "", 422, metav1.StatusReasonInvalid,
			"sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"},
		{"a watch from a resourceVersion that is not a number is a bad request", "GET", nodes + "?watch=true&resourceVersion=abc", "", "", 400, metav1.StatusReasonBadRequest, "invalid resource version"},
		{"a watch timeout that is not a number is a bad request", "GET", "/api/v1/watch/nodes?timeoutSeconds=soon", "", "", 400, metav1.StatusReasonBadRequest, ""},

		// get
		{"a get at a resourceVersion that is not a number is a bad request", "GET", node + "?resourceVersion=abc", "", "", 400, metav1.StatusReasonBadRequest, "invalid resource version"},

		// create
		{"an unknown dryRun on create is invalid", "POST", nodes + "?dryRun=Bogus", plain, newNode("r-node"), 422, metav1.StatusReasonInvalid, `CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value`},
		{"an unknown fieldValidation on create is invalid", "POST", nodes + "?fieldValidation=Loose", plain, newNode("r-node"), 422, metav1.StatusReasonInvalid, "fieldValidation: Unsupported value"},
		{"a fieldManager over 128 characters on create is invalid", "POST", nodes + "?fieldManager=" + longManager, plain, newNode("r-node"), 422, metav1.StatusReasonInvalid, "fieldManager: Too long"},
		{"a fieldManager with a control character on create is invalid", "POST", nodes + "?fieldManager=a%07b", plain, newNode("r-node"), 422, metav1.StatusReasonInvalid, "fieldManager: Invalid value"},

		// update
		{"an unknown dryRun on update is invalid", "PUT", node + "?dryRun=Bogus", plain, nodeBody(nil), 422, metav1.StatusReasonInvalid, `UpdateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value`},
		{"an unknown fieldValidation on update is invalid", "PUT", node + "?fieldValidation=Loose", plain, nodeBody(nil), 422, metav1.StatusReasonInvalid, "fieldValidation: Unsupported value"},
		{"an update naming another uid fails its precondition", "PUT", node, plain, nodeBody(func(n *corev1.Node) { n.UID = "not-the-uid" }), 409, metav1.StatusReasonConflict,
			`Operation cannot be fulfilled on nodes "p-node": Precondition failed: UID in precondition: not-the-uid, UID in object meta: ` + string(created.UID)},
		{"a status update naming another uid fails its precondition", "PUT", node + "/status", plain, nodeBody(func(n *corev1.Node) { n.UID = "not-the-uid" }), 409, metav1.StatusReasonConflict, "Precondition failed: UID in precondition"},
		{"an update may not mark the node deleted", "PUT", node, plain, nodeBody(func(n *corev1.Node) { now := metav1.Now(); n.DeletionTimestamp = &now }), 422, metav1.StatusReasonInvalid,
			"metadata.deletionTimestamp: Invalid value"},

		// patch
		{"force on a merge patch is invalid", "PATCH", node + "?force=true", merge, `{"metadata":{"labels":{"a":"c"}}}`, 422, metav1.StatusReasonInvalid,
			`PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch`},
		{"an unknown dryRun on patch is invalid", "PATCH", node + "?dryRun=Bogus", merge, `{"metadata":{"labels":{"a":"c"}}}`, 422, metav1.StatusReasonInvalid, "dryRun: Unsupported value"},
		{"an unknown fieldValidation on patch is invalid", "PATCH", node + "?fieldValidation=Loose", merge, `{"metadata":{"labels":{"a":"c"}}}`, 422, metav1.StatusReasonInvalid, "fieldValidation: Unsupported value"},
		{"a merge patch may not change the uid", "PATCH", node, merge, `{"metadata":{"uid":"not-the-uid"}}`, 422, metav1.StatusReasonInvalid,
			`Node "p-node" is invalid: metadata.uid: Invalid value: "not-the-uid": field is immutable`},
		{"a JSON patch may not change the uid", "PATCH", node, jsonP, `[{"op":"replace","path":"/metadata/uid","value":"not-the-uid"}]`, 422, metav1.StatusReasonInvalid, "metadata.uid: Invalid value"},
		{"a status patch may not change the uid", "PATCH", node + "/status", merge, `{"metadata":{"uid":"not-the-uid"}}`, 422, metav1.StatusReasonInvalid, "metadata.uid: Invalid value"},
		{"a merge patch may not mark the node deleted", "PATCH", node, merge, `{"metadata":{"deletionTimestamp":"2026-01-02T03:04:05Z"}}`, 422, metav1.StatusReasonInvalid, "metadata.deletionTimestamp: Invalid value"},
		{"a patch at a stale resourceVersion conflicts", "PATCH", node, merge, `{"metadata":{"resourceVersion":"1"}}`, 409, metav1.StatusReasonConflict, ""},
		{"a patch of an unknown type is unsupported", "PATCH", node, "application/x-bogus", `{}`, 415, metav1.StatusReasonUnsupportedMediaType, ""},
		{"a patch of an unknown type is unsupported whatever its options", "PATCH", node + "?dryRun=Bogus", "application/x-bogus", `{}`, 415, metav1.StatusReasonUnsupportedMediaType, ""},

		// delete
		{"an unknown propagationPolicy is invalid", "DELETE", node + "?propagationPolicy=Bogus", "", "", 422, metav1.StatusReasonInvalid, `DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value`},
		{"orphanDependents with a propagationPolicy is invalid", "DELETE", node + "?propagationPolicy=Orphan&orphanDependents=true", "", "", 422, metav1.StatusReasonInvalid, "orphanDependents and deletionPropagation cannot be both set"},
		{"an unknown dryRun on delete is invalid", "DELETE", node + "?dryRun=Bogus", "", "", 422, metav1.StatusReasonInvalid, "dryRun: Unsupported value"},
		{"gracePeriodSeconds that is not a number is a bad request", "DELETE", node + "?gracePeriodSeconds=soon", "", "", 400, metav1.StatusReasonBadRequest, ""},
		{"a delete naming another uid fails its precondition", "DELETE", node, plain, `{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"not-the-uid"}}`, 409, metav1.StatusReasonConflict,
			"Precondition failed: UID in precondition: not-the-uid"},
		{"delete options that do not parse are a bad request", "DELETE", node, plain, `{"kind":"DeleteOptions"`, 400, metav1.StatusReasonBadRequest, ""},
		{"an unknown propagationPolicy on deletecollection is invalid", "DELETE", nodes + "?propagationPolicy=Bogus", "", "", 422, metav1.StatusReasonInvalid, "propagationPolicy: Unsupported value"},
		{"an unknown resourceVersionMatch on deletecollection is invalid", "DELETE", nodes + "?resourceVersion=1&resourceVersionMatch=Bogus", "", "", 422, metav1.StatusReasonInvalid, "resourceVersionMatch: Unsupported value"},
	}
	before := mustDo(t, h, admin, http.MethodGet, node, nil, http.StatusOK).body
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			req := httptest.NewRequest(tt.method, tt.path, body)
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			req.Header.Set(headerUser, admin.name)
			req.Header.Set(headerGroups, strings.Join(admin.groups, ","))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			resp := response{code: rec.Code, body: rec.Body.Bytes()}
			if resp.code != tt.want {
				t.Fatalf("got %d %s, want %d", resp.code, resp.body, tt.want)
			}
			if tt.reason != "" {
				st := resp.status(t)
				if st.Reason != tt.reason {
					t.Errorf("got reason %q (%s), want %q", st.Reason, st.Message, tt.reason)
				}
				if !strings.Contains(st.Message, tt.msg) {
					t.Errorf("got message %q, want it to contain %q", st.Message, tt.msg)
				}
			}
			if after := mustDo(t, h, admin, http.MethodGet, node, nil, http.StatusOK).body; string(after) != string(before) {
				t.Errorf("the node changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestWriteParamsWithoutQuery checks that the shortcut for a write
// without a query, or with only client-go's timeout, answers what decoding
// and validating empty options does.
func TestWriteParamsWithoutQuery(t *testing.T) {
	tests := []struct {
		name        string
		method      string
		contentType string
	}{
		{"an update without a query has the default options", http.MethodPut, "application/json"},
		{"a create without a query has the default options", http.MethodPost, "application/json"},
		{"a merge patch without a query has the default options", http.MethodPatch, "application/merge-patch+json"},
		{"an apply without a query still needs a fieldManager", http.MethodPatch, "application/apply-patch+yaml"},
	}
	for _, tt := range tests {
		for _, query := range []string{"", "?timeout=10s", "?timeout=10s&timeout=5s"} {
			t.Run(tt.name+query, func(t *testing.T) {
				r := httptest.NewRequest(tt.method, "/api/v1/nodes/n"+query, nil)
				r.Header.Set("Content-Type", tt.contentType)
				got, gotErr := parseWriteParams(r)
				// The same request with a query that decodes to empty options
				// (unknown parameters are ignored) takes the long path.
				r2 := httptest.NewRequest(tt.method, "/api/v1/nodes/n?unknownParameter=1", nil)
				r2.Header.Set("Content-Type", tt.contentType)
				want, wantErr := parseWriteParams(r2)
				if got != want || (gotErr == nil) != (wantErr == nil) {
					t.Fatalf("got %+v, %v; want %+v, %v", got, gotErr, want, wantErr)
				}
				if gotErr != nil && gotErr.Error() != wantErr.Error() {
					t.Fatalf("got error %q, want %q", gotErr, wantErr)
				}
			})
		}
	}
}

func TestOnlyTimeout(t *testing.T) {
	tests := []struct {
		query string
		want  bool
	}{
		{"", true},
		{"timeout=10s", true},
		{"timeout=10s&timeout=1s", true},
		{"timeout", true},
		{"timeout=10s&dryRun=All", false},
		{"dryRun=All&timeout=10s", false},
		{"fieldValidation=Strict", false},
		{"&", false},
		{"time%6Fut=1s", false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q has only a timeout: %v", tt.query, tt.want), func(t *testing.T) {
			if got := onlyTimeout(tt.query); got != tt.want {
				t.Errorf("onlyTimeout(%q) = %v, want %v", tt.query, got, tt.want)
			}
		})
	}
}
