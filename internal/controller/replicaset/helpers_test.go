package replicaset_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/ptr"

	"github.com/nodeplane/nodeplane/internal/controller/ownership"
	"github.com/nodeplane/nodeplane/internal/controller/replicaset"
)

func TestExpectations(t *testing.T) {
	e := ownership.NewExpectations(time.Minute)
	if !e.Satisfied("ns/web", t0) {
		t.Fatal("a key never seen is not satisfied")
	}
	e.Expect("ns/web", 2, nil, t0)
	if e.Satisfied("ns/web", t0) {
		t.Fatal("two creates outstanding: satisfied")
	}
	e.Created("ns/web")
	if e.Satisfied("ns/web", t0) {
		t.Fatal("one create outstanding: satisfied")
	}
	e.Created("ns/web")
	if !e.Satisfied("ns/web", t0) {
		t.Fatal("every create observed: not satisfied")
	}
	e.Created("ns/web") // an extra observation must not bank credit
	e.Expect("ns/web", 1, nil, t0)
	if e.Satisfied("ns/web", t0) {
		t.Fatal("an extra observation before Expect satisfied the next expectation")
	}

	e.Expect("ns/web", 0, []types.UID{"a", "b"}, t0)
	e.Deleted("ns/web", "a")
	e.Deleted("ns/web", "a")
	e.Deleted("ns/web", "zzz")
	if e.Satisfied("ns/web", t0) {
		t.Fatal("a repeated deletion of one pod counted for the other")
	}
	e.Deleted("ns/web", "b")
	if !e.Satisfied("ns/web", t0) {
		t.Fatal("both deletions observed: not satisfied")
	}

	e.Expect("ns/web", 5, nil, t0)
	if e.Satisfied("ns/web", t0.Add(time.Minute)) {
		t.Fatal("satisfied at exactly the timeout")
	}
	if !e.Satisfied("ns/web", t0.Add(time.Minute+time.Nanosecond)) {
		t.Fatal("not satisfied after the timeout")
	}
	e.Forget("ns/web")
	if !e.Satisfied("ns/web", t0) {
		t.Fatal("a forgotten key is not satisfied")
	}
}

func TestClaim(t *testing.T) {
	owner := mkRS("web", 1)
	going := mkRS("web", 1, func(rs *appsv1.ReplicaSet) { rs.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) })
	sel := labels.SelectorFromSet(labels.Set{"app": "web"})
	objs := []*corev1.Pod{
		mkPod("mine", of(owner)),
		mkPod("mine-relabelled", of(owner), labelled("app", "db")),
		mkPod("orphan", labelled("app", "web")),
		mkPod("orphan-going", labelled("app", "web"), terminating),
		mkPod("orphan-other", labelled("app", "db")),
		mkPod("theirs", labelled("app", "web"), ownedBy("x")),
	}
	c := ownership.Claim(owner, sel, objs)
	check := func(what string, got []*corev1.Pod, want ...string) {
		t.Helper()
		g := strings.Join(names(got), ",")
		if w := strings.Join(want, ","); g != w {
			t.Errorf("%s: got %q, want %q", what, g, w)
		}
	}
	check("owned", c.Owned, "mine")
	check("adopt", c.Adopt, "orphan")
	check("release", c.Release, "mine-relabelled")

	c = ownership.Claim(going, sel, objs)
	check("owned by an owner being deleted", c.Owned, "mine")
	check("adopted by an owner being deleted", c.Adopt)
	check("released by an owner being deleted", c.Release)

	// The claim works on any object kind: a Deployment's ReplicaSets.
	rsOrphan := mkRS("rs", 1)
	rsOrphan.Labels = map[string]string{"app": "web"}
	cr := ownership.Claim(owner, sel, []*appsv1.ReplicaSet{rsOrphan})
	if len(cr.Adopt) != 1 {
		t.Errorf("an orphan replica set: got %d to adopt, want 1", len(cr.Adopt))
	}
}

func TestAdoptAndReleasePatches(t *testing.T) {
	owner := mkRS("web", 1)
	pod := mkPod("p", labelled("app", "web"))
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "node-uid"}}
	apply := func(obj *corev1.Pod, patch []byte) *corev1.Pod {
		t.Helper()
		out := &corev1.Pod{}
		orig, _ := json.Marshal(obj)
		b, err := strategicpatch.StrategicMergePatch(orig, patch, &corev1.Pod{})
		if err != nil {
			t.Fatalf("apply patch %s: %v", patch, err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	adopted := apply(pod, ownership.AdoptPatch(*metav1.NewControllerRef(owner, replicaset.Kind), pod.UID))
	if len(adopted.OwnerReferences) != 2 || metav1.GetControllerOf(adopted) == nil || metav1.GetControllerOf(adopted).UID != owner.UID {
		t.Fatalf("adopted: got owner references %+v, want the node's and the replica set's as controller", adopted.OwnerReferences)
	}
	released := apply(adopted, ownership.ReleasePatch(owner.UID, pod.UID))
	if len(released.OwnerReferences) != 1 || released.OwnerReferences[0].UID != "node-uid" {
		t.Fatalf("released: got owner references %+v, want only the node's", released.OwnerReferences)
	}
	if released.UID != pod.UID {
		t.Errorf("the patch changed the uid: got %q", released.UID)
	}
}

func TestTemplateHash(t *testing.T) {
	base := mkRS("web", 1).Spec.Template
	base.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
	h := replicaset.TemplateHash(&base, nil)
	if len(h) != 7 || strings.Trim(h, "bcdfghjklmnpqrstvwxz2456789") != "" {
		t.Fatalf("got %q, want seven characters of the safe alphabet", h)
	}
	same := base.DeepCopy()
	same.Spec.Tolerations = []corev1.Toleration{} // empty and nil lists are the same template
	same.Labels = map[string]string{"tier": "web", "app": "web"}
	if got := replicaset.TemplateHash(same, nil); got != h {
		t.Errorf("an equal template: got %q, want %q", got, h)
	}
	changed := base.DeepCopy()
	changed.Spec.Containers[0].Image = "sleep2"
	relabelled := base.DeepCopy()
	relabelled.Labels["tier"] = "api"
	annotated := base.DeepCopy()
	annotated.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "now"}
	for name, tmpl := range map[string]*corev1.PodTemplateSpec{"a new image": changed, "a new label": relabelled, "a restart annotation": annotated} {
		if got := replicaset.TemplateHash(tmpl, nil); got == h {
			t.Errorf("%s did not change the hash %q", name, h)
		}
	}
	c0, c1 := replicaset.TemplateHash(&base, ptr.To[int32](0)), replicaset.TemplateHash(&base, ptr.To[int32](1))
	if c0 == h || c1 == c0 {
		t.Errorf("collision counts nil, 0, 1 gave %q, %q, %q; want three hashes", h, c0, c1)
	}
	if h != "zdbnmdj" {
		// The hash is persisted in names and labels: it must not change
		// between releases unless on purpose.
		t.Errorf("the hash of the reference template changed: got %q", h)
	}
}

func TestSlowStart(t *testing.T) {
	tests := []struct {
		name        string
		count       int
		failFrom    int64 // calls numbered from 1 at or after this fail; 0 never
		wantOK      int
		wantCalls   int64
		wantErrText string
	}{
		{name: "all succeed in batches of 1, 2, 4, 3", count: 10, wantOK: 10, wantCalls: 10},
		{name: "the first call failing stops everything", count: 10, failFrom: 1, wantCalls: 1, wantErrText: "boom"},
		{name: "a failure in the third batch ends it and no fourth batch runs", count: 100, failFrom: 5, wantOK: 4, wantCalls: 7, wantErrText: "boom"},
		{name: "nothing to do makes no call", count: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int64
			ok, err := ownership.SlowStart(context.Background(), tt.count, func(context.Context) error {
				if n := calls.Add(1); tt.failFrom > 0 && n >= tt.failFrom {
					return errors.New("boom")
				}
				return nil
			})
			if ok != tt.wantOK || calls.Load() != tt.wantCalls {
				t.Errorf("got %d succeeded in %d calls, want %d in %d", ok, calls.Load(), tt.wantOK, tt.wantCalls)
			}
			if (err == nil) != (tt.wantErrText == "") || (err != nil && err.Error() != tt.wantErrText) {
				t.Errorf("got error %v, want %q", err, tt.wantErrText)
			}
		})
	}
}
