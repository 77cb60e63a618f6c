package register

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
)

func spec() Spec {
	return Spec{Name: "n1", Hostname: "n1", OS: "linux", Arch: "amd64",
		Labels: map[string]string{"topology.kubernetes.io/zone": "a", "kubernetes.io/hostname": "custom"}}
}

func TestInitialNode(t *testing.T) {
	s := spec()
	s.Unschedulable = true
	s.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
	n := InitialNode(s, corev1.NodeStatus{Phase: "x"})
	want := map[string]string{
		"kubernetes.io/hostname": "custom", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64", "topology.kubernetes.io/zone": "a",
	}
	for k, v := range want {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if len(n.Labels) != len(want) {
		t.Errorf("labels = %v", n.Labels)
	}
	if n.Annotations[AnnotationControllerManagedAttachDetach] != "true" {
		t.Errorf("annotations = %v", n.Annotations)
	}
	if !n.Spec.Unschedulable || len(n.Spec.Taints) != 2 || n.Spec.Taints[1].Key != TaintUnschedulable {
		t.Errorf("spec = %+v", n.Spec)
	}
	if n.Status.Phase != "x" {
		t.Errorf("status not attached")
	}
}

func TestReconcile(t *testing.T) {
	initial := InitialNode(spec(), corev1.NodeStatus{})
	tests := []struct {
		name     string
		existing *corev1.Node
		want     string
	}{
		{"an identical node needs nothing", initial.DeepCopy(), ""},
		{"a changed zone label is put back",
			withLabel(initial, "topology.kubernetes.io/zone", "b"),
			`{"metadata":{"labels":{"topology.kubernetes.io/zone":"a"}}}`},
		{"other labels and taints are left alone",
			withTaint(withLabel(initial, "team", "x")),
			""},
		{"a missing attach/detach annotation is restored",
			withoutAnnotations(initial),
			`{"metadata":{"annotations":{"volumes.kubernetes.io/controller-managed-attach-detach":"true"}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(Reconcile(tt.existing, initial))
			if got != tt.want {
				t.Errorf("patch = %s, want %s", got, tt.want)
			}
		})
	}
	// An empty default label is removed.
	in := initial.DeepCopy()
	in.Labels["topology.kubernetes.io/region"] = ""
	ex := withLabel(initial, "topology.kubernetes.io/region", "r1")
	var p map[string]map[string]map[string]any
	_ = json.Unmarshal(Reconcile(ex, in), &p)
	if v, ok := p["metadata"]["labels"]["topology.kubernetes.io/region"]; !ok || v != nil {
		t.Errorf("empty default label not removed: %v", p)
	}
}

func withLabel(n *corev1.Node, k, v string) *corev1.Node {
	c := n.DeepCopy()
	c.Labels[k] = v
	return c
}

func withTaint(n *corev1.Node) *corev1.Node {
	c := n.DeepCopy()
	c.Spec.Taints = append(c.Spec.Taints, corev1.Taint{Key: "admin", Effect: corev1.TaintEffectNoExecute})
	return c
}

func withoutAnnotations(n *corev1.Node) *corev1.Node {
	c := n.DeepCopy()
	c.Annotations = nil
	return c
}

type fakeClient struct {
	onCreate func()
	stored   *corev1.Node
	errs     []error
	creates  int
	patched  []byte
}

func (f *fakeClient) CreateNode(_ context.Context, n *corev1.Node) (*corev1.Node, error) {
	f.creates++
	if f.onCreate != nil {
		f.onCreate()
	}
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	if f.stored != nil {
		return nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "nodes"}, n.Name)
	}
	f.stored = n.DeepCopy()
	return n, nil
}

func (f *fakeClient) GetNode(_ context.Context, name string) (*corev1.Node, error) {
	if f.stored == nil {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, name)
	}
	return f.stored.DeepCopy(), nil
}

func (f *fakeClient) PatchNode(_ context.Context, _ string, patch []byte) (*corev1.Node, error) {
	f.patched = patch
	return f.stored.DeepCopy(), nil
}

func TestEnsureRetriesWithBackoffThenCreates(t *testing.T) {
	// In a synctest bubble the real clock is fake: the retries' timers
	// fire in order with no real waiting.
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{errs: []error{apierrors.NewServiceUnavailable("x"), apierrors.NewServiceUnavailable("x"), apierrors.NewServiceUnavailable("x")}}
		start := time.Now()
		var attempts []time.Duration
		c.onCreate = func() { attempts = append(attempts, time.Since(start)) }
		n, created, err := Ensure(context.Background(), Config{Client: c, Clock: clock.RealClock{}},
			func() *corev1.Node { return InitialNode(spec(), corev1.NodeStatus{}) })
		if err != nil || n == nil || !created {
			t.Fatalf("Ensure = %v, %v, %v", n, created, err)
		}
		want := []time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond, 700 * time.Millisecond}
		if fmt.Sprint(attempts) != fmt.Sprint(want) {
			t.Errorf("create attempts at %v, want %v (back-off 100, 200, 400 ms)", attempts, want)
		}
	})
}

func TestEnsureOnAnExistingNodeReconcilesLabelsOnly(t *testing.T) {
	existing := InitialNode(spec(), corev1.NodeStatus{})
	existing.Labels["topology.kubernetes.io/zone"] = "old"
	existing.Spec.Taints = []corev1.Taint{{Key: "admin", Effect: corev1.TaintEffectNoSchedule}}
	c := &fakeClient{stored: existing}
	s := spec()
	s.Taints = []corev1.Taint{{Key: "new", Effect: corev1.TaintEffectNoSchedule}}
	_, created, err := Ensure(context.Background(), Config{Client: c}, func() *corev1.Node { return InitialNode(s, corev1.NodeStatus{}) })
	if err != nil {
		t.Fatal(err)
	}
	if created {
		t.Errorf("Ensure reported creating a node that existed")
	}
	if string(c.patched) != `{"metadata":{"labels":{"topology.kubernetes.io/zone":"a"}}}` {
		t.Errorf("patch = %s", c.patched)
	}
}
