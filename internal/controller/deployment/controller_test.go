package deployment_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeplane/nodeplane/internal/controller/deployment"
	"github.com/nodeplane/nodeplane/internal/controller/manager"
	"github.com/nodeplane/nodeplane/internal/controller/replicaset"
)

// TestControllerRollsOut runs the Deployment and ReplicaSet controllers
// against a fake clientset, playing the node agent by marking pods ready.
func TestControllerRollsOut(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := fake.NewClientset()
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
	// The fake's UpdateStatus would write the whole object, and so undo a
	// spec change made since the controller read it (a real server keeps
	// the spec on a status write): keep the stored spec, take the status
	// and the annotations (the controller's revision).
	c.PrependReactor("update", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.UpdateAction)
		if u.GetSubresource() != "status" {
			return false, nil, nil
		}
		in := u.GetObject().(*appsv1.Deployment)
		stored, err := c.Tracker().Get(a.GetResource(), a.GetNamespace(), in.Name)
		if err != nil {
			return true, nil, err
		}
		cur := stored.(*appsv1.Deployment).DeepCopy()
		cur.Status, cur.Annotations = in.Status, in.Annotations
		if err := c.Tracker().Update(a.GetResource(), cur, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, cur, nil
	})
	term := &manager.Term{Informers: informers.NewSharedInformerFactory(c, 0)}
	ctrls := []manager.Controller{deployment.NewController(deployment.Config{Client: c}), replicaset.NewController(replicaset.Config{Client: c})}
	for _, ctrl := range ctrls {
		if err := ctrl.Prepare(term); err != nil {
			t.Fatal(err)
		}
	}
	term.Informers.Start(ctx.Done())
	defer func() {
		cancel()
		term.Informers.Shutdown()
	}()
	term.Informers.WaitForCacheSync(ctx.Done())
	for _, ctrl := range ctrls {
		go ctrl.Run(ctx)
	}

	d := newDeployment(2)
	if _, err := c.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rolledOutWith := func(image string) func() (bool, error) {
		return func() (bool, error) {
			markPodsReady(ctx, c)
			cur, err := c.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if cur.Spec.Template.Spec.Containers[0].Image != image {
				cur.Spec.Template.Spec.Containers[0].Image = image
				cur.Generation++
				_, err := c.AppsV1().Deployments("default").Update(ctx, cur, metav1.UpdateOptions{})
				return false, err
			}
			return rolledOut(cur) == "successfully rolled out" && condition(cur, appsv1.DeploymentProgressing) != nil &&
				condition(cur, appsv1.DeploymentProgressing).Reason == "NewReplicaSetAvailable", nil
		}
	}
	eventually(t, ctx, "first rollout", rolledOutWith("v1"))
	eventually(t, ctx, "second rollout", rolledOutWith("v2"))

	cur, _ := c.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
	if cur.Annotations["deployment.kubernetes.io/revision"] != "2" {
		t.Errorf("deployment revision %q, want 2", cur.Annotations["deployment.kubernetes.io/revision"])
	}
	sets, _ := c.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{})
	if len(sets.Items) != 2 {
		t.Fatalf("got %d replica sets, want 2", len(sets.Items))
	}
	for _, rs := range sets.Items {
		want := int32(0)
		if deployment.SameTemplate(&rs.Spec.Template, &cur.Spec.Template) {
			want = 2
			if rs.Name != "web-"+rs.Labels["pod-template-hash"] || rs.Annotations["deployment.kubernetes.io/revision"] != "2" {
				t.Errorf("new replica set %s: labels %v annotations %v", rs.Name, rs.Labels, rs.Annotations)
			}
		}
		if *rs.Spec.Replicas != want {
			t.Errorf("%s: %d replicas, want %d", rs.Name, *rs.Spec.Replicas, want)
		}
	}
}

// markPodsReady plays the node agent: every pod not yet ready becomes
// Running and Ready.
func markPodsReady(ctx context.Context, c *fake.Clientset) {
	pods, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		if len(p.Status.Conditions) > 0 {
			continue
		}
		p.Spec.NodeName = "n1"
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		_, _ = c.CoreV1().Pods("default").UpdateStatus(ctx, &p, metav1.UpdateOptions{})
	}
}

func eventually(t *testing.T, ctx context.Context, what string, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return cond() })
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
