package apiserver

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

// rowObject is what a Table row's object decodes to.
type rowObject struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       *corev1.NodeSpec  `json:"spec"`
}

// TestTableIncludeObject checks includeObject on lists, single gets and
// watches: Metadata (the default) embeds PartialObjectMetadata, Object the
// whole object with its kind, None nothing; anything else is 400.
func TestTableIncludeObject(t *testing.T) {
	_, h := newTestServer(t, Config{})
	for _, name := range []string{"b", "a"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"zone": "z-" + name}}, Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/24"}}
		mustDo(t, h, admin, http.MethodPost, "/api/v1/nodes", node, http.StatusCreated)
	}
	for _, tc := range []struct {
		name, path string
		wantKind   string // "" means no object
		wantSpec   bool
	}{
		{"a list without includeObject embeds metadata", "/api/v1/nodes", "PartialObjectMetadata", false},
		{"a list with includeObject=Metadata embeds metadata", "/api/v1/nodes?includeObject=Metadata", "PartialObjectMetadata", false},
		{"a list with includeObject=Object embeds the whole node", "/api/v1/nodes?includeObject=Object", "Node", true},
		{"a list with includeObject=None embeds nothing", "/api/v1/nodes?includeObject=None", "", false},
		{"a get with includeObject=Object embeds the whole node", "/api/v1/nodes/a?includeObject=Object", "Node", true},
		{"a get with includeObject=None embeds nothing", "/api/v1/nodes/a?includeObject=None", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := doRaw(t, h, http.MethodGet, tc.path, "", tableAccept, "")
			if resp.code != http.StatusOK {
				t.Fatalf("got %d %s", resp.code, resp.body)
			}
			table := decode[metav1.Table](t, resp)
			if table.Kind != "Table" || len(table.Rows) == 0 {
				t.Fatalf("got %s %d rows, want a Table with rows", table.Kind, len(table.Rows))
			}
			for _, row := range table.Rows {
				if tc.wantKind == "" {
					if len(row.Object.Raw) != 0 && string(row.Object.Raw) != "null" {
						t.Errorf("row %v carries object %s, want none", row.Cells[0], row.Object.Raw)
					}
					continue
				}
				var obj rowObject
				if err := json.Unmarshal(row.Object.Raw, &obj); err != nil {
					t.Fatalf("row object %s: %v", row.Object.Raw, err)
				}
				if obj.Kind != tc.wantKind || obj.Metadata.Name != row.Cells[0] || obj.Metadata.Labels["zone"] != "z-"+obj.Metadata.Name {
					t.Errorf("row %v: object %s, want a %s of that node with its labels", row.Cells[0], row.Object.Raw, tc.wantKind)
				}
				if tc.wantKind == "Node" && obj.APIVersion != "v1" {
					t.Errorf("row object apiVersion %q, want v1", obj.APIVersion)
				}
				if (obj.Spec != nil && obj.Spec.PodCIDR != "") != tc.wantSpec {
					t.Errorf("row object %s: spec present %v, want %v", row.Object.Raw, obj.Spec != nil, tc.wantSpec)
				}
			}
		})
	}

	for _, path := range []string{"/api/v1/nodes", "/api/v1/nodes?watch=true&timeoutSeconds=5"} {
		t.Run("an unknown includeObject is 400 on "+path, func(t *testing.T) {
			sep := "?"
			if strings.Contains(path, "?") {
				sep = "&"
			}
			resp := doRaw(t, h, http.MethodGet, path+sep+"includeObject=Everything", "", tableAccept, "")
			if st := resp.status(t); resp.code != http.StatusBadRequest || st.Reason != metav1.StatusReasonBadRequest || !strings.Contains(st.Message, "includeObject") {
				t.Errorf("got %d %s, want 400 naming includeObject", resp.code, resp.body)
			}
		})
	}

	t.Run("a watch with includeObject=Object sends whole nodes in Table events", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv := httptest.NewServer(h)
		defer srv.Close()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/v1/nodes?watch=true&includeObject=Object", nil)
		req.Header.Set("Accept", tableAccept)
		req.Header.Set(headerUser, admin.name)
		req.Header.Set(headerGroups, strings.Join(admin.groups, ","))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for seen := 0; seen < 2; seen++ {
			if !sc.Scan() {
				t.Fatalf("watch ended after %d events: %v", seen, sc.Err())
			}
			var ev struct {
				Type   string       `json:"type"`
				Object metav1.Table `json:"object"`
			}
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Fatalf("event %s: %v", sc.Bytes(), err)
			}
			if ev.Object.Kind != "Table" || len(ev.Object.Rows) != 1 {
				t.Fatalf("event %s: want a one-row Table", sc.Bytes())
			}
			var obj rowObject
			if err := json.Unmarshal(ev.Object.Rows[0].Object.Raw, &obj); err != nil || obj.Kind != "Node" || obj.Spec == nil || obj.Spec.PodCIDR == "" {
				t.Errorf("event row object %s (%v), want a whole Node", ev.Object.Rows[0].Object.Raw, err)
			}
		}
	})
}
