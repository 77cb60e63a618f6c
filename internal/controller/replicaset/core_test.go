package replicaset_test

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodeplane/nodeplane/internal/controller/replicaset"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func mkRS(name string, n int32, opts ...func(*appsv1.ReplicaSet)) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Generation: 2},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(n),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name, "tier": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "sleep"}}},
			},
		},
	}
	for _, o := range opts {
		o(rs)
	}
	return rs
}

type podOpt func(*corev1.Pod)

func mkPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0)},
		Spec:       corev1.PodSpec{NodeName: "n1"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// of makes the pod a member of rs: its labels and controller reference.
func of(rs *appsv1.ReplicaSet) podOpt {
	return func(p *corev1.Pod) {
		p.Labels = map[string]string{"app": rs.Name, "tier": "web"}
		p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(rs, replicaset.Kind)}
	}
}

func labelled(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		p.Labels = map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func ownedBy(uid string) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "other", UID: types.UID(uid), Controller: ptr.To(true)}}
	}
}

func ready(since time.Duration) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(since)),
		})
	}
}

func notReady(p *corev1.Pod) {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse})
}

func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }

func terminating(p *corev1.Pod) {
	ts := metav1.NewTime(t0)
	p.DeletionTimestamp = &ts
}

func node(n string) podOpt  { return func(p *corev1.Pod) { p.Spec.NodeName = n } }
func unbound(p *corev1.Pod) { p.Spec.NodeName = "" }
func created(d time.Duration) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t0.Add(d)) }
}
func restarts(n int32) podOpt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "a", RestartCount: 1}, {Name: "c", RestartCount: n}}
	}
}
func cost(v string) podOpt {
	return func(p *corev1.Pod) {
		p.Annotations = map[string]string{replicaset.DeletionCostAnnotation: v}
	}
}

func names(pods []*corev1.Pod) []string {
	out := []string{}
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestDecide(t *testing.T) {
	web := mkRS("web", 3)
	going := mkRS("web", 3, func(rs *appsv1.ReplicaSet) {
		ts := metav1.NewTime(t0)
		rs.DeletionTimestamp = &ts
	})
	tests := []struct {
		name        string
		rs          *appsv1.ReplicaSet
		pods        []*corev1.Pod
		unsettled   bool
		burst       int
		wantCreate  int
		wantDelete  []string
		wantAdopt   []string
		wantRelease []string
		wantStatus  int32 // status.replicas
	}{
		{name: "a new replica set of three creates three pods", rs: web, wantCreate: 3},
		{
			name: "a replica set with its three pods does nothing", rs: web,
			pods:       []*corev1.Pod{mkPod("a", of(web)), mkPod("b", of(web)), mkPod("c", of(web))},
			wantStatus: 3,
		},
		{
			name: "a terminating pod does not count and is replaced", rs: web,
			pods:       []*corev1.Pod{mkPod("a", of(web)), mkPod("b", of(web)), mkPod("c", of(web), terminating)},
			wantCreate: 1, wantStatus: 2,
		},
		{
			name: "failed and succeeded pods do not count and are replaced", rs: web,
			pods:       []*corev1.Pod{mkPod("a", of(web)), mkPod("b", of(web), phase(corev1.PodFailed)), mkPod("c", of(web), phase(corev1.PodSucceeded))},
			wantCreate: 2, wantStatus: 1,
		},
		{
			name: "two extra pods are deleted, the unbound one first", rs: web,
			pods: []*corev1.Pod{
				mkPod("a", of(web)), mkPod("b", of(web)), mkPod("c", of(web), created(time.Minute)),
				mkPod("d", of(web)), mkPod("e", of(web), unbound),
			},
			wantDelete: []string{"e", "c"}, wantStatus: 5,
		},
		{
			name: "while earlier writes are unobserved nothing is created, but status is written", rs: web,
			pods: []*corev1.Pod{mkPod("a", of(web))}, unsettled: true, wantStatus: 1,
		},
		{
			name: "while earlier writes are unobserved nothing is deleted", rs: mkRS("web", 0),
			pods: []*corev1.Pod{mkPod("a", of(web))}, unsettled: true, wantStatus: 1,
		},
		{name: "creates are capped by the burst", rs: mkRS("web", 1000), burst: 100, wantCreate: 100},
		{name: "creates default to a burst of 500", rs: mkRS("web", 1000), wantCreate: 500},
		{
			name: "deletes are capped by the burst", rs: mkRS("web", 0), burst: 1,
			pods:       []*corev1.Pod{mkPod("a", of(web), ready(0)), mkPod("b", of(web), notReady)},
			wantDelete: []string{"b"}, wantStatus: 2,
		},
		{
			name: "a replica set being deleted creates nothing and adopts nothing", rs: going,
			pods: []*corev1.Pod{mkPod("orphan", labelled("app", "web"))},
		},
		{
			name: "pods controlled by another owner are ignored even if they match", rs: web,
			pods:       []*corev1.Pod{mkPod("x", labelled("app", "web"), ownedBy("someone"))},
			wantCreate: 3,
		},
		{
			name: "a matching orphan is adopted and counts", rs: web,
			pods:       []*corev1.Pod{mkPod("a", of(web)), mkPod("b", of(web)), mkPod("orphan", labelled("app", "web"))},
			wantAdopt:  []string{"orphan"},
			wantStatus: 3,
		},
		{
			name: "an orphan that does not match, or is terminating, or has ended, is not adopted", rs: web,
			pods: []*corev1.Pod{
				mkPod("a", of(web)), mkPod("b", of(web)), mkPod("c", of(web)),
				mkPod("db", labelled("app", "db")), mkPod("going", labelled("app", "web"), terminating),
				mkPod("done", labelled("app", "web"), phase(corev1.PodSucceeded)),
			},
			wantStatus: 3,
		},
		{
			name: "an owned pod relabelled out of the selector is released and replaced", rs: web,
			pods:        []*corev1.Pod{mkPod("a", of(web)), mkPod("b", of(web)), mkPod("c", of(web), labelled("app", "debug"))},
			wantRelease: []string{"c"}, wantCreate: 1, wantStatus: 2,
		},
		{
			name: "a replica set being deleted does not release its pods", rs: going,
			pods:       []*corev1.Pod{mkPod("a", of(web), labelled("app", "debug"))},
			wantStatus: 0,
		},
		{
			name: "scaling to zero deletes every pod", rs: mkRS("web", 0),
			pods:       []*corev1.Pod{mkPod("a", of(web)), mkPod("b", of(web), created(time.Second))},
			wantDelete: []string{"b", "a"}, wantStatus: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := replicaset.Decide(replicaset.Input{RS: tt.rs, Pods: tt.pods, Settled: !tt.unsettled, BurstReplicas: tt.burst, Now: t0})
			if err != nil {
				t.Fatal(err)
			}
			if p.Create != tt.wantCreate {
				t.Errorf("create: got %d, want %d", p.Create, tt.wantCreate)
			}
			for _, c := range []struct {
				what      string
				got, want []string
			}{{"delete", names(p.Delete), tt.wantDelete}, {"adopt", names(p.Adopt), tt.wantAdopt}, {"release", names(p.Release), tt.wantRelease}} {
				if c.want == nil {
					c.want = []string{}
				}
				if !reflect.DeepEqual(c.got, c.want) {
					t.Errorf("%s: got %q, want %q", c.what, c.got, c.want)
				}
			}
			if p.Status.Replicas != tt.wantStatus {
				t.Errorf("status.replicas: got %d, want %d", p.Status.Replicas, tt.wantStatus)
			}
			if p.Status.ObservedGeneration != 2 {
				t.Errorf("status.observedGeneration: got %d, want 2", p.Status.ObservedGeneration)
			}
		})
	}
}

func TestDecideRefusesABadSelector(t *testing.T) {
	rs := mkRS("web", 1, func(rs *appsv1.ReplicaSet) {
		rs.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Sometimes"}}}
	})
	if _, err := replicaset.Decide(replicaset.Input{RS: rs, Settled: true, Now: t0}); err == nil {
		t.Fatal("got no error for an invalid selector")
	}
}

func TestVictims(t *testing.T) {
	tests := []struct {
		name    string
		pods    []*corev1.Pod
		related []*corev1.Pod
		n       int
		want    []string
	}{
		{
			name: "unbound pods go before bound ones",
			pods: []*corev1.Pod{mkPod("bound", ready(0)), mkPod("unbound", unbound, phase(corev1.PodPending))},
			n:    1, want: []string{"unbound"},
		},
		{
			name: "pending goes before unknown, unknown before running",
			pods: []*corev1.Pod{mkPod("running"), mkPod("unknown", phase(corev1.PodUnknown)), mkPod("pending", phase(corev1.PodPending))},
			n:    3, want: []string{"pending", "unknown", "running"},
		},
		{
			name: "not ready goes before ready",
			pods: []*corev1.Pod{mkPod("ready", ready(0)), mkPod("notready", notReady, created(-time.Hour))},
			n:    1, want: []string{"notready"},
		},
		{
			name: "a lower deletion cost goes first; an invalid cost counts as zero",
			pods: []*corev1.Pod{mkPod("zero", ready(0)), mkPod("cheap", ready(0), cost("-5")), mkPod("dear", ready(0), cost("100")), mkPod("bad", ready(0), cost("x"), created(-time.Second))},
			n:    4, want: []string{"cheap", "zero", "bad", "dear"},
		},
		{
			name:    "pods on a crowded node go first, counting sibling pods",
			pods:    []*corev1.Pod{mkPod("alone", ready(0), node("n1")), mkPod("crowded", ready(0), node("n2"), created(-time.Hour))},
			related: []*corev1.Pod{mkPod("sibling", node("n2"))},
			n:       1, want: []string{"crowded"},
		},
		{
			name: "ready for a shorter time goes first",
			pods: []*corev1.Pod{mkPod("long", ready(-time.Hour)), mkPod("short", ready(-time.Minute), created(-2*time.Hour))},
			n:    1, want: []string{"short"},
		},
		{
			name: "more restarts go first",
			pods: []*corev1.Pod{mkPod("calm", restarts(0)), mkPod("flappy", restarts(7), created(-time.Hour))},
			n:    1, want: []string{"flappy"},
		},
		{
			name: "newer goes first, then by name",
			pods: []*corev1.Pod{mkPod("old"), mkPod("new-b", created(time.Minute)), mkPod("new-a", created(time.Minute))},
			n:    3, want: []string{"new-a", "new-b", "old"},
		},
		{
			name: "asking for more than there are returns them all",
			pods: []*corev1.Pod{mkPod("a")},
			n:    5, want: []string{"a"},
		},
		{name: "asking for none returns none", pods: []*corev1.Pod{mkPod("a")}, n: 0, want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := names(replicaset.Victims(tt.pods, tt.related, tt.n)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	rs := mkRS("web", 4, func(rs *appsv1.ReplicaSet) { rs.Spec.MinReadySeconds = 30 })
	pods := []*corev1.Pod{
		mkPod("available", of(rs), ready(-time.Minute)),
		mkPod("warming", of(rs), ready(-20*time.Second)),
		mkPod("unlabelled", of(rs), labelled("app", "web"), notReady),
		mkPod("going", of(rs), terminating, ready(-time.Hour)),
		mkPod("strangers-going", labelled("app", "web"), terminating),
	}
	p, err := replicaset.Decide(replicaset.Input{RS: rs, Pods: pods, Settled: true, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	want := appsv1.ReplicaSetStatus{
		Replicas: 3, FullyLabeledReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 1,
		TerminatingReplicas: ptr.To[int32](1), ObservedGeneration: 2,
	}
	if !reflect.DeepEqual(p.Status, want) {
		t.Errorf("got %+v, want %+v", p.Status, want)
	}
	if want := 10*time.Second + time.Millisecond; p.RequeueAfter != want {
		t.Errorf("requeue after: got %v, want %v (when the warming pod becomes available)", p.RequeueAfter, want)
	}
	if p.Create != 1 {
		t.Errorf("create: got %d, want 1", p.Create)
	}

	// Ten seconds on, the warming pod is exactly at the limit (not yet),
	// and just after it counts.
	p, _ = replicaset.Decide(replicaset.Input{RS: rs, Pods: pods, Settled: true, Now: t0.Add(10 * time.Second)})
	if p.Status.AvailableReplicas != 1 {
		t.Errorf("at exactly minReadySeconds: got %d available, want 1", p.Status.AvailableReplicas)
	}
	p, _ = replicaset.Decide(replicaset.Input{RS: rs, Pods: pods, Settled: true, Now: t0.Add(10*time.Second + time.Millisecond)})
	if p.Status.AvailableReplicas != 2 || p.RequeueAfter != 0 {
		t.Errorf("after minReadySeconds: got %d available, requeue %v; want 2, none", p.Status.AvailableReplicas, p.RequeueAfter)
	}
}

func TestWithFailure(t *testing.T) {
	other := appsv1.ReplicaSetCondition{Type: "Other", Status: corev1.ConditionTrue}
	failed := replicaset.WithFailure(appsv1.ReplicaSetStatus{Conditions: []appsv1.ReplicaSetCondition{other}}, replicaset.ReasonFailedCreate, "quota", t0)
	if len(failed.Conditions) != 2 || failed.Conditions[1].Type != appsv1.ReplicaSetReplicaFailure ||
		failed.Conditions[1].Reason != "FailedCreate" || failed.Conditions[1].Message != "quota" || !failed.Conditions[1].LastTransitionTime.Time.Equal(t0) {
		t.Fatalf("a failed create: got %+v", failed.Conditions)
	}
	again := replicaset.WithFailure(failed, replicaset.ReasonFailedDelete, "later", t0.Add(time.Hour))
	if !reflect.DeepEqual(again, failed) {
		t.Errorf("a second failure changed the existing condition: got %+v", again.Conditions)
	}
	ok := replicaset.WithFailure(failed, "", "", t0)
	if !reflect.DeepEqual(ok.Conditions, []appsv1.ReplicaSetCondition{other}) {
		t.Errorf("a good sync: got %+v, want only the other condition", ok.Conditions)
	}
	if len(failed.Conditions) != 2 {
		t.Errorf("removing the condition modified the input: %+v", failed.Conditions)
	}
}

func TestPodAvailable(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		mrs  int32
		want bool
	}{
		{"a ready pod is available at once without minReadySeconds", mkPod("p", ready(0)), 0, true},
		{"a pod without a Ready condition is not available", mkPod("p"), 0, false},
		{"a not-ready pod is not available", mkPod("p", notReady), 0, false},
		{"a pod ready for longer than minReadySeconds is available", mkPod("p", ready(-11*time.Second)), 10, true},
		{"a pod ready for exactly minReadySeconds is not yet available", mkPod("p", ready(-10*time.Second)), 10, false},
		{"a ready pod without a transition time never becomes available with minReadySeconds", mkPod("p", func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}), 10, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := replicaset.PodAvailable(tt.pod, tt.mrs, t0); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPodFromTemplate(t *testing.T) {
	rs := mkRS("web", 1, func(rs *appsv1.ReplicaSet) {
		rs.Spec.Template.Annotations = map[string]string{"a": "b"}
		rs.Spec.Template.Finalizers = []string{"f"}
	})
	ref := *metav1.NewControllerRef(rs, replicaset.Kind)
	pod := replicaset.PodFromTemplate(&rs.Spec.Template, "default", "web-", ref)
	if pod.GenerateName != "web-" || pod.Namespace != "default" || pod.Name != "" {
		t.Errorf("got name %q generateName %q namespace %q", pod.Name, pod.GenerateName, pod.Namespace)
	}
	if !reflect.DeepEqual(pod.Labels, rs.Spec.Template.Labels) || pod.Annotations["a"] != "b" || !reflect.DeepEqual(pod.Finalizers, []string{"f"}) {
		t.Errorf("got labels %v annotations %v finalizers %v", pod.Labels, pod.Annotations, pod.Finalizers)
	}
	r := pod.OwnerReferences
	if len(r) != 1 || r[0].Kind != "ReplicaSet" || r[0].APIVersion != "apps/v1" || r[0].UID != rs.UID ||
		!ptr.Deref(r[0].Controller, false) || !ptr.Deref(r[0].BlockOwnerDeletion, false) {
		t.Errorf("got owner references %+v, want a blocking controller reference to the replica set", r)
	}
	pod.Labels["x"] = "y"
	pod.Spec.Containers[0].Image = "changed"
	if rs.Spec.Template.Labels["x"] != "" || rs.Spec.Template.Spec.Containers[0].Image != "sleep" {
		t.Error("changing the pod changed the template")
	}
}
