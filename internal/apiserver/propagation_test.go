package apiserver

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestGCFinalizers(t *testing.T) {
	const (
		orphan     = metav1.FinalizerOrphanDependents
		foreground = metav1.FinalizerDeleteDependents
		other      = "example.com/hold"
	)
	policy := func(p metav1.DeletionPropagation) *metav1.DeleteOptions {
		return &metav1.DeleteOptions{PropagationPolicy: &p}
	}
	orphanDependents := func(b bool) *metav1.DeleteOptions { return &metav1.DeleteOptions{OrphanDependents: &b} }
	for _, tc := range []struct {
		name        string
		current     []string
		opts        *metav1.DeleteOptions
		want        []string
		wantChanged bool
	}{
		{"a delete without a policy adds nothing", nil, &metav1.DeleteOptions{}, nil, false},
		{"a background delete adds nothing", nil, policy(metav1.DeletePropagationBackground), nil, false},
		{"a foreground delete adds foregroundDeletion", nil, policy(metav1.DeletePropagationForeground), []string{foreground}, true},
		{"an orphan delete adds orphan", nil, policy(metav1.DeletePropagationOrphan), []string{orphan}, true},
		{"orphanDependents=true adds orphan", nil, orphanDependents(true), []string{orphan}, true},
		{"orphanDependents=false removes orphan", []string{orphan}, orphanDependents(false), []string{}, true},
		{"a foreground delete keeps other finalizers", []string{other}, policy(metav1.DeletePropagationForeground), []string{other, foreground}, true},
		{"a foreground delete replaces orphan", []string{orphan, other}, policy(metav1.DeletePropagationForeground), []string{other, foreground}, true},
		{"a background delete removes foregroundDeletion", []string{foreground, other}, policy(metav1.DeletePropagationBackground), []string{other}, true},
		{"a delete without a policy keeps the finalizer a client set", []string{orphan}, &metav1.DeleteOptions{}, []string{orphan}, false},
		{"a repeated foreground delete changes nothing", []string{foreground}, policy(metav1.DeletePropagationForeground), []string{foreground}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := gcFinalizers(tc.current, tc.opts)
			if changed != tc.wantChanged || !slices.Equal(got, tc.want) && (len(got) != 0 || len(tc.want) != 0) {
				t.Errorf("got %v (changed %v), want %v (changed %v)", got, changed, tc.want, tc.wantChanged)
			}
		})
	}
}

// TestDeletePropagation runs deletes with each propagation policy through
// the real handler: Foreground and Orphan leave the object, marked
// deleted, with the finalizer the garbage collector acts on; removing the
// finalizer completes the delete.
func TestDeletePropagation(t *testing.T) {
	_, h := newTestServer(t, Config{})
	type deleted struct {
		finalizers []string
		gone       bool
	}
	get := func(t *testing.T, name string) (*appsv1.ReplicaSet, bool) {
		t.Helper()
		resp := do(t, h, admin, http.MethodGet, replicaSetsPath+"/"+name, nil)
		if resp.code == http.StatusNotFound {
			return nil, false
		}
		if resp.code != http.StatusOK {
			t.Fatalf("get %s: %d %s", name, resp.code, resp.body)
		}
		return decode[appsv1.ReplicaSet](t, resp), true
	}
	for i, tc := range []struct {
		name       string
		finalizers []string
		query      string
		body       any
		want       deleted
	}{
		{name: "a delete without options removes the object at once", want: deleted{gone: true}},
		{name: "a background delete removes the object at once", query: "?propagationPolicy=Background", want: deleted{gone: true}},
		{name: "a foreground delete leaves it with foregroundDeletion", body: map[string]string{"propagationPolicy": "Foreground"},
			want: deleted{finalizers: []string{metav1.FinalizerDeleteDependents}}},
		{name: "an orphan delete leaves it with orphan", query: "?propagationPolicy=Orphan",
			want: deleted{finalizers: []string{metav1.FinalizerOrphanDependents}}},
		{name: "orphanDependents=true leaves it with orphan", body: map[string]any{"orphanDependents": true},
			want: deleted{finalizers: []string{metav1.FinalizerOrphanDependents}}},
		{name: "a background delete of an object holding orphan removes it at once", finalizers: []string{metav1.FinalizerOrphanDependents},
			query: "?propagationPolicy=Background", want: deleted{gone: true}},
		{name: "a foreground delete keeps another finalizer", finalizers: []string{"example.com/hold"}, query: "?propagationPolicy=Foreground",
			want: deleted{finalizers: []string{"example.com/hold", metav1.FinalizerDeleteDependents}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("rs-%d", i)
			rs := testReplicaSet(name)
			rs.Finalizers = tc.finalizers
			mustDo(t, h, admin, http.MethodPost, replicaSetsPath, rs, http.StatusCreated)
			mustDo(t, h, admin, http.MethodDelete, replicaSetsPath+"/"+name+tc.query, tc.body, http.StatusOK)
			got, exists := get(t, name)
			if exists == tc.want.gone {
				t.Fatalf("exists: got %v, want %v", exists, !tc.want.gone)
			}
			if !exists {
				return
			}
			if got.DeletionTimestamp == nil || got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 0 {
				t.Errorf("got deletionTimestamp %v grace %v, want set and 0", got.DeletionTimestamp, got.DeletionGracePeriodSeconds)
			}
			if !slices.Equal(got.Finalizers, tc.want.finalizers) {
				t.Errorf("finalizers: got %v, want %v", got.Finalizers, tc.want.finalizers)
			}
		})
	}

	t.Run("removing the finalizer, as the collector does, completes a foreground delete", func(t *testing.T) {
		mustDo(t, h, admin, http.MethodPost, replicaSetsPath, testReplicaSet("fg"), http.StatusCreated)
		mustDo(t, h, admin, http.MethodDelete, replicaSetsPath+"/fg?propagationPolicy=Foreground", nil, http.StatusOK)
		mustDo(t, h, admin, http.MethodPatch, replicaSetsPath+"/fg", map[string]any{"metadata": map[string]any{"finalizers": nil}}, http.StatusOK)
		if _, exists := get(t, "fg"); exists {
			t.Error("the replica set still exists")
		}
	})

	t.Run("a background delete after a foreground one removes the object", func(t *testing.T) {
		mustDo(t, h, admin, http.MethodPost, replicaSetsPath, testReplicaSet("switch"), http.StatusCreated)
		mustDo(t, h, admin, http.MethodDelete, replicaSetsPath+"/switch?propagationPolicy=Foreground", nil, http.StatusOK)
		mustDo(t, h, admin, http.MethodDelete, replicaSetsPath+"/switch?propagationPolicy=Background", nil, http.StatusOK)
		if _, exists := get(t, "switch"); exists {
			t.Error("the replica set still exists")
		}
	})

	t.Run("a dry-run foreground delete stores nothing", func(t *testing.T) {
		mustDo(t, h, admin, http.MethodPost, replicaSetsPath, testReplicaSet("dry"), http.StatusCreated)
		out := decode[appsv1.ReplicaSet](t, mustDo(t, h, admin, http.MethodDelete, replicaSetsPath+"/dry?propagationPolicy=Foreground&dryRun=All", nil, http.StatusOK))
		if !slices.Contains(out.Finalizers, metav1.FinalizerDeleteDependents) {
			t.Errorf("answer's finalizers: got %v, want foregroundDeletion", out.Finalizers)
		}
		got, exists := get(t, "dry")
		if !exists || got.DeletionTimestamp != nil || len(got.Finalizers) != 0 {
			t.Errorf("stored: got %+v, want untouched", got)
		}
	})

	t.Run("a pod in its grace period keeps its finalizers on a second delete", func(t *testing.T) {
		mustDo(t, h, admin, http.MethodPost, "/api/v1/namespaces/default/pods", testPod("p", "n1"), http.StatusCreated)
		mustDo(t, h, admin, http.MethodDelete, "/api/v1/namespaces/default/pods/p?propagationPolicy=Foreground", nil, http.StatusOK)
		mustDo(t, h, admin, http.MethodDelete, "/api/v1/namespaces/default/pods/p?propagationPolicy=Orphan", nil, http.StatusOK)
		p := decode[corev1.Pod](t, mustDo(t, h, admin, http.MethodGet, "/api/v1/namespaces/default/pods/p", nil, http.StatusOK))
		if !slices.Equal(p.Finalizers, []string{metav1.FinalizerDeleteDependents}) || p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != 30 {
			t.Errorf("got finalizers %v grace %v, want [foregroundDeletion] and 30", p.Finalizers, p.DeletionGracePeriodSeconds)
		}
	})
}
