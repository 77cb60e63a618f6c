package daemonset_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
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

	"github.com/nodeplane/nodeplane/internal/controller/daemonset"
	"github.com/nodeplane/nodeplane/internal/controller/manager"
)

// TestControllerRunsOnePodPerNode runs the controller against a fake
// clientset.
func TestControllerRunsOnePodPerNode(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c := fake.NewClientset(
		mkNode("n1"), mkNode("n2", cordoned), mkNode("n3", taint("dedicated", corev1.TaintEffectNoExecute)),
	)
	var n atomic.Int64
	c.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if obj, ok := a.(k8stesting.CreateAction).GetObject().(metav1.Object); ok {
			i := n.Add(1)
			if obj.GetName() == "" {
				obj.SetName(fmt.Sprintf("%s%05d", obj.GetGenerateName(), i))
			}
			if obj.GetUID() == "" {
				obj.SetUID(types.UID(fmt.Sprintf("uid-%d", i)))
			}
		}
		return false, nil, nil
	})
	term := &manager.Term{Informers: informers.NewSharedInformerFactory(c, 0)}
	ctrl := daemonset.NewController(daemonset.Config{Client: c})
	if err := ctrl.Prepare(term); err != nil {
		t.Fatal(err)
	}
	term.Informers.Start(ctx.Done())
	defer func() {
		cancel()
		term.Informers.Shutdown()
	}()
	term.Informers.WaitForCacheSync(ctx.Done())
	go ctrl.Run(ctx)

	ds := mkDS()
	if _, err := c.AppsV1().DaemonSets("kube-system").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	podsOn := func() (map[string]corev1.Pod, string) {
		list, err := c.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err.Error()
		}
		out := map[string]corev1.Pod{}
		var nodes []string
		for _, p := range list.Items {
			out[p.Spec.NodeName] = p
			nodes = append(nodes, p.Spec.NodeName)
		}
		sort.Strings(nodes)
		return out, strings.Join(nodes, ",")
	}
	waitFor := func(what, want string) {
		t.Helper()
		var got string
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			_, got = podsOn()
			return got == want, nil
		})
		if err != nil {
			t.Fatalf("%s: pods on %q, want %q", what, got, want)
		}
	}
	waitFor("a pod on the plain and the cordoned node", "n1,n2")
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		cur, err := c.AppsV1().DaemonSets("kube-system").Get(ctx, "agent", metav1.GetOptions{})
		return err == nil && cur.Status.DesiredNumberScheduled == 2 && cur.Status.CurrentNumberScheduled == 2 && cur.Status.ObservedGeneration == 3, err
	})
	if err != nil {
		t.Fatalf("status: %v", err)
	}

	if _, err := c.CoreV1().Nodes().Create(ctx, mkNode("n4"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("a new node gets its pod", "n1,n2,n4")

	pods, _ := podsOn()
	failed := pods["n1"]
	failed.Status.Phase = corev1.PodFailed
	if _, err := c.CoreV1().Pods("kube-system").UpdateStatus(ctx, &failed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		pods, got := podsOn()
		return got == "n1,n2,n4" && pods["n1"].UID != failed.UID, nil
	})
	if err != nil {
		t.Fatalf("the failed pod was not replaced: %v", err)
	}
}
