package ownership_test

import (
	"context"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeplane/nodeplane/internal/controller/ownership"
)

var kind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")

func owner(name, uid string, sel map[string]string) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)},
		Spec:       appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}},
	}
}

func pod(name string, lbl map[string]string, ctrl *appsv1.ReplicaSet) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Labels: lbl}}
	if ctrl != nil {
		p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(ctrl, kind)}
	}
	return p
}

func TestHandlers(t *testing.T) {
	web := owner("web", "u-web", map[string]string{"app": "web"})
	db := owner("db", "u-db", map[string]string{"app": "db"})
	stale := owner("web", "u-old", nil) // same name, another UID
	now := metav1.Now()
	going := pod("going", map[string]string{"app": "web"}, web)
	going.DeletionTimestamp = &now
	tests := []struct {
		name string
		do   func(h *ownership.Handlers[*appsv1.ReplicaSet])
		want []string
	}{
		{name: "an added pod wakes its controller", do: func(h *ownership.Handlers[*appsv1.ReplicaSet]) { h.OnAdd(pod("p", nil, web)) }, want: []string{"ns/web"}},
		{name: "an added orphan wakes every owner whose selector matches it", do: func(h *ownership.Handlers[*appsv1.ReplicaSet]) {
			h.OnAdd(pod("p", map[string]string{"app": "db"}, nil))
		}, want: []string{"ns/db"}},
		{name: "a pod whose controller has another UID wakes nobody", do: func(h *ownership.Handlers[*appsv1.ReplicaSet]) { h.OnAdd(pod("p", nil, stale)) }},
		{name: "a pod added while being deleted counts as a deletion", do: func(h *ownership.Handlers[*appsv1.ReplicaSet]) { h.OnAdd(going) }, want: []string{"ns/web"}},
		{name: "a change of controller wakes the old and the new one", do: func(h *ownership.Handlers[*appsv1.ReplicaSet]) {
			h.OnUpdate(pod("p", nil, web), pod("p", nil, db))
		}, want: []string{"ns/db", "ns/web"}},
		{name: "a relabelled orphan wakes the owners that match it now", do: func(h *ownership.Handlers[*appsv1.ReplicaSet]) {
			h.OnUpdate(pod("p", map[string]string{"app": "x"}, nil), pod("p", map[string]string{"app": "web"}, nil))
		}, want: []string{"ns/web"}},
		{name: "an orphan updated without a label change wakes nobody", do: func(h *ownership.Handlers[*appsv1.ReplicaSet]) {
			h.OnUpdate(pod("p", map[string]string{"app": "web"}, nil), pod("p", map[string]string{"app": "web"}, nil))
		}},
		{name: "a tombstone wakes the controller of the pod it holds", do: func(h *ownership.Handlers[*appsv1.ReplicaSet]) {
			h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: pod("p", nil, db)})
		}, want: []string{"ns/db"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			owners := map[string]*appsv1.ReplicaSet{"web": web, "db": db}
			var got []string
			h := &ownership.Handlers[*appsv1.ReplicaSet]{
				Kind: kind,
				Get: func(_, name string) (*appsv1.ReplicaSet, error) {
					if o, ok := owners[name]; ok {
						return o, nil
					}
					return nil, apierrors.NewNotFound(appsv1.Resource("replicasets"), name)
				},
				List:     func(string) ([]*appsv1.ReplicaSet, error) { return []*appsv1.ReplicaSet{web, db}, nil },
				Selector: func(rs *appsv1.ReplicaSet) *metav1.LabelSelector { return rs.Spec.Selector },
				Enqueue:  func(k string) { got = append(got, k) },
			}
			tt.do(h)
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("enqueued %v, want %v", got, tt.want)
			}
		})
	}
}

func TestWriteStatus(t *testing.T) {
	tests := []struct {
		name      string
		conflicts int
		wantErr   bool
		wantReady int32
	}{
		{name: "a write without conflict lands", wantReady: 3},
		{name: "one conflict re-reads and writes again", conflicts: 1, wantReady: 3},
		{name: "a second conflict is returned", conflicts: 2, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := owner("web", "u-web", nil)
			c := fake.NewClientset(rs)
			left := tt.conflicts
			c.PrependReactor("update", "replicasets", func(k8stesting.Action) (bool, runtime.Object, error) {
				if left > 0 {
					left--
					return true, nil, apierrors.NewConflict(appsv1.Resource("replicasets"), "web", nil)
				}
				return false, nil, nil
			})
			client := c.AppsV1().ReplicaSets("ns")
			err := ownership.WriteStatus(context.Background(), rs.DeepCopy(), func(rs *appsv1.ReplicaSet) { rs.Status.ReadyReplicas = 3 }, client.Get, client.UpdateStatus)
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v, want error %v", err, tt.wantErr)
			}
			got, _ := client.Get(context.Background(), "web", metav1.GetOptions{})
			if got.Status.ReadyReplicas != tt.wantReady {
				t.Errorf("readyReplicas %d, want %d", got.Status.ReadyReplicas, tt.wantReady)
			}
		})
	}
}
