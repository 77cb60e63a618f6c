package replicaset_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeplane/nodeplane/internal/controller/manager"
	"github.com/nodeplane/nodeplane/internal/controller/replicaset"
)

// fakeClient is a fake clientset that names and numbers created objects
// as the API server would (generateName, uid).
func fakeClient() *fake.Clientset {
	c := fake.NewClientset()
	var n atomic.Int64
	c.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj, ok := a.(k8stesting.CreateAction).GetObject().(metav1.Object)
		if !ok {
			return false, nil, nil
		}
		i := n.Add(1)
		if obj.GetName() == "" && obj.GetGenerateName() != "" {
			obj.SetName(fmt.Sprintf("%s%05d", obj.GetGenerateName(), i))
		}
		if obj.GetUID() == "" {
			obj.SetUID(types.UID(fmt.Sprintf("uid-%d", i)))
		}
		return false, nil, nil
	})
	return c
}

func startController(t *testing.T, ctx context.Context, c *fake.Clientset, ctrls ...manager.Controller) {
	t.Helper()
	term := &manager.Term{Informers: informers.NewSharedInformerFactory(c, 0)}
	for _, ctrl := range ctrls {
		if err := ctrl.Prepare(term); err != nil {
			t.Fatal(err)
		}
	}
	term.Informers.Start(ctx.Done())
	term.Informers.WaitForCacheSync(ctx.Done())
	for _, ctrl := range ctrls {
		go ctrl.Run(ctx)
	}
	t.Cleanup(term.Informers.Shutdown)
}

// eventually waits (at most 10 s) for cond to hold.
func eventually(t *testing.T, ctx context.Context, what string, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return cond() })
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func ownedPods(ctx context.Context, c *fake.Clientset, owner types.UID) ([]corev1.Pod, error) {
	list, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == owner {
			out = append(out, p)
		}
	}
	return out, nil
}

func TestControllerKeepsThePodCount(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := fakeClient()
	startController(t, ctx, c, replicaset.NewController(replicaset.Config{Client: c}))

	rs := mkRS("web", 3)
	rs.Generation = 1
	if _, err := c.AppsV1().ReplicaSets("default").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "three pods and status.replicas 3", func() (bool, error) {
		pods, err := ownedPods(ctx, c, rs.UID)
		if err != nil || len(pods) != 3 {
			return false, err
		}
		cur, err := c.AppsV1().ReplicaSets("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && cur.Status.Replicas == 3 && cur.Status.ObservedGeneration == 1, err
	})
	pods, _ := ownedPods(ctx, c, rs.UID)
	for _, p := range pods {
		if p.GenerateName != "web-" || p.Labels["app"] != "web" {
			t.Errorf("pod %s: generateName %q labels %v", p.Name, p.GenerateName, p.Labels)
		}
	}
	gone := pods[0]
	if err := c.CoreV1().Pods("default").Delete(ctx, gone.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "the deleted pod replaced", func() (bool, error) {
		pods, err := ownedPods(ctx, c, rs.UID)
		if err != nil || len(pods) != 3 {
			return false, err
		}
		for _, p := range pods {
			if p.UID == gone.UID {
				return false, nil
			}
		}
		return true, nil
	})

	// An orphan with the labels is adopted, and one pod too many goes.
	stray := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stray", Namespace: "default", Labels: map[string]string{"app": "web"}}}
	if _, err := c.CoreV1().Pods("default").Create(ctx, stray, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "the orphan adopted and the count back at three", func() (bool, error) {
		p, err := c.CoreV1().Pods("default").Get(ctx, "stray", metav1.GetOptions{})
		adopted := err == nil && metav1.GetControllerOf(p) != nil && metav1.GetControllerOf(p).UID == rs.UID
		// The unbound, unready orphan is the first victim: gone also counts.
		pods, lerr := ownedPods(ctx, c, rs.UID)
		return (adopted || err != nil) && lerr == nil && len(pods) == 3, lerr
	})

	// Scaling down deletes. The fake's UpdateStatus writes the whole
	// object (no status subresource), so a status write racing the scale
	// can undo it: scale again until it sticks.
	eventually(t, ctx, "scaled down to one pod", func() (bool, error) {
		cur, err := c.AppsV1().ReplicaSets("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if *cur.Spec.Replicas != 1 {
			one := int32(1)
			cur.Spec.Replicas = &one
			_, err := c.AppsV1().ReplicaSets("default").Update(ctx, cur, metav1.UpdateOptions{})
			return false, err
		}
		pods, err := ownedPods(ctx, c, rs.UID)
		return err == nil && len(pods) == 1, err
	})
}
