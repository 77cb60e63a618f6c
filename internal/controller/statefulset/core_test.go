package statefulset_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodeplane/nodeplane/internal/controller/statefulset"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

type setOpt func(*appsv1.StatefulSet)

func mkSet(replicas int32, opts ...setOpt) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "set-uid", Generation: 1},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(replicas),
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			ServiceName:         "web",
			PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0)}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "v1"}}},
			},
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func parallel(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement }
func onDelete(s *appsv1.StatefulSet) {
	s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
}
func image(img string) setOpt {
	return func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = img }
}
func partition(n int32) setOpt {
	return func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(n) }
}
func claims(whenDeleted, whenScaled appsv1.PersistentVolumeClaimRetentionPolicyType) setOpt {
	return func(s *appsv1.StatefulSet) {
		s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}
		s.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: whenDeleted, WhenScaled: whenScaled}
	}
}

// world is a set with the pods, claims and revisions the previous syncs
// made: build it by running Decide and applying its plan.
type world struct {
	set    *appsv1.StatefulSet
	pods   map[string]*corev1.Pod
	claims map[string]*corev1.PersistentVolumeClaim
	revs   []*appsv1.ControllerRevision
}

func newWorld(set *appsv1.StatefulSet) *world {
	return &world{set: set, pods: map[string]*corev1.Pod{}, claims: map[string]*corev1.PersistentVolumeClaim{}}
}

func (w *world) decide(t *testing.T) statefulset.Plan {
	t.Helper()
	var pods []*corev1.Pod
	for _, p := range w.pods {
		pods = append(pods, p)
	}
	plan, err := statefulset.Decide(statefulset.Input{Set: w.set, Pods: pods, Claims: w.claims, Revisions: w.revs, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// apply carries plan out; new pods are Running and Ready when ready.
func (w *world) apply(plan statefulset.Plan, ready bool) {
	if plan.Revision != nil {
		r := plan.Revision.DeepCopy()
		r.UID = types.UID("rev-" + r.Name)
		w.revs = append(w.revs, r)
	}
	for _, c := range plan.CreateClaims {
		w.claims[c.Name] = c
	}
	for _, c := range plan.OwnClaims {
		w.claims[c.Name] = c
	}
	for _, p := range plan.CreatePods {
		p = p.DeepCopy()
		p.UID = types.UID("uid-" + p.Name)
		if ready {
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		w.pods[p.Name] = p
	}
	for _, p := range plan.DeletePods {
		delete(w.pods, p.Name)
	}
	w.set.Status = plan.Status
}

// converge syncs until nothing is left to do, pods coming up ready.
func (w *world) converge(t *testing.T) {
	t.Helper()
	for range 50 {
		plan := w.decide(t)
		if plan.Revision == nil && len(plan.CreatePods)+len(plan.DeletePods)+len(plan.CreateClaims)+len(plan.OwnClaims) == 0 {
			w.set.Status = plan.Status
			return
		}
		w.apply(plan, true)
	}
	t.Fatal("did not converge in 50 syncs")
}

func names[T metav1.Object](objs []T) string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name string
		// setup builds the world before the sync under test.
		setup       func(t *testing.T) *world
		wantCreate  string
		wantDelete  string
		wantClaims  string
		wantStatus  func(t *testing.T, st appsv1.StatefulSetStatus)
		wantOwnerOf map[string]string // claim → owner kinds after the sync, comma-joined
	}{
		{
			name:       "an ordered set creates only its first pod, with its revision",
			setup:      func(*testing.T) *world { return newWorld(mkSet(3)) },
			wantCreate: "web-0",
		},
		{
			name: "an ordered set waits while its last pod is not ready",
			setup: func(t *testing.T) *world {
				w := newWorld(mkSet(3))
				w.apply(w.decide(t), false)
				return w
			},
		},
		{
			name: "an ordered set creates the next ordinal once the previous is ready",
			setup: func(t *testing.T) *world {
				w := newWorld(mkSet(3))
				w.apply(w.decide(t), true)
				return w
			},
			wantCreate: "web-1",
		},
		{
			name:       "a parallel set creates every pod at once",
			setup:      func(*testing.T) *world { return newWorld(mkSet(3, parallel)) },
			wantCreate: "web-0,web-1,web-2",
		},
		{
			name: "scaling an ordered set down deletes the highest ordinal first, one at a time",
			setup: func(t *testing.T) *world {
				w := newWorld(mkSet(3))
				w.converge(t)
				w.set.Spec.Replicas = ptr.To[int32](1)
				return w
			},
			wantDelete: "web-2",
		},
		{
			name: "scaling a parallel set down deletes every extra pod at once",
			setup: func(t *testing.T) *world {
				w := newWorld(mkSet(3, parallel))
				w.converge(t)
				w.set.Spec.Replicas = ptr.To[int32](1)
				return w
			},
			wantDelete: "web-1,web-2",
		},
		{
			name: "a failed pod is deleted to be recreated",
			setup: func(t *testing.T) *world {
				w := newWorld(mkSet(2))
				w.converge(t)
				w.pods["web-0"].Status.Phase = corev1.PodFailed
				return w
			},
			wantDelete: "web-0",
		},
		{
			name: "a rolling update replaces the highest ordinal first",
			setup: func(t *testing.T) *world {
				w := newWorld(mkSet(3))
				w.converge(t)
				image("v2")(w.set)
				return w
			},
			wantDelete: "web-2",
		},
		{
			name: "a rolling update with partition 2 recreates an ordinal below it from the current revision",
			setup: func(t *testing.T) *world {
				w := newWorld(mkSet(3))
				w.converge(t)
				image("v2")(w.set)
				partition(2)(w.set)
				w.converge(t)
				delete(w.pods, "web-0")
				return w
			},
			wantCreate: "web-0",
			wantStatus: func(t *testing.T, st appsv1.StatefulSetStatus) {
				if st.UpdatedReplicas != 1 || st.CurrentRevision == st.UpdateRevision {
					t.Errorf("partitioned: got updated %d, current %q, update %q; want 1 updated and two revisions", st.UpdatedReplicas, st.CurrentRevision, st.UpdateRevision)
				}
			},
		},
		{
			name: "OnDelete leaves old pods alone after a template change",
			setup: func(t *testing.T) *world {
				w := newWorld(mkSet(2, onDelete))
				w.converge(t)
				image("v2")(w.set)
				return w
			},
		},
		{
			name:        "claims from the templates are created with the first pod, unowned under Retain",
			setup:       func(*testing.T) *world { return newWorld(mkSet(2, claims("Retain", "Retain"))) },
			wantCreate:  "web-0",
			wantClaims:  "data-web-0",
			wantOwnerOf: map[string]string{"data-web-0": ""},
		},
		{
			name:        "claims are owned by the set when whenDeleted is Delete",
			setup:       func(*testing.T) *world { return newWorld(mkSet(1, claims("Delete", "Retain"))) },
			wantCreate:  "web-0",
			wantClaims:  "data-web-0",
			wantOwnerOf: map[string]string{"data-web-0": "StatefulSet"},
		},
		{
			name: "no pod is created while its claim is being deleted",
			setup: func(*testing.T) *world {
				w := newWorld(mkSet(2, claims("Retain", "Retain")))
				w.claims["data-web-0"] = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-web-0", Namespace: "default", DeletionTimestamp: &metav1.Time{Time: t0}}}
				return w
			},
		},
		{
			name: "a condemned pod owns its claims when whenScaled is Delete",
			setup: func(t *testing.T) *world {
				w := newWorld(mkSet(2, claims("Retain", "Delete")))
				w.converge(t)
				w.set.Spec.Replicas = ptr.To[int32](1)
				return w
			},
			wantDelete:  "web-1",
			wantOwnerOf: map[string]string{"data-web-1": "Pod", "data-web-0": ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.setup(t)
			plan := w.decide(t)
			if got := names(plan.CreatePods); got != tt.wantCreate {
				t.Errorf("create pods %q, want %q", got, tt.wantCreate)
			}
			if got := names(plan.DeletePods); got != tt.wantDelete {
				t.Errorf("delete pods %q, want %q", got, tt.wantDelete)
			}
			if got := names(plan.CreateClaims); got != tt.wantClaims {
				t.Errorf("create claims %q, want %q", got, tt.wantClaims)
			}
			for _, p := range plan.CreatePods {
				ord := p.Labels[statefulset.PodIndexLabel]
				if p.Labels[statefulset.PodNameLabel] != p.Name || p.Spec.Hostname != p.Name || p.Name != "web-"+ord || p.Labels[statefulset.RevisionLabel] == "" {
					t.Errorf("pod %s: labels %v hostname %q", p.Name, p.Labels, p.Spec.Hostname)
				}
			}
			w.apply(plan, true)
			for claim, want := range tt.wantOwnerOf {
				c, ok := w.claims[claim]
				if !ok {
					t.Errorf("claim %s missing", claim)
					continue
				}
				var kinds []string
				for _, r := range c.OwnerReferences {
					kinds = append(kinds, r.Kind)
				}
				if got := strings.Join(kinds, ","); got != want {
					t.Errorf("claim %s owners %q, want %q", claim, got, want)
				}
			}
			if tt.wantStatus != nil {
				tt.wantStatus(t, plan.Status)
			}
		})
	}
}

func TestRolloutFinishes(t *testing.T) {
	w := newWorld(mkSet(3))
	w.converge(t)
	first := w.set.Status
	if first.Replicas != 3 || first.ReadyReplicas != 3 || first.CurrentRevision != first.UpdateRevision || first.ObservedGeneration != 1 {
		t.Fatalf("after creation: status %+v", first)
	}
	image("v2")(w.set)
	w.converge(t)
	st := w.set.Status
	if st.UpdateRevision == first.UpdateRevision || st.CurrentRevision != st.UpdateRevision || st.UpdatedReplicas != 3 || st.CurrentReplicas != 3 {
		t.Fatalf("after the rollout: status %+v", st)
	}
	for _, p := range w.pods {
		if p.Spec.Containers[0].Image != "v2" {
			t.Errorf("pod %s runs %s after the rollout", p.Name, p.Spec.Containers[0].Image)
		}
	}
	if len(w.revs) != 2 || w.revs[1].Revision != 2 {
		t.Errorf("revisions: got %d, want 2 numbered 1 and 2", len(w.revs))
	}
}

func minReady(s int32) setOpt { return func(set *appsv1.StatefulSet) { set.Spec.MinReadySeconds = s } }

// readyFor makes pod name Running and Ready since d before t0.
func (w *world) readyFor(name string, d time.Duration) {
	p := w.pods[name]
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(t0.Add(-d))}}
}

// step runs one sync and applies it, new pods coming up ready.
func (w *world) step(t *testing.T) {
	t.Helper()
	w.apply(w.decide(t), true)
}

func TestMinReadySeconds(t *testing.T) {
	const min = 10 * time.Second
	tests := []struct {
		name          string
		setup         func(t *testing.T) *world
		wantCreate    string
		wantDelete    string
		wantReady     int32
		wantAvailable int32
		wantRequeue   time.Duration
	}{
		{
			name: "a pod ready for minReadySeconds less 1 ms is not available, and the ordered set waits and requeues for the rest",
			setup: func(t *testing.T) *world {
				w := newWorld(mkSet(3, minReady(10)))
				w.step(t)
				w.readyFor("web-0", min-time.Millisecond)
				return w
			},
			wantReady: 1, wantAvailable: 0, wantRequeue: 2 * time.Millisecond,
		},
		{
			name: "a pod ready for exactly minReadySeconds is not yet available, as upstream (ready for more than that)",
			setup: func(t *testing.T) *world {
				w := newWorld(mkSet(3, minReady(10)))
				w.step(t)
				w.readyFor("web-0", min)
				return w
			},
			wantReady: 1, wantAvailable: 0, wantRequeue: time.Millisecond,
		},
		{
			name: "a pod ready for minReadySeconds plus 1 ms is available and the ordered set creates the next ordinal",
			setup: func(t *testing.T) *world {
				w := newWorld(mkSet(3, minReady(10)))
				w.step(t)
				w.readyFor("web-0", min+time.Millisecond)
				return w
			},
			wantCreate: "web-1", wantReady: 1, wantAvailable: 1,
		},
		{
			name: "with minReadySeconds 0 a pod that just became ready is available",
			setup: func(t *testing.T) *world {
				w := newWorld(mkSet(3))
				w.step(t)
				w.readyFor("web-0", 0)
				return w
			},
			wantCreate: "web-1", wantReady: 1, wantAvailable: 1,
		},
		{
			name: "a ready pod whose condition has no transition time never becomes available",
			setup: func(t *testing.T) *world {
				w := newWorld(mkSet(3, minReady(10)))
				w.step(t)
				return w
			},
			wantReady: 1, wantAvailable: 0,
		},
		{
			name: "a parallel set does not wait for availability and requeues for the pod closest to it",
			setup: func(t *testing.T) *world {
				w := newWorld(mkSet(3, parallel, minReady(10)))
				w.step(t)
				w.readyFor("web-0", 3*time.Second)
				w.readyFor("web-1", 7*time.Second)
				w.readyFor("web-2", time.Hour)
				w.set.Spec.Replicas = ptr.To[int32](4)
				return w
			},
			wantCreate: "web-3", wantReady: 3, wantAvailable: 1, wantRequeue: 3*time.Second + time.Millisecond,
		},
		{
			name: "a rolling update waits for the updated pod to be available before replacing the next",
			setup: func(t *testing.T) *world {
				w := rolledOne(t)
				w.readyFor("web-2", 5*time.Second)
				return w
			},
			wantReady: 3, wantAvailable: 2, wantRequeue: 5*time.Second + time.Millisecond,
		},
		{
			name: "a rolling update replaces the next ordinal once the updated pod is available",
			setup: func(t *testing.T) *world {
				w := rolledOne(t)
				w.readyFor("web-2", min+time.Second)
				return w
			},
			wantDelete: "web-1", wantReady: 3, wantAvailable: 3,
		},
		{
			name: "scaling an ordered set down waits for the pods that stay to be available",
			setup: func(t *testing.T) *world {
				w := newWorld(mkSet(3))
				w.converge(t)
				minReady(10)(w.set)
				w.readyFor("web-0", time.Hour)
				w.readyFor("web-1", time.Second)
				w.readyFor("web-2", time.Hour)
				w.set.Spec.Replicas = ptr.To[int32](2)
				return w
			},
			wantReady: 3, wantAvailable: 2, wantRequeue: 9*time.Second + time.Millisecond,
		},
		{
			name: "scaling an ordered set down keeps an unavailable condemned pod above a lower unavailable one",
			setup: func(t *testing.T) *world {
				w := newWorld(mkSet(3))
				w.converge(t)
				minReady(10)(w.set)
				w.readyFor("web-0", time.Hour)
				w.readyFor("web-1", time.Second)
				w.readyFor("web-2", 2*time.Second)
				w.set.Spec.Replicas = ptr.To[int32](1)
				return w
			},
			wantReady: 3, wantAvailable: 1, wantRequeue: 8*time.Second + time.Millisecond,
		},
		{
			name: "scaling an ordered set down deletes an unavailable condemned pod when it is the lowest unavailable one",
			setup: func(t *testing.T) *world {
				w := newWorld(mkSet(3))
				w.converge(t)
				minReady(10)(w.set)
				w.readyFor("web-0", time.Hour)
				w.readyFor("web-1", time.Hour)
				w.readyFor("web-2", 2*time.Second)
				w.set.Spec.Replicas = ptr.To[int32](1)
				return w
			},
			wantDelete: "web-2", wantReady: 3, wantAvailable: 2, wantRequeue: 8*time.Second + time.Millisecond,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := tt.setup(t).decide(t)
			if got := names(plan.CreatePods); got != tt.wantCreate {
				t.Errorf("create pods %q, want %q", got, tt.wantCreate)
			}
			if got := names(plan.DeletePods); got != tt.wantDelete {
				t.Errorf("delete pods %q, want %q", got, tt.wantDelete)
			}
			if st := plan.Status; st.ReadyReplicas != tt.wantReady || st.AvailableReplicas != tt.wantAvailable {
				t.Errorf("ready %d available %d, want %d and %d", st.ReadyReplicas, st.AvailableReplicas, tt.wantReady, tt.wantAvailable)
			}
			if plan.RequeueAfter != tt.wantRequeue {
				t.Errorf("requeue after %v, want %v", plan.RequeueAfter, tt.wantRequeue)
			}
		})
	}
}

// rolledOne is a 3-pod set with minReadySeconds 10 in the middle of a
// rolling update: web-2 runs the new template, web-0 and web-1 the old one
// and have been ready for an hour.
func rolledOne(t *testing.T) *world {
	w := newWorld(mkSet(3))
	w.converge(t)
	image("v2")(w.set)
	w.step(t) // deletes web-2
	w.step(t) // creates it from the new revision
	if w.pods["web-2"] == nil || w.pods["web-2"].Spec.Containers[0].Image != "v2" {
		t.Fatalf("web-2 not recreated from the new template: %+v", w.pods["web-2"])
	}
	minReady(10)(w.set)
	w.readyFor("web-0", time.Hour)
	w.readyFor("web-1", time.Hour)
	return w
}
