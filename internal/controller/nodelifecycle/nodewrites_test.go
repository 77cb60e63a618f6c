package nodelifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestWriteUnknownAfterAConflict: the first status write conflicts, so the
// controller re-reads the node; what it then writes depends on what the node
// has become meanwhile.
func TestWriteUnknownAfterAConflict(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	judgedBeat := now.Add(-time.Minute)
	node := func(status corev1.ConditionStatus, beat time.Time, labels map[string]string) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: labels, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: status, LastHeartbeatTime: metav1.NewTime(beat),
				LastTransitionTime: metav1.NewTime(now.Add(-time.Hour)),
			}}},
		}
	}
	cases := []struct {
		name       string
		stored     *corev1.Node // what the re-read finds
		wantErr    error
		wantWrites int
		wantReady  corev1.ConditionStatus
	}{
		{name: "a node another writer already marked Unknown is left alone",
			stored: node(corev1.ConditionUnknown, judgedBeat, nil), wantWrites: 1, wantReady: corev1.ConditionUnknown},
		{name: "a node that posted Ready since it was judged is not marked Unknown",
			stored: node(corev1.ConditionTrue, now.Add(-time.Second), nil), wantErr: errNodeReported, wantWrites: 1, wantReady: corev1.ConditionTrue},
		{name: "a conflict with an unrelated change is written again on the fresh node",
			stored: node(corev1.ConditionTrue, judgedBeat, map[string]string{"changed": "yes"}), wantWrites: 2, wantReady: corev1.ConditionUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(tc.stored)
			writes := 0
			client.PrependReactor("update", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "status" {
					return false, nil, nil
				}
				writes++
				if writes == 1 {
					return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n1", errors.New("changed"))
				}
				return false, nil, nil
			})
			c := &Controller{cfg: ShellConfig{Client: client, Clock: clocktesting.NewFakeClock(now)}}
			judged := MarkUnknown(node(corev1.ConditionTrue, judgedBeat, nil), now)
			err := c.writeUnknown(context.Background(), judged)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("writeUnknown: %v, want %v", err, tc.wantErr)
			}
			if writes != tc.wantWrites {
				t.Errorf("%d status writes, want %d", writes, tc.wantWrites)
			}
			got, err := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if r := readyCondition(got); r == nil || r.Status != tc.wantReady {
				t.Errorf("stored Ready %+v, want %s", r, tc.wantReady)
			}
		})
	}
}

// TestATaintWriteStartsFromTheCachedNode: a taint write reads the Node from
// the API only when the informer's copy is not the latest (the write
// conflicts) or is missing; the cached Node itself is never modified.
func TestATaintWriteStartsFromTheCachedNode(t *testing.T) {
	taint := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
	node := func(rv string, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: rv}, Spec: corev1.NodeSpec{Taints: taints}}
	}
	cases := []struct {
		name               string
		cached             *corev1.Node // nil: the informer does not have it
		stored             *corev1.Node
		wantGets, wantPuts int
	}{
		{name: "the latest node in the cache is written without a read", cached: node("2"), stored: node("2"), wantGets: 0, wantPuts: 1},
		{name: "a stale cached node conflicts and the node is read once", cached: node("1"), stored: node("2"), wantGets: 1, wantPuts: 2},
		{name: "a node missing from the cache is read from the API", stored: node("2"), wantGets: 1, wantPuts: 1},
		{name: "a stale cached node that already shows the change writes nothing", cached: node("1", taint), stored: node("2"), wantGets: 0, wantPuts: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(tc.stored)
			gets, puts := 0, 0
			client.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				gets++
				return false, nil, nil
			})
			client.PrependReactor("update", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
				puts++
				sent := a.(k8stesting.UpdateAction).GetObject().(*corev1.Node)
				if sent.ResourceVersion != tc.stored.ResourceVersion {
					return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n1", errors.New("changed"))
				}
				return false, nil, nil
			})
			idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			if tc.cached != nil {
				if err := idx.Add(tc.cached); err != nil {
					t.Fatal(err)
				}
			}
			var cachedTaints int
			if tc.cached != nil {
				cachedTaints = len(tc.cached.Spec.Taints)
			}
			c := &Controller{cfg: ShellConfig{Client: client}, nodes: corelisters.NewNodeLister(idx)}
			if err := c.updateTaints(context.Background(), "n1", []corev1.Taint{taint}, nil); err != nil {
				t.Fatalf("updateTaints: %v", err)
			}
			if gets != tc.wantGets || puts != tc.wantPuts {
				t.Errorf("%d reads and %d writes of the node, want %d and %d", gets, puts, tc.wantGets, tc.wantPuts)
			}
			if tc.cached != nil && len(tc.cached.Spec.Taints) != cachedTaints {
				t.Errorf("the cached node was modified: %+v", tc.cached.Spec.Taints)
			}
			if tc.wantPuts > 0 {
				got, err := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if len(got.Spec.Taints) != 1 || got.Spec.Taints[0].Key != taint.Key {
					t.Errorf("stored taints %+v, want the not-ready taint", got.Spec.Taints)
				}
			}
		})
	}
}

// TestPutStatusThroughTheRESTClient: with a real client the status write
// is a PUT of the node to its status subresource, its answer is not needed,
// and a refusal keeps its meaning (a conflict is a conflict, so
// writeUnknown re-reads the node).
func TestPutStatusThroughTheRESTClient(t *testing.T) {
	var puts atomic.Int32
	var conflict atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut || r.URL.Path != "/api/v1/nodes/n1/status" {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
			return
		}
		var n corev1.Node
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil || n.Name != "n1" || readyStatus(&n) != corev1.ConditionUnknown {
			http.Error(w, fmt.Sprintf("body: %v %+v", err, n.Status), http.StatusBadRequest)
			return
		}
		puts.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if conflict.Load() {
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n1", errors.New("changed")).ErrStatus)
			return
		}
		_ = json.NewEncoder(w).Encode(n)
	}))
	defer srv.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	c := &Controller{cfg: ShellConfig{Client: client, Clock: clocktesting.NewFakeClock(now)}}
	node := MarkUnknown(&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}, now)
	if err := c.putStatus(t.Context(), node); err != nil {
		t.Fatalf("putStatus: %v", err)
	}
	conflict.Store(true)
	if err := c.putStatus(t.Context(), node); !apierrors.IsConflict(err) {
		t.Fatalf("putStatus against a conflict: %v, want a conflict", err)
	}
	if n := puts.Load(); n != 2 {
		t.Errorf("%d PUTs of the status, want 2", n)
	}
}
