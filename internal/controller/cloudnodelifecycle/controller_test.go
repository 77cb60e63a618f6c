package cloudnodelifecycle

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeplane/nodeplane/internal/controller/manager"
)

// answers is a fake provider: per node name, exists/shutdown or an error.
type answers map[string]struct {
	exists, shutdown bool
	err              error
}

func (a answers) InstanceExists(_ context.Context, n *corev1.Node) (bool, error) {
	x := a[n.Name]
	return x.exists, x.err
}

func (a answers) InstanceShutdown(_ context.Context, n *corev1.Node) (bool, error) {
	x := a[n.Name]
	return x.shutdown, x.err
}

func shellNode(name string, ready corev1.ConditionStatus, since time.Time, annotations map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Annotations: annotations},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(since)}}},
	}
}

// TestPassWritesThroughTheAPI runs one pass of the shell over a fake API:
// the missing machine's Node is deleted, the one the provider cannot answer
// for is left exactly as it was, the stopped one is tainted and fenced, the
// fenced one that is Ready again is unfenced, each with its event.
func TestPassWritesThroughTheAPI(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(now)
	oos := corev1.Taint{Key: TaintOutOfService, Value: OutOfServiceValue, Effect: corev1.TaintEffectNoExecute}
	errNode := shellNode("flaky", corev1.ConditionUnknown, now.Add(-time.Hour), nil)
	client := fake.NewSimpleClientset(
		shellNode("gone", corev1.ConditionUnknown, now.Add(-time.Hour), nil),
		errNode,
		shellNode("stopped", corev1.ConditionUnknown, now.Add(-time.Hour), nil),
		shellNode("back", corev1.ConditionTrue, now.Add(-time.Second), map[string]string{AnnotationFencedAt: "earlier"}, oos,
			corev1.Taint{Key: TaintShutdown, Effect: corev1.TaintEffectNoSchedule}),
	)
	provider := answers{
		"gone":    {exists: false},
		"flaky":   {err: errors.New("engine unreachable")},
		"stopped": {exists: true, shutdown: true},
		"back":    {exists: true},
	}
	c, err := NewController(ControllerConfig{
		Core:     Config{EnableFencing: true, FencingDelay: time.Minute},
		Provider: provider, Client: client, Clock: clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	term := &manager.Term{Informers: informers.NewSharedInformerFactory(client, 0)}
	if err := c.Prepare(term); err != nil {
		t.Fatal(err)
	}
	term.Informers.Start(ctx.Done())
	term.Informers.WaitForCacheSync(ctx.Done())
	rec := record.NewFakeRecorder(20)
	c.rec = rec
	c.pass(ctx)

	get := func(name string) (*corev1.Node, error) {
		return client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	}
	if _, err := get("gone"); !apierrors.IsNotFound(err) {
		t.Errorf("gone: %v, want deleted", err)
	}
	if n, err := get("flaky"); err != nil || len(n.Spec.Taints) != 0 || n.ResourceVersion != errNode.ResourceVersion {
		t.Errorf("flaky changed on a provider error: %+v %v", n, err)
	}
	n, err := get("stopped")
	if err != nil {
		t.Fatal(err)
	}
	if !hasTaint(n, TaintShutdown) || !hasTaint(n, TaintOutOfService) || n.Annotations[AnnotationFencedAt] != now.Format(time.RFC3339) {
		t.Errorf("stopped: taints %v annotations %v", n.Spec.Taints, n.Annotations)
	}
	n, err = get("back")
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Spec.Taints) != 0 || n.Annotations[AnnotationFencedAt] != "" {
		t.Errorf("back: taints %v annotations %v", n.Spec.Taints, n.Annotations)
	}
	close(rec.Events)
	var events []string
	for e := range rec.Events {
		events = append(events, e)
	}
	all := strings.Join(events, "\n")
	for _, want := range []string{
		"Normal DeletingNode Deleting node gone because it does not exist in the cloud provider",
		"Warning NodeFenced Node stopped fenced with taint node.kubernetes.io/out-of-service=nodeshutdown:NoExecute",
		"Normal NodeUnfenced Node back is Ready again",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no event %q in\n%s", want, all)
		}
	}
	states := map[string]NodeState{}
	for _, s := range c.States() {
		states[s.Node] = s
	}
	if _, ok := states["gone"]; ok || states["flaky"].Provider != StateError || states["flaky"].Error == "" ||
		states["stopped"].Provider != StateShutdown || states["back"].Provider != StateNotAsked {
		t.Errorf("states %+v", states)
	}
}
