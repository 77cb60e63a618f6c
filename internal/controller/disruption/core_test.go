package disruption

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const rsUID, deployUID = types.UID("rs-uid"), types.UID("deploy-uid")

// pod is a pod controlled by the ReplicaSet rs-uid; mods adjust it.
func pod(name string, ready bool, mods ...func(*corev1.Pod)) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	yes := true
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "web"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-rs", UID: rsUID, Controller: &yes}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func deleting(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: now} }
func unowned(p *corev1.Pod)  { p.OwnerReferences = nil }

func pdb(minAvailable, maxUnavailable *intstr.IntOrString) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Generation: 1},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: minAvailable, MaxUnavailable: maxUnavailable,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}
}

func ioi(v int) *intstr.IntOrString    { x := intstr.FromInt(v); return &x }
func pct(s string) *intstr.IntOrString { x := intstr.FromString(s); return &x }

// deployment5 resolves rs-uid to a Deployment of 5 replicas.
var deployment5 = map[types.UID]Owner{rsUID: {UID: deployUID, Replicas: 5}}

func TestSync(t *testing.T) {
	three := []*corev1.Pod{pod("a", true), pod("b", true), pod("c", true)}
	tests := []struct {
		name   string
		budget *policyv1.PodDisruptionBudget
		pods   []*corev1.Pod
		owners map[types.UID]Owner
		// want: expected, currentHealthy, desiredHealthy, disruptionsAllowed
		want       [4]int32
		wantCond   metav1.ConditionStatus
		wantReason string
		wantErr    string
	}{
		{"minAvailable 2 of 3 ready pods allows one disruption", pdb(ioi(2), nil), three, nil,
			[4]int32{3, 3, 2, 1}, metav1.ConditionTrue, policyv1.SufficientPodsReason, ""},
		{"minAvailable 2 with one pod unready allows none", pdb(ioi(2), nil),
			[]*corev1.Pod{pod("a", true), pod("b", true), pod("c", false)}, nil,
			[4]int32{3, 2, 2, 0}, metav1.ConditionFalse, policyv1.InsufficientPodsReason, ""},
		{"a pod being deleted is not healthy", pdb(ioi(2), nil),
			[]*corev1.Pod{pod("a", true), pod("b", true), pod("c", true, deleting)}, nil,
			[4]int32{3, 2, 2, 0}, metav1.ConditionFalse, policyv1.InsufficientPodsReason, ""},
		{"an integer minAvailable counts the matched pods, not the scale", pdb(ioi(1), nil), three, deployment5,
			[4]int32{3, 3, 1, 2}, metav1.ConditionTrue, policyv1.SufficientPodsReason, ""},
		{"a percentage minAvailable counts the Deployment's scale, rounding up", pdb(pct("50%"), nil), three, deployment5,
			[4]int32{5, 3, 3, 0}, metav1.ConditionFalse, policyv1.InsufficientPodsReason, ""},
		{"maxUnavailable 1 of a scale of 5 wants 4 healthy", pdb(nil, ioi(1)), three, deployment5,
			[4]int32{5, 3, 4, 0}, metav1.ConditionFalse, policyv1.InsufficientPodsReason, ""},
		{"maxUnavailable 34% of a ReplicaSet of 3 rounds up to 2 unavailable", pdb(nil, pct("34%")), three,
			map[types.UID]Owner{rsUID: {UID: rsUID, Replicas: 3}},
			[4]int32{3, 3, 1, 2}, metav1.ConditionTrue, policyv1.SufficientPodsReason, ""},
		{"maxUnavailable 100% wants no healthy pods", pdb(nil, pct("100%")), three,
			map[types.UID]Owner{rsUID: {UID: rsUID, Replicas: 3}},
			[4]int32{3, 3, 0, 3}, metav1.ConditionTrue, policyv1.SufficientPodsReason, ""},
		{"a budget over no pods allows nothing", pdb(ioi(0), nil), nil, nil,
			[4]int32{0, 0, 0, 0}, metav1.ConditionFalse, policyv1.InsufficientPodsReason, ""},
		{"a budget with neither bound wants nothing and expects nothing", pdb(nil, nil), three, nil,
			[4]int32{0, 3, 0, 0}, metav1.ConditionFalse, policyv1.InsufficientPodsReason, ""},
		{"pods without a controller are not counted in the scale", pdb(nil, ioi(1)),
			[]*corev1.Pod{pod("a", true), pod("b", true), pod("x", true, unowned)}, map[types.UID]Owner{rsUID: {UID: rsUID, Replicas: 2}},
			[4]int32{2, 3, 1, 2}, metav1.ConditionTrue, policyv1.SufficientPodsReason, ""},
		{"a percentage over a pod whose controller is unknown fails safe", pdb(pct("50%"), nil), three, nil,
			[4]int32{}, metav1.ConditionFalse, policyv1.SyncFailedReason, `found no controllers for pod "a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Sync(Input{Budget: tt.budget, Pods: tt.pods, Owners: tt.owners, Now: now})
			if tt.wantErr != "" {
				if res.Err == nil || !strings.Contains(res.Err.Error(), tt.wantErr) {
					t.Fatalf("err: got %v, want %q", res.Err, tt.wantErr)
				}
			} else if res.Err != nil {
				t.Fatal(res.Err)
			}
			st := res.Status
			if st == nil {
				t.Fatal("no status to write for a budget never synced")
			}
			got := [4]int32{st.ExpectedPods, st.CurrentHealthy, st.DesiredHealthy, st.DisruptionsAllowed}
			if got != tt.want {
				t.Errorf("expected, current, desired, allowed: got %v, want %v", got, tt.want)
			}
			if tt.wantErr == "" && st.ObservedGeneration != tt.budget.Generation {
				t.Errorf("observedGeneration: got %d, want %d", st.ObservedGeneration, tt.budget.Generation)
			}
			c := apimeta.FindStatusCondition(st.Conditions, policyv1.DisruptionAllowedCondition)
			if c == nil || c.Status != tt.wantCond || c.Reason != tt.wantReason || c.LastTransitionTime.IsZero() {
				t.Errorf("DisruptionAllowed: got %+v, want %s %s with a transition time", c, tt.wantCond, tt.wantReason)
			}
		})
	}
}

func TestSyncDisruptedPods(t *testing.T) {
	recent := metav1.NewTime(now.Add(-30 * time.Second))
	expired := metav1.NewTime(now.Add(-DeletionTimeout - time.Second))
	tests := []struct {
		name          string
		disrupted     map[string]metav1.Time
		pods          []*corev1.Pod
		wantKept      []string
		wantHealthy   int32
		wantRecheck   time.Duration
		wantNotDelete []string
	}{
		{"a freshly evicted pod is kept listed and not counted healthy", map[string]metav1.Time{"a": recent},
			[]*corev1.Pod{pod("a", true), pod("b", true), pod("c", true)}, []string{"a"}, 2, DeletionTimeout - 30*time.Second, nil},
		{"an evicted pod now being deleted leaves the list", map[string]metav1.Time{"a": recent},
			[]*corev1.Pod{pod("a", true, deleting), pod("b", true), pod("c", true)}, nil, 2, 0, nil},
		{"an evicted pod that is gone leaves the list", map[string]metav1.Time{"gone": recent},
			[]*corev1.Pod{pod("b", true), pod("c", true)}, nil, 2, 0, nil},
		{"an eviction not followed by a deletion within two minutes runs out", map[string]metav1.Time{"a": expired},
			[]*corev1.Pod{pod("a", true), pod("b", true), pod("c", true)}, nil, 3, 0, []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := pdb(ioi(1), nil)
			b.Status.DisruptedPods = tt.disrupted
			res := Sync(Input{Budget: b, Pods: tt.pods, Now: now})
			if res.Status == nil {
				t.Fatal("no status")
			}
			if len(res.Status.DisruptedPods) != len(tt.wantKept) {
				t.Fatalf("disruptedPods: got %v, want %v", res.Status.DisruptedPods, tt.wantKept)
			}
			for _, name := range tt.wantKept {
				if _, ok := res.Status.DisruptedPods[name]; !ok {
					t.Errorf("disruptedPods: got %v, want %s kept", res.Status.DisruptedPods, name)
				}
			}
			if res.Status.CurrentHealthy != tt.wantHealthy {
				t.Errorf("currentHealthy: got %d, want %d", res.Status.CurrentHealthy, tt.wantHealthy)
			}
			if res.RecheckAfter != tt.wantRecheck {
				t.Errorf("recheck after: got %v, want %v", res.RecheckAfter, tt.wantRecheck)
			}
			if strings.Join(res.NotDeleted, ",") != strings.Join(tt.wantNotDelete, ",") {
				t.Errorf("not deleted: got %v, want %v", res.NotDeleted, tt.wantNotDelete)
			}
		})
	}
}

func TestSyncWritesOnlyChanges(t *testing.T) {
	three := []*corev1.Pod{pod("a", true), pod("b", true), pod("c", true)}
	b := pdb(ioi(2), nil)
	first := Sync(Input{Budget: b, Pods: three, Now: now})
	b.Status = *first.Status
	later := now.Add(time.Minute)
	if res := Sync(Input{Budget: b, Pods: three, Now: later}); res.Status != nil {
		t.Errorf("an up-to-date budget got a new status: %+v", res.Status)
	}

	t.Run("a spec change is observed", func(t *testing.T) {
		nb := b.DeepCopy()
		nb.Generation = 2
		nb.Spec.MinAvailable = ioi(3)
		res := Sync(Input{Budget: nb, Pods: three, Now: later})
		if res.Status == nil || res.Status.ObservedGeneration != 2 || res.Status.DisruptionsAllowed != 0 {
			t.Fatalf("after a spec change: got %+v, want observedGeneration 2 and no disruption allowed", res.Status)
		}
		c := apimeta.FindStatusCondition(res.Status.Conditions, policyv1.DisruptionAllowedCondition)
		if c == nil || c.Status != metav1.ConditionFalse || !c.LastTransitionTime.Time.Equal(later) {
			t.Errorf("DisruptionAllowed: got %+v, want False since %v", c, later)
		}
	})

	t.Run("an eviction's decrement is corrected back from the pods", func(t *testing.T) {
		nb := b.DeepCopy()
		nb.Status.DisruptionsAllowed = 0
		res := Sync(Input{Budget: nb, Pods: three, Now: later})
		if res.Status == nil || res.Status.DisruptionsAllowed != 1 {
			t.Fatalf("got %+v, want disruptionsAllowed back at 1", res.Status)
		}
		c := apimeta.FindStatusCondition(res.Status.Conditions, policyv1.DisruptionAllowedCondition)
		if c == nil || c.Status != metav1.ConditionTrue || !c.LastTransitionTime.Time.Equal(now) {
			t.Errorf("DisruptionAllowed: got %+v, want True, transition time kept at %v", c, now)
		}
	})
}

func TestStaleDisruption(t *testing.T) {
	withCondition := func(reason string, age time.Duration) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
				Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason,
				LastTransitionTime: metav1.NewTime(now.Add(-age)),
			})
		}
	}
	succeeded := func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }
	tests := []struct {
		name      string
		pod       *corev1.Pod
		wantStale bool
		wantAfter time.Duration
	}{
		{"a pod without the condition is not stale", pod("a", true), false, 0},
		{"an eviction mark younger than two minutes becomes stale later", pod("a", true, withCondition("EvictionByEvictionAPI", 30*time.Second)), true, 90 * time.Second},
		{"an eviction mark older than two minutes on a live pod is stale now", pod("a", true, withCondition("EvictionByEvictionAPI", 3*time.Minute)), true, 0},
		{"a pod being deleted keeps its mark", pod("a", true, withCondition("EvictionByEvictionAPI", 3*time.Minute), deleting), false, 0},
		{"a finished pod keeps its mark", pod("a", true, withCondition("EvictionByEvictionAPI", 3*time.Minute), succeeded), false, 0},
		{"a mark set by the kubelet is never stale", pod("a", true, withCondition(corev1.PodReasonTerminationByKubelet, 3*time.Minute)), false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stale, after := StaleDisruption(tt.pod, now)
			if stale != tt.wantStale || after != tt.wantAfter {
				t.Errorf("got %v after %v, want %v after %v", stale, after, tt.wantStale, tt.wantAfter)
			}
		})
	}
}
