package cloudnodelifecycle_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	cnlc "github.com/nodeplane/nodeplane/internal/controller/cloudnodelifecycle"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeProvider answers per node name.
type fakeProvider struct {
	exists      map[string]bool
	shutdown    map[string]bool
	existsErr   error
	shutdownErr error
	asked       int
}

func (f *fakeProvider) InstanceExists(_ context.Context, n *corev1.Node) (bool, error) {
	f.asked++
	return f.exists[n.Name], f.existsErr
}

func (f *fakeProvider) InstanceShutdown(_ context.Context, n *corev1.Node) (bool, error) {
	return f.shutdown[n.Name], f.shutdownErr
}

type nodeOpt func(*corev1.Node)

func mkNode(ready corev1.ConditionStatus, since time.Duration, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1", CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))}}
	if ready != "" {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(t0.Add(-since))}}
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func taint(key, value string, effect corev1.TaintEffect) nodeOpt {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

func fencedAt(n *corev1.Node) {
	n.Annotations = map[string]string{cnlc.AnnotationFencedAt: t0.Add(-time.Minute).Format(time.RFC3339)}
	taint(cnlc.TaintOutOfService, cnlc.OutOfServiceValue, corev1.TaintEffectNoExecute)(n)
}

func TestDecide(t *testing.T) {
	boom := errors.New("engine unreachable")
	running := &fakeProvider{exists: map[string]bool{"n1": true}}
	down := &fakeProvider{exists: map[string]bool{"n1": true}, shutdown: map[string]bool{"n1": true}}
	gone := &fakeProvider{}
	fencingOn := cnlc.Config{EnableFencing: true, FencingDelay: time.Minute}
	fencingOff := cnlc.Config{FencingDelay: time.Minute}
	tests := []struct {
		name     string
		cfg      cnlc.Config
		provider *fakeProvider
		node     *corev1.Node
		want     cnlc.Decision // Node, Err and Fencing are not compared
		noAsk    bool
		fencing  string // substring of Fencing
	}{
		{"a Ready node is not asked about and keeps no shutdown taint", fencingOn, down,
			mkNode(corev1.ConditionTrue, time.Hour, taint(cnlc.TaintShutdown, "", corev1.TaintEffectNoSchedule)),
			cnlc.Decision{RemoveShutdownTaint: true}, true, ""},
		{"a NotReady node whose machine is gone is deleted", fencingOn, gone,
			mkNode(corev1.ConditionFalse, time.Hour), cnlc.Decision{State: cnlc.StateMissing, Delete: true}, false, ""},
		{"a node without a Ready condition is asked about too", fencingOff, gone,
			mkNode("", 0), cnlc.Decision{State: cnlc.StateMissing, Delete: true}, false, ""},
		{"an Unknown node whose machine is shut down gets the shutdown taint", fencingOff, down,
			mkNode(corev1.ConditionUnknown, time.Hour), cnlc.Decision{State: cnlc.StateShutdown, AddShutdownTaint: true}, false, ""},
		{"a shut down node that has the shutdown taint needs no change", fencingOff, down,
			mkNode(corev1.ConditionUnknown, time.Hour, taint(cnlc.TaintShutdown, "", corev1.TaintEffectNoSchedule)),
			cnlc.Decision{State: cnlc.StateShutdown}, false, ""},
		{"a NotReady node whose machine runs is left alone", fencingOn, running,
			mkNode(corev1.ConditionFalse, time.Hour), cnlc.Decision{State: cnlc.StateRunning}, false, "machine is running"},
		{"a provider error on exists deletes nothing and fences nothing", fencingOn, &fakeProvider{existsErr: boom},
			mkNode(corev1.ConditionUnknown, time.Hour), cnlc.Decision{State: cnlc.StateError}, false, "could not say"},
		{"a provider error on shutdown neither taints nor fences", fencingOn,
			&fakeProvider{exists: map[string]bool{"n1": true}, shutdown: map[string]bool{"n1": true}, shutdownErr: boom},
			mkNode(corev1.ConditionUnknown, time.Hour), cnlc.Decision{State: cnlc.StateError}, false, "could not confirm"},
		{"NotImplemented on shutdown counts as running and never fences", fencingOn,
			&fakeProvider{exists: map[string]bool{"n1": true}, shutdownErr: cloudprovider.NotImplemented},
			mkNode(corev1.ConditionUnknown, time.Hour), cnlc.Decision{State: cnlc.StateRunning}, false, "could not confirm"},
		{"fencing off: a shut down node is only tainted shutdown", fencingOff, down,
			mkNode(corev1.ConditionUnknown, time.Hour), cnlc.Decision{State: cnlc.StateShutdown, AddShutdownTaint: true}, false, ""},
		{"fencing on: NotReady past the delay and shut down is fenced", fencingOn, down,
			mkNode(corev1.ConditionUnknown, 61*time.Second), cnlc.Decision{State: cnlc.StateShutdown, AddShutdownTaint: true, Fence: true}, false, "longer than --automatic-fencing-delay 1m0s"},
		{"fencing on: NotReady exactly the delay is fenced", fencingOn, down,
			mkNode(corev1.ConditionFalse, time.Minute), cnlc.Decision{State: cnlc.StateShutdown, AddShutdownTaint: true, Fence: true}, false, "fencing"},
		{"fencing on: NotReady for less than the delay waits", fencingOn, down,
			mkNode(corev1.ConditionUnknown, 20*time.Second), cnlc.Decision{State: cnlc.StateShutdown, AddShutdownTaint: true}, false, "will fence in 40s"},
		{"fencing on: an operator's out-of-service taint is not taken over", fencingOn, down,
			mkNode(corev1.ConditionUnknown, time.Hour, taint(cnlc.TaintOutOfService, "nodeshutdown", corev1.TaintEffectNoSchedule)),
			cnlc.Decision{State: cnlc.StateShutdown, AddShutdownTaint: true}, false, "already set"},
		{"a fenced node stays fenced while NotReady", fencingOn, down,
			mkNode(corev1.ConditionUnknown, time.Hour, fencedAt), cnlc.Decision{State: cnlc.StateShutdown, AddShutdownTaint: true}, false, "fenced since"},
		{"a fenced node whose machine runs again stays fenced until Ready", fencingOn, running,
			mkNode(corev1.ConditionUnknown, time.Hour, fencedAt), cnlc.Decision{State: cnlc.StateRunning}, false, "when the node is Ready"},
		{"a fenced node that is Ready again is unfenced", fencingOn, down,
			mkNode(corev1.ConditionTrue, time.Second, fencedAt), cnlc.Decision{Unfence: true}, true, "Ready again"},
		{"a fenced node is unfenced even after fencing was turned off", fencingOff, down,
			mkNode(corev1.ConditionTrue, time.Second, fencedAt), cnlc.Decision{Unfence: true}, true, ""},
		{"a Ready node with an operator's out-of-service taint is not unfenced", fencingOn, down,
			mkNode(corev1.ConditionTrue, time.Second, taint(cnlc.TaintOutOfService, "nodeshutdown", corev1.TaintEffectNoExecute)),
			cnlc.Decision{}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.provider.asked = 0
			got := cnlc.New(tt.cfg, tt.provider).Decide(context.Background(), t0, tt.node)
			cmp := got
			cmp.Node, cmp.Err, cmp.Fencing = "", nil, ""
			if cmp != tt.want {
				t.Errorf("decision %+v, want %+v", cmp, tt.want)
			}
			if tt.noAsk && tt.provider.asked != 0 {
				t.Errorf("the provider was asked %d times about a Ready node", tt.provider.asked)
			}
			if !strings.Contains(got.Fencing, tt.fencing) {
				t.Errorf("fencing %q, want it to contain %q", got.Fencing, tt.fencing)
			}
		})
	}
}

func TestApply(t *testing.T) {
	t.Run("fencing adds the taint and the mark in one change", func(t *testing.T) {
		n := mkNode(corev1.ConditionUnknown, time.Hour, taint("user", "x", corev1.TaintEffectNoSchedule))
		if !(cnlc.Decision{AddShutdownTaint: true, Fence: true}).Apply(n, t0) {
			t.Fatal("no change")
		}
		if len(n.Spec.Taints) != 3 || n.Spec.Taints[1].Key != cnlc.TaintShutdown || n.Spec.Taints[1].Effect != corev1.TaintEffectNoSchedule ||
			n.Spec.Taints[2].Key != cnlc.TaintOutOfService || n.Spec.Taints[2].Value != "nodeshutdown" || n.Spec.Taints[2].Effect != corev1.TaintEffectNoExecute {
			t.Fatalf("taints %+v", n.Spec.Taints)
		}
		if n.Annotations[cnlc.AnnotationFencedAt] != t0.Format(time.RFC3339) {
			t.Fatalf("annotations %v", n.Annotations)
		}
	})
	t.Run("unfencing removes only the marked taint and the mark", func(t *testing.T) {
		n := mkNode(corev1.ConditionTrue, time.Second, fencedAt, taint("user", "x", corev1.TaintEffectNoSchedule))
		if !(cnlc.Decision{Unfence: true}).Apply(n, t0) {
			t.Fatal("no change")
		}
		if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "user" || n.Annotations[cnlc.AnnotationFencedAt] != "" {
			t.Fatalf("taints %+v annotations %v", n.Spec.Taints, n.Annotations)
		}
	})
	t.Run("fencing a node that got an out-of-service taint meanwhile changes nothing", func(t *testing.T) {
		n := mkNode(corev1.ConditionUnknown, time.Hour, taint(cnlc.TaintOutOfService, "", corev1.TaintEffectNoExecute))
		if (cnlc.Decision{Fence: true}).Apply(n, t0) {
			t.Fatalf("changed: %+v %v", n.Spec.Taints, n.Annotations)
		}
	})
	t.Run("removing the shutdown taint keeps the others", func(t *testing.T) {
		n := mkNode(corev1.ConditionTrue, time.Second, taint(cnlc.TaintShutdown, "", corev1.TaintEffectNoSchedule), taint("user", "", corev1.TaintEffectNoSchedule))
		if !(cnlc.Decision{RemoveShutdownTaint: true}).Apply(n, t0) || len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "user" {
			t.Fatalf("taints %+v", n.Spec.Taints)
		}
	})
}
