package garbagecollector

import (
	"encoding/json"
	"reflect"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// pod is the stored form the patches apply to.
func pod(uid types.UID, owners []metav1.OwnerReference, finalizers ...string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: uid, OwnerReferences: owners, Finalizers: finalizers}}
}

func ref(uid types.UID, blocking bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: string(uid), UID: uid, BlockOwnerDeletion: &blocking}
}

// apply applies patch to target as the API server would; nil when a test
// of the patch fails.
func apply(t *testing.T, patch []byte, target *corev1.Pod) *corev1.Pod {
	t.Helper()
	doc, err := json.Marshal(target)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatalf("decode patch %s: %v", patch, err)
	}
	out, err := p.Apply(doc)
	if err != nil {
		return nil
	}
	var got corev1.Pod
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	return &got
}

func TestPatches(t *testing.T) {
	a, b, c := ref("a", true), ref("b", false), ref("c", true)
	seen := pod("pod-uid", []metav1.OwnerReference{a, b, c}, "example.com/x", orphan)
	obj := ObjectOf(podKind, seen)
	for _, tc := range []struct {
		name   string
		patch  []byte
		target *corev1.Pod
		want   *corev1.Pod // nil: the patch must fail
	}{
		{
			name:   "removing owners drops exactly their references",
			patch:  removeOwnersPatch(obj, []types.UID{"a", "c"}),
			target: seen,
			want:   pod("pod-uid", []metav1.OwnerReference{b}, "example.com/x", orphan),
		},
		{
			name:   "removing owners fails on a recreated namesake",
			patch:  removeOwnersPatch(obj, []types.UID{"a"}),
			target: pod("other-uid", []metav1.OwnerReference{a, b, c}),
		},
		{
			name:   "removing owners fails when the references moved",
			patch:  removeOwnersPatch(obj, []types.UID{"c"}),
			target: pod("pod-uid", []metav1.OwnerReference{c, a, b}),
		},
		{
			name:   "unblocking sets blockOwnerDeletion=false on the blocking references named",
			patch:  unblockPatch(obj, []types.UID{"a", "b"}),
			target: seen,
			want:   pod("pod-uid", []metav1.OwnerReference{ref("a", false), b, c}, "example.com/x", orphan),
		},
		{
			name:   "removing a finalizer keeps the others",
			patch:  removeFinalizerPatch(obj, orphan),
			target: seen,
			want:   pod("pod-uid", []metav1.OwnerReference{a, b, c}, "example.com/x"),
		},
		{
			name:   "removing a finalizer fails when the list changed",
			patch:  removeFinalizerPatch(obj, orphan),
			target: pod("pod-uid", []metav1.OwnerReference{a, b, c}, orphan),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := apply(t, tc.patch, tc.target)
			if tc.want == nil {
				if got != nil {
					t.Fatalf("patch %s applied, want it refused", tc.patch)
				}
				return
			}
			if got == nil || !reflect.DeepEqual(got.ObjectMeta, tc.want.ObjectMeta) {
				t.Errorf("patch %s: got %+v, want %+v", tc.patch, got, tc.want)
			}
		})
	}
}

func TestPatchesOfNothingAreNil(t *testing.T) {
	obj := ObjectOf(podKind, pod("pod-uid", []metav1.OwnerReference{ref("a", false)}, "example.com/x"))
	for name, p := range map[string][]byte{
		"removing an owner the object does not reference": removeOwnersPatch(obj, []types.UID{"z"}),
		"unblocking a reference that does not block":      unblockPatch(obj, []types.UID{"a"}),
		"removing a finalizer the object lacks":           removeFinalizerPatch(obj, orphan),
	} {
		if p != nil {
			t.Errorf("%s: got patch %s, want none", name, p)
		}
	}
}
