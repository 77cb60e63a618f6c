package volumebinding_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
	ft "github.com/nodeplane/nodeplane/internal/scheduler/framework/frameworktest"
	"github.com/nodeplane/nodeplane/internal/scheduler/plugins/volumebinding"
)

type fakeVolumes struct {
	claims  map[string]*corev1.PersistentVolumeClaim
	volumes map[string]*corev1.PersistentVolume
}

func (f fakeVolumes) Claim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	if c, ok := f.claims[namespace+"/"+name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumeclaims"}, name)
}

func (f fakeVolumes) Volume(name string) (*corev1.PersistentVolume, error) {
	if v, ok := f.volumes[name]; ok {
		return v, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumes"}, name)
}

func TestVolumeBinding(t *testing.T) {
	claim := func(name, volume string, deleting bool) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume}}
		if deleting {
			c.DeletionTimestamp = &metav1.Time{}
		}
		return c
	}
	pinned := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "local-a"}, Spec: corev1.PersistentVolumeSpec{
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}},
		}}}},
	}}
	free := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "shared"}}
	vols := fakeVolumes{
		claims: map[string]*corev1.PersistentVolumeClaim{
			"default/pinned": claim("pinned", "local-a", false), "default/free": claim("free", "shared", false),
			"default/unbound": claim("unbound", "", false), "default/going": claim("going", "shared", true),
			"default/dangling": claim("dangling", "gone", false),
		},
		volumes: map[string]*corev1.PersistentVolume{"local-a": pinned, "shared": free},
	}
	withClaims := func(names ...string) *corev1.Pod {
		p := ft.Pod("p")
		for _, n := range names {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: n, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: n}}})
		}
		return p
	}
	tests := []struct {
		name      string
		pod       *corev1.Pod
		pre       framework.Code
		preReason string
		onA, onB  framework.Code
	}{
		{name: "a pod without claims is skipped", pod: withClaims(), pre: framework.Skip},
		{name: "a pod whose bound volume has no node affinity is skipped", pod: withClaims("free"), pre: framework.Skip},
		{name: "a pod with an unbound claim is skipped (the binder binds after placement)", pod: withClaims("unbound"), pre: framework.Skip},
		{name: "a pod with a volume pinned to node a fits a only", pod: withClaims("free", "pinned"), onA: framework.Success, onB: framework.UnschedulableAndUnresolvable},
		{name: "a pod whose claim is missing is refused for good", pod: withClaims("nope"), pre: framework.UnschedulableAndUnresolvable, preReason: `persistentvolumeclaim "nope" not found`},
		{name: "a pod whose claim is being deleted is refused for good", pod: withClaims("going"), pre: framework.UnschedulableAndUnresolvable, preReason: `persistentvolumeclaim "going" is being deleted`},
		{name: "a pod whose claim names a missing volume is refused", pod: withClaims("dangling"), pre: framework.UnschedulableAndUnresolvable, preReason: "pvc(s) bound to non-existent pv(s)"},
	}
	p := volumebinding.New(vols)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := framework.NewCycleState()
			_, st := p.PreFilter(context.Background(), state, tt.pod, nil)
			if st.Code() != tt.pre {
				t.Fatalf("PreFilter %v, want %v", st, tt.pre)
			}
			if tt.preReason != "" && st.Message() != tt.preReason {
				t.Errorf("PreFilter reason %q, want %q", st.Message(), tt.preReason)
			}
			if tt.pre != framework.Success {
				return
			}
			for node, want := range map[string]framework.Code{"a": tt.onA, "b": tt.onB} {
				st := p.Filter(context.Background(), state, tt.pod, ft.NodeInfo(ft.Node(node)))
				if st.Code() != want {
					t.Errorf("Filter on %s: %v, want %v", node, st, want)
				}
				if want != framework.Success && st.Message() != volumebinding.ErrReasonNodeConflict {
					t.Errorf("Filter reason %q", st.Message())
				}
			}
		})
	}
}
