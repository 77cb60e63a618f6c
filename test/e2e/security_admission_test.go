package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
)

// TestSecurityNodeOwnerReferences is the attack of issue 10 defect 3: a
// node may not delete its own Node, but an owner reference to an object
// that does not exist would make the garbage collector delete the Node and
// with it the node's Lease. A real agent's own credential tries to give
// its Node an owner through an update, a merge patch of the Node and a
// merge patch of nodes/status; each is refused with NodeRestriction's
// message, and a watch on the Node and the Lease sees no deletion for a
// bounded window afterwards (long enough for the garbage collector, which
// runs in the same server, to have acted).
func TestSecurityNodeOwnerReferences(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, serverOptions{})
	cs := s.client()
	const name = "owned"
	a := startAgent(t, s, agentOptions{name: name, config: agentTestConfig})
	var leaseRV string
	eventually(t, 30*time.Second, "node and lease registered", func() error {
		if _, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		leaseRV = l.ResourceVersion
		return nil
	})
	n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Watch both objects from now on, as an administrator: any deletion
	// fails the test.
	byName := fields.OneTermEqualSelector("metadata.name", name).String()
	nodeWatch, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: byName, ResourceVersion: n.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer nodeWatch.Stop()
	leaseWatch, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Watch(ctx, metav1.ListOptions{FieldSelector: byName, ResourceVersion: leaseRV})
	if err != nil {
		t.Fatal(err)
	}
	defer leaseWatch.Stop()

	// An owner that does not exist: the garbage collector would delete
	// the Node as soon as it saw the reference.
	ghost := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "ghost-owner", UID: types.UID("00000000-0000-0000-0000-00000000dead")}}
	ghostPatch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": ghost}})
	if err != nil {
		t.Fatal(err)
	}
	node := nodeClient(t, s, a)
	attacks := []struct {
		name   string
		attack func() error
	}{
		{"an update of the Node", func() error {
			// The agent writes its status meanwhile: retry lost races so
			// the answer is about the owner reference.
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur, err := node.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				cur.OwnerReferences = ghost
				_, err = node.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{})
				return err
			})
		}},
		{"an update of nodes/status", func() error {
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur, err := node.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				cur.OwnerReferences = ghost
				_, err = node.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
				return err
			})
		}},
		{"a merge patch of the Node", func() error {
			_, err := node.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, ghostPatch, metav1.PatchOptions{})
			return err
		}},
		{"a merge patch of nodes/status", func() error {
			_, err := node.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, ghostPatch, metav1.PatchOptions{}, "status")
			return err
		}},
		{"a strategic merge patch of the Node", func() error {
			_, err := node.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, ghostPatch, metav1.PatchOptions{})
			return err
		}},
	}
	want := fmt.Sprintf("node %q is not allowed to modify ownerReferences", name)
	for _, at := range attacks {
		err := at.attack()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s with a ghost owner: got %v, want 403 %q", at.name, err, want)
		}
	}

	// A bounded window: the garbage collector acts within a second or two
	// of a new owner reference; give it ten.
	window := time.After(10 * time.Second)
	for done := false; !done; {
		select {
		case ev, ok := <-nodeWatch.ResultChan():
			if !ok {
				t.Fatal("node watch closed early")
			}
			if ev.Type == watch.Deleted {
				t.Fatalf("the Node was deleted after the attack")
			}
			if no, ok := ev.Object.(*corev1.Node); ok && len(no.OwnerReferences) > 0 {
				t.Errorf("the Node got owner references: %+v", no.OwnerReferences)
			}
		case ev, ok := <-leaseWatch.ResultChan():
			if !ok {
				t.Fatal("lease watch closed early")
			}
			if ev.Type == watch.Deleted {
				t.Fatalf("the Lease was deleted after the attack")
			}
		case <-window:
			done = true
		}
	}
	if _, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("the Node after the window: %v", err)
	}
	if _, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("the Lease after the window: %v", err)
	}
}

// TestSecurityBadParameters is issue 10 defect 5 against the real binary:
// query parameters and bodies kube-apiserver refuses get its code and
// reason over raw HTTPS with the administrator's credentials, never a 500
// and never a silent 200; nothing is written.
func TestSecurityBadParameters(t *testing.T) {
	s := startServer(t, serverOptions{apiOnly: true})
	hc := s.httpClient()
	cs := s.client()
	ctx := context.Background()
	const (
		name     = "bp-node"
		nodePath = "/api/v1/nodes/" + name
		merge    = "application/merge-patch+json"
	)
	n, err := cs.CoreV1().Nodes().Create(ctx, testNode(name, map[string]string{"role": "original"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
	withUID := n.DeepCopy()
	withUID.UID = "not-the-uid"
	withUID.Labels = map[string]string{"role": "replaced"}
	fresh := testNode("bp-new", nil)
	fresh.TypeMeta = n.TypeMeta

	tests := []struct {
		name   string
		method string
		path   string
		// body is sent as JSON (a merge patch for PATCH) when not nil.
		body   []byte
		code   int
		reason metav1.StatusReason
		msg    string
	}{
		{"a negative limit lists everything, as upstream", "GET", "/api/v1/nodes?limit=-1", nil, 200, "", ""},
		{"a limit that is not a number is a bad request", "GET", "/api/v1/nodes?limit=x", nil, 400, metav1.StatusReasonBadRequest, ""},
		{"an unknown resourceVersionMatch is invalid", "GET", "/api/v1/nodes?resourceVersion=1&resourceVersionMatch=Bogus", nil, 422, metav1.StatusReasonInvalid,
			`resourceVersionMatch: Unsupported value: "Bogus"`},
		{"resourceVersionMatch without a resourceVersion is invalid", "GET", "/api/v1/nodes?resourceVersionMatch=NotOlderThan", nil, 422, metav1.StatusReasonInvalid,
			"resourceVersionMatch is forbidden unless resourceVersion is provided"},
		{"sendInitialEvents on a list is invalid", "GET", "/api/v1/nodes?sendInitialEvents=true", nil, 422, metav1.StatusReasonInvalid, "sendInitialEvents is forbidden for list"},
		{"a watch with a match but no sendInitialEvents is invalid", "GET", "/api/v1/nodes?watch=1&resourceVersion=1&resourceVersionMatch=NotOlderThan", nil, 422, metav1.StatusReasonInvalid,
			"resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"},
		{"a continue token we did not issue is a bad request", "GET", "/api/v1/nodes?limit=1&continue=bogus", nil, 400, metav1.StatusReasonBadRequest, ""},
		{"a get at a resourceVersion that is not a number is a bad request", "GET", nodePath + "?resourceVersion=abc", nil, 400, metav1.StatusReasonBadRequest, "invalid resource version"},
		{"a field selector on an unknown field is a bad request", "GET", "/api/v1/nodes?fieldSelector=spec.bogus%3Dx", nil, 400, metav1.StatusReasonBadRequest, "field label not supported"},
		{"an unknown fieldValidation on create is invalid", "POST", "/api/v1/nodes?fieldValidation=Loose", mustJSON(t, fresh), 422, metav1.StatusReasonInvalid, "fieldValidation: Unsupported value"},
		{"an unknown dryRun on create is invalid", "POST", "/api/v1/nodes?dryRun=Bogus", mustJSON(t, fresh), 422, metav1.StatusReasonInvalid, "dryRun: Unsupported value"},
		{"an update naming another uid fails its precondition", "PUT", nodePath, mustJSON(t, withUID), 409, metav1.StatusReasonConflict,
			"Precondition failed: UID in precondition: not-the-uid, UID in object meta: " + string(n.UID)},
		{"a merge patch may not change the uid", "PATCH", nodePath, []byte(`{"metadata":{"uid":"not-the-uid","labels":{"role":"patched"}}}`), 422, metav1.StatusReasonInvalid,
			`metadata.uid: Invalid value: "not-the-uid": field is immutable`},
		{"force on a merge patch is invalid", "PATCH", nodePath + "?force=true", []byte(`{"metadata":{"labels":{"role":"forced"}}}`), 422, metav1.StatusReasonInvalid,
			"force: Forbidden: may not be specified for non-apply patch"},
		{"an unknown propagationPolicy is invalid", "DELETE", nodePath + "?propagationPolicy=Bogus", nil, 422, metav1.StatusReasonInvalid, "propagationPolicy: Unsupported value"},
		{"orphanDependents with a propagationPolicy is invalid", "DELETE", nodePath + "?propagationPolicy=Orphan&orphanDependents=true", nil, 422, metav1.StatusReasonInvalid, "cannot be both set"},
		{"gracePeriodSeconds that is not a number is a bad request", "DELETE", nodePath + "?gracePeriodSeconds=soon", nil, 400, metav1.StatusReasonBadRequest, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := s.snapshot(t, hc, nodePath, "/api/v1/nodes/bp-new")
			var headers []string
			if tt.body != nil {
				ct := jsonCT
				if tt.method == http.MethodPatch {
					ct = merge
				}
				headers = []string{"Content-Type", ct}
			}
			resp := s.do(t, hc, tt.method, tt.path, tt.body, headers...)
			if tt.reason == "" {
				if resp.code != tt.code {
					t.Fatalf("got %v, want %d", resp, tt.code)
				}
			} else {
				st := wantStatus(t, resp, tt.code, tt.reason)
				if !strings.Contains(st.Message, tt.msg) {
					t.Errorf("got message %q, want it to contain %q", st.Message, tt.msg)
				}
			}
			snap.unchanged(t)
		})
	}
}
