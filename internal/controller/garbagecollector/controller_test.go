package garbagecollector

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"testing"
	"testing/synctest"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeplane/nodeplane/internal/controller/manager"
)

// These tests run the shell against client-go's fake clientset inside a
// synctest bubble: informers, workers and the fake API run until nothing
// is left to do, then the test reads what the controller wrote. The fake
// API deletes at once and ignores finalizers and propagation policies;
// the API server's side of propagation is tested in package apiserver.

func owner(kind, apiVersion, name string, uid types.UID, blocking bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, BlockOwnerDeletion: &blocking}
}

func rsRef(name string, uid types.UID) metav1.OwnerReference {
	return owner("ReplicaSet", "apps/v1", name, uid, true)
}

func testPod(name string, refs ...metav1.OwnerReference) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid"), OwnerReferences: refs}}
}

func testRS(name string, mutate ...func(*metav1.ObjectMeta)) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid")}}
	for _, m := range mutate {
		m(&rs.ObjectMeta)
	}
	return rs
}

func beingDeleted(finalizer string) func(*metav1.ObjectMeta) {
	return func(m *metav1.ObjectMeta) {
		now := metav1.Now()
		m.DeletionTimestamp = &now
		m.Finalizers = []string{finalizer}
	}
}

// runCollector runs the controller over objs until it is idle and returns
// the client to inspect, and the delete actions it sent.
func runCollector(t *testing.T, objs ...runtime.Object) (*fake.Clientset, []k8stesting.DeleteAction) {
	t.Helper()
	client := fake.NewClientset(objs...)
	var deletes []k8stesting.DeleteAction
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		term := &manager.Term{Informers: informers.NewSharedInformerFactory(client, 0)}
		c := New(Config{Client: client, Workers: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err := c.Prepare(term); err != nil {
			t.Fatal(err)
		}
		term.Informers.Start(ctx.Done())
		term.Informers.WaitForCacheSync(ctx.Done())
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.Run(ctx)
		}()
		synctest.Wait()
		cancel()
		<-done
		term.Informers.Shutdown()
	})
	for _, a := range client.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok {
			deletes = append(deletes, d)
		}
	}
	return client, deletes
}

func deletedNames(deletes []k8stesting.DeleteAction) []string {
	var out []string
	for _, d := range deletes {
		out = append(out, d.GetResource().Resource+"/"+d.GetName())
	}
	slices.Sort(out)
	return out
}

func TestCollectorBackground(t *testing.T) {
	nodeRef := owner("Node", "v1", "n1", "n1-uid", false)
	goneNodeRef := owner("Node", "v1", "n2", "n2-old-uid", false)
	client, deletes := runCollector(t,
		testRS("live"),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "n1-uid"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2", UID: "n2-new-uid"}}, // re-created: another UID
		testPod("owned", rsRef("live", "live-uid")),
		testPod("orphaned", rsRef("gone", "gone-uid")),
		testPod("recreated-owner", rsRef("live", "live-old-uid")),
		testPod("two-owners", rsRef("gone", "gone-uid"), rsRef("live", "live-uid")),
		testPod("statefulset", owner("StatefulSet", "apps/v1", "db", "db-uid", true)),
		testPod("unowned"),
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "kube-node-lease", UID: "l1", OwnerReferences: []metav1.OwnerReference{nodeRef}}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n2", Namespace: "kube-node-lease", UID: "l2", OwnerReferences: []metav1.OwnerReference{goneNodeRef}}},
	)
	t.Run("objects whose only owner is gone are deleted in the background, others kept", func(t *testing.T) {
		want := []string{"leases/n2", "pods/orphaned", "pods/recreated-owner"}
		if got := deletedNames(deletes); !slices.Equal(got, want) {
			t.Errorf("deleted: got %v, want %v", got, want)
		}
		for _, d := range deletes {
			opts := d.GetDeleteOptions()
			if opts.PropagationPolicy == nil || *opts.PropagationPolicy != metav1.DeletePropagationBackground || opts.Preconditions == nil || opts.Preconditions.UID == nil {
				t.Errorf("%s: got options %+v, want Background with a UID precondition", d.GetName(), opts)
			}
		}
	})
	t.Run("an object keeping an owner loses only the reference to the gone one", func(t *testing.T) {
		p, err := client.CoreV1().Pods("default").Get(context.Background(), "two-owners", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != "live-uid" {
			t.Errorf("owner references: got %+v, want only live", p.OwnerReferences)
		}
	})
}

func TestCollectorOrphan(t *testing.T) {
	client, deletes := runCollector(t,
		testRS("rs", beingDeleted(metav1.FinalizerOrphanDependents)),
		testPod("a", rsRef("rs", "rs-uid")),
		testPod("b", rsRef("rs", "rs-uid"), owner("DaemonSet", "apps/v1", "ds", "ds-uid", false)),
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "ds", Namespace: "default", UID: "ds-uid"}},
	)
	if len(deletes) != 0 {
		t.Errorf("deleted %v, want nothing", deletedNames(deletes))
	}
	for _, name := range []string{"a", "b"} {
		p, err := client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(p.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == "rs-uid" }) {
			t.Errorf("pod %s still references the replica set: %+v", name, p.OwnerReferences)
		}
	}
	rs, err := client.AppsV1().ReplicaSets("default").Get(context.Background(), "rs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Finalizers) != 0 {
		t.Errorf("finalizers: got %v, want none", rs.Finalizers)
	}
}

func TestCollectorForeground(t *testing.T) {
	client, deletes := runCollector(t,
		testRS("rs", beingDeleted(metav1.FinalizerDeleteDependents)),
		testPod("blocking", rsRef("rs", "rs-uid")),
		testPod("kept", rsRef("rs", "rs-uid"), rsRef("other", "other-uid")),
		testRS("other"),
	)
	t.Run("the dependents are deleted", func(t *testing.T) {
		if got, want := deletedNames(deletes), []string{"pods/blocking"}; !slices.Equal(got, want) {
			t.Errorf("deleted: got %v, want %v", got, want)
		}
	})
	t.Run("a dependent with another owner loses its reference instead", func(t *testing.T) {
		p, err := client.CoreV1().Pods("default").Get(context.Background(), "kept", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != "other-uid" {
			t.Errorf("owner references: got %+v, want only other", p.OwnerReferences)
		}
	})
	t.Run("then the owner's finalizer is removed", func(t *testing.T) {
		rs, err := client.AppsV1().ReplicaSets("default").Get(context.Background(), "rs", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs.Finalizers) != 0 {
			t.Errorf("finalizers: got %v, want none", rs.Finalizers)
		}
	})
	t.Run("the blocking pod is gone", func(t *testing.T) {
		_, err := client.CoreV1().Pods("default").Get(context.Background(), "blocking", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("get: got %v, want NotFound", err)
		}
	})
}

func TestCollectorForegroundCascade(t *testing.T) {
	deployment := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "web-uid"}}
	beingDeleted(metav1.FinalizerDeleteDependents)(&deployment.ObjectMeta)
	rs := testRS("web-1", func(m *metav1.ObjectMeta) {
		m.OwnerReferences = []metav1.OwnerReference{owner("Deployment", "apps/v1", "web", "web-uid", true)}
	})
	_, deletes := runCollector(t, deployment, rs, testPod("web-1-a", rsRef("web-1", "web-1-uid")))
	policies := map[string]metav1.DeletionPropagation{}
	for _, d := range deletes {
		if p := d.GetDeleteOptions().PropagationPolicy; p != nil {
			policies[d.GetResource().Resource+"/"+d.GetName()] = *p
		}
	}
	want := map[string]metav1.DeletionPropagation{
		// The replica set has dependents: deleted in the foreground so the
		// deployment waits for its pods too.
		"replicasets/web-1": metav1.DeletePropagationForeground,
		// The fake API deleted the replica set at once: its pod is then
		// collected in the background.
		"pods/web-1-a": metav1.DeletePropagationBackground,
	}
	if !reflect.DeepEqual(policies, want) {
		t.Errorf("deletes: got %v, want %v", policies, want)
	}
}
