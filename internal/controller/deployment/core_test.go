package deployment_test

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodeplane/nodeplane/internal/controller/deployment"
	"github.com/nodeplane/nodeplane/internal/controller/replicaset"
)

func TestFenceposts(t *testing.T) {
	tests := []struct {
		name                   string
		replicas               int32
		surge, unavailable     string
		wantSurge, wantUnavail int32
		wantMaxUnavailable     int32
	}{
		{name: "integers are taken as they are", replicas: 10, surge: "3", unavailable: "2", wantSurge: 3, wantUnavail: 2, wantMaxUnavailable: 2},
		{name: "25% of 10: the surge rounds up to 3, unavailable down to 2", replicas: 10, surge: "25%", unavailable: "25%", wantSurge: 3, wantUnavail: 2, wantMaxUnavailable: 2},
		{name: "30% of 5: surge 2, unavailable 1", replicas: 5, surge: "30%", unavailable: "30%", wantSurge: 2, wantUnavail: 1, wantMaxUnavailable: 1},
		{name: "25% of 1: surge 1, unavailable 0", replicas: 1, surge: "25%", unavailable: "25%", wantSurge: 1, wantUnavail: 0, wantMaxUnavailable: 0},
		{name: "both rounding to zero makes unavailable 1", replicas: 3, surge: "0", unavailable: "10%", wantSurge: 0, wantUnavail: 1, wantMaxUnavailable: 1},
		{name: "unavailable above replicas is capped by MaxUnavailable", replicas: 2, surge: "0", unavailable: "5", wantSurge: 0, wantUnavail: 5, wantMaxUnavailable: 2},
		{name: "100% surge doubles", replicas: 4, surge: "100%", unavailable: "0", wantSurge: 4, wantUnavail: 0, wantMaxUnavailable: 0},
		{name: "zero replicas have no unavailable budget", replicas: 0, surge: "1", unavailable: "1", wantSurge: 1, wantUnavail: 1, wantMaxUnavailable: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDeployment(tt.replicas, surge(tt.surge, tt.unavailable))
			s, u, err := deployment.Fenceposts(d)
			if err != nil {
				t.Fatal(err)
			}
			if s != tt.wantSurge || u != tt.wantUnavail {
				t.Errorf("got surge %d unavailable %d, want %d and %d", s, u, tt.wantSurge, tt.wantUnavail)
			}
			if got := deployment.MaxSurge(d); got != tt.wantSurge {
				t.Errorf("MaxSurge: got %d, want %d", got, tt.wantSurge)
			}
			if got := deployment.MaxUnavailable(d); got != tt.wantMaxUnavailable {
				t.Errorf("MaxUnavailable: got %d, want %d", got, tt.wantMaxUnavailable)
			}
		})
	}
	rc := newDeployment(3, recreate)
	if s, u, _ := deployment.Fenceposts(rc); s != 0 || u != 0 || deployment.MaxUnavailable(rc) != 0 {
		t.Errorf("Recreate: got surge %d unavailable %d, want none", s, u)
	}
	bad := newDeployment(3, surge("x%", "1"))
	if _, err := deployment.Decide(deployment.Input{Deployment: bad, Now: t0}); err == nil {
		t.Error("a maxSurge that does not parse: got no error")
	}
}

func TestRollout(t *testing.T) {
	tests := []struct {
		name      string
		d         *appsv1.Deployment
		image     string
		wantTrace []string
		wantDone  string
	}{
		{
			name: "25% of 10: surge 3 and 2 unavailable, the old scaled down in the same sync that creates the new",
			d:    newDeployment(10), image: "v2",
			wantTrace: []string{"v1=8 v2=3", "v1=8 v2=5", "v1=3 v2=5", "v1=3 v2=10", "v1=0 v2=10"},
			wantDone:  "successfully rolled out",
		},
		{
			name: "no surge and one unavailable replaces one pod at a time",
			d:    newDeployment(3, surge("0", "1")), image: "v2",
			wantTrace: []string{"v1=2 v2=0", "v1=2 v2=1", "v1=1 v2=1", "v1=1 v2=2", "v1=0 v2=2", "v1=0 v2=3"},
			wantDone:  "successfully rolled out",
		},
		{
			name: "one surge and none unavailable adds before it removes",
			d:    newDeployment(3, surge("1", "0")), image: "v2",
			wantTrace: []string{"v1=3 v2=1", "v1=2 v2=1", "v1=2 v2=2", "v1=1 v2=2", "v1=1 v2=3", "v1=0 v2=3"},
			wantDone:  "successfully rolled out",
		},
		{
			name: "30% of 5 rounds the surge up to 2 and unavailable down to 1",
			d:    newDeployment(5, surge("30%", "30%")), image: "v2",
			wantTrace: []string{"v1=4 v2=2", "v1=4 v2=3", "v1=1 v2=3", "v1=1 v2=5", "v1=0 v2=5"},
			wantDone:  "successfully rolled out",
		},
		{
			name: "a template that never becomes available stops within the budget and keeps the old pods",
			d:    newDeployment(4), image: "broken",
			wantTrace: []string{"v1=3 broken=1", "v1=3 broken=2"},
			wantDone:  "2 out of 4 new replicas updated",
		},
		{
			name: "Recreate scales the old to zero, then creates the new at full size",
			d:    newDeployment(3, recreate), image: "v2",
			wantTrace: []string{"v1=0", "v1=0 v2=3"},
			wantDone:  "successfully rolled out",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, tt.d)
			if got := w.run(20); !reflect.DeepEqual(got, []string{"v1=" + itoa(*tt.d.Spec.Replicas)}) {
				t.Fatalf("first rollout: got %q", got)
			}
			if got := rolledOut(w.d); got != "successfully rolled out" {
				t.Fatalf("first rollout: %s", got)
			}
			w.setImage(tt.image)
			if got := w.run(20); !reflect.DeepEqual(got, tt.wantTrace) {
				t.Errorf("got steps %q, want %q", got, tt.wantTrace)
			}
			if got := rolledOut(w.d); got != tt.wantDone {
				t.Errorf("rollout status: got %q, want %q", got, tt.wantDone)
			}
		})
	}
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

func TestRolloutStatusAndConditions(t *testing.T) {
	w := newWorld(t, newDeployment(4))
	p := w.step()
	if p.Create == nil || p.Create.RS.Name != w.sets[0].Name || p.Create.Event == nil ||
		p.Create.Event.Message != "Scaled up replica set "+w.sets[0].Name+" from 0 to 4" || p.Create.Event.Reason != "ScalingReplicaSet" {
		t.Fatalf("first sync: got create %+v", p.Create)
	}
	c := condition(w.d, appsv1.DeploymentProgressing)
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason != "NewReplicaSetCreated" || c.Message != `Created new replica set "`+w.sets[0].Name+`"` {
		t.Fatalf("after creating: got Progressing %+v", c)
	}
	if c := condition(w.d, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionFalse || c.Reason != "MinimumReplicasUnavailable" ||
		c.Message != "Deployment does not have minimum availability." {
		t.Fatalf("after creating: got Available %+v", c)
	}
	if w.d.Annotations["deployment.kubernetes.io/revision"] != "1" || w.sets[0].Annotations["deployment.kubernetes.io/revision"] != "1" {
		t.Fatalf("revision: deployment %q, replica set %q, want 1 and 1", w.d.Annotations["deployment.kubernetes.io/revision"], w.sets[0].Annotations["deployment.kubernetes.io/revision"])
	}
	created := condition(w.d, appsv1.DeploymentProgressing).LastTransitionTime

	w.step() // the replica set's pods are all available now
	st := w.d.Status
	want := appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 4, UpdatedReplicas: 4, ReadyReplicas: 4, AvailableReplicas: 4}
	st.Conditions = nil
	if !reflect.DeepEqual(st, want) {
		t.Errorf("got status %+v, want %+v", st, want)
	}
	c = condition(w.d, appsv1.DeploymentProgressing)
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason != "NewReplicaSetAvailable" ||
		c.Message != `ReplicaSet "`+w.sets[0].Name+`" has successfully progressed.` || !c.LastTransitionTime.Equal(&created) {
		t.Errorf("complete: got Progressing %+v (lastTransitionTime must stay %v)", c, created)
	}
	if c := condition(w.d, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionTrue || c.Reason != "MinimumReplicasAvailable" {
		t.Errorf("complete: got Available %+v", c)
	}
	if w.lastPlan.RequeueAfter != 0 {
		t.Errorf("a complete rollout asks to be requeued after %v", w.lastPlan.RequeueAfter)
	}
	if p := w.step(); p.Deployment != nil || len(p.Updates) != 0 || p.Create != nil {
		t.Errorf("a settled deployment still writes: %+v", p)
	}

	// A new template: progress renews lastUpdateTime but keeps the
	// transition time while the status stays True.
	w.setImage("v2")
	w.now = w.now.Add(time.Minute)
	w.step()
	c = condition(w.d, appsv1.DeploymentProgressing)
	if c.Reason != "NewReplicaSetCreated" || !c.LastTransitionTime.Equal(&created) {
		t.Errorf("second rollout: got Progressing %+v, want NewReplicaSetCreated since %v", c, created)
	}
	if got := rolledOut(w.d); got != "0 out of 4 new replicas updated" {
		t.Errorf("rollout status after the first step: got %q", got)
	}
	w.step()
	c = condition(w.d, appsv1.DeploymentProgressing)
	if c.Reason != "ReplicaSetUpdated" || !c.LastUpdateTime.Time.Equal(w.now.Add(-time.Second)) || !c.LastTransitionTime.Equal(&created) {
		t.Errorf("progressing: got %+v", c)
	}
	w.run(20)
	if got := rolledOut(w.d); got != "successfully rolled out" {
		t.Errorf("second rollout: got %q", got)
	}
	if w.d.Annotations["deployment.kubernetes.io/revision"] != "2" {
		t.Errorf("second rollout: deployment revision %q, want 2", w.d.Annotations["deployment.kubernetes.io/revision"])
	}
}

func TestProgressDeadline(t *testing.T) {
	w := newWorld(t, newDeployment(4, func(d *appsv1.Deployment) { d.Spec.ProgressDeadlineSeconds = ptr.To[int32](60) }))
	w.run(20)
	w.setImage("broken")
	w.run(20)
	c := condition(w.d, appsv1.DeploymentProgressing)
	if c == nil || c.Reason != "ReplicaSetUpdated" {
		t.Fatalf("stalled: got %+v", c)
	}
	last := c.LastUpdateTime.Time
	// The last step ran a second before w.now.
	if want := last.Add(61 * time.Second).Sub(w.now.Add(-time.Second)); w.lastPlan.RequeueAfter != want {
		t.Errorf("stalled: requeue after %v, want %v (a second past the deadline)", w.lastPlan.RequeueAfter, want)
	}
	w.now = last.Add(60 * time.Second)
	w.step()
	if c := condition(w.d, appsv1.DeploymentProgressing); c.Reason != "ReplicaSetUpdated" {
		t.Errorf("at the deadline: got %+v, want still progressing", c)
	}
	w.now = last.Add(61 * time.Second)
	w.step()
	c = condition(w.d, appsv1.DeploymentProgressing)
	if c.Status != corev1.ConditionFalse || c.Reason != "ProgressDeadlineExceeded" || !strings.HasSuffix(c.Message, "has timed out progressing.") {
		t.Errorf("past the deadline: got %+v", c)
	}
	if w.lastPlan.RequeueAfter != 0 {
		t.Errorf("timed out: still requeued after %v", w.lastPlan.RequeueAfter)
	}
	// A fixed template resumes the rollout.
	w.setImage("v3")
	w.run(20)
	if c := condition(w.d, appsv1.DeploymentProgressing); c.Reason != "NewReplicaSetAvailable" || rolledOut(w.d) != "successfully rolled out" {
		t.Errorf("after a fix: got %+v, %s", c, rolledOut(w.d))
	}
}

func TestScaling(t *testing.T) {
	tests := []struct {
		name    string
		d       *appsv1.Deployment
		image   string // a rollout to stall before scaling ("" for none)
		scaleTo int32
		want    []string
	}{
		{name: "kubectl scale of a settled deployment resizes its replica set", d: newDeployment(3), scaleTo: 7, want: []string{"v1=7"}},
		{name: "scaling to zero empties it", d: newDeployment(3), scaleTo: 0, want: []string{"v1=0"}},
		{
			name: "scaling up a stalled rollout shares the new replicas in proportion", d: newDeployment(10), image: "broken", scaleTo: 20,
			want: []string{"v1=15 broken=10"},
		},
		{
			name: "scaling down a stalled rollout shares the cut in proportion", d: newDeployment(10), image: "broken", scaleTo: 5,
			want: []string{"v1=4 broken=3"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, tt.d)
			w.run(20)
			if tt.image != "" {
				w.setImage(tt.image)
				w.run(20)
			}
			w.scaleTo(tt.scaleTo)
			if got := w.run(20); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			for _, rs := range w.sets {
				if replicasOf(rs) > 0 && rs.Annotations["deployment.kubernetes.io/desired-replicas"] != itoa(tt.scaleTo) {
					t.Errorf("%s: desired-replicas %q, want %d", rs.Name, rs.Annotations["deployment.kubernetes.io/desired-replicas"], tt.scaleTo)
				}
			}
			if w.d.Status.ObservedGeneration != w.d.Generation {
				t.Errorf("observedGeneration %d, want %d", w.d.Status.ObservedGeneration, w.d.Generation)
			}
		})
	}
}

func TestPause(t *testing.T) {
	w := newWorld(t, newDeployment(3))
	w.run(20)
	w.d.Spec.Paused = true
	w.setImage("v2")
	w.scaleTo(5)
	if got := w.run(20); !reflect.DeepEqual(got, []string{"v1=5"}) {
		t.Errorf("paused: got %q, want only the scaling", got)
	}
	if c := condition(w.d, appsv1.DeploymentProgressing); c.Status != corev1.ConditionUnknown || c.Reason != "DeploymentPaused" || c.Message != "Deployment is paused" {
		t.Errorf("paused: got %+v", c)
	}
	w.d = w.d.DeepCopy()
	w.d.Spec.Paused = false
	w.d.Generation++
	w.run(20)
	if got := rolledOut(w.d); got != "successfully rolled out" || len(w.sets) != 2 {
		t.Errorf("resumed: got %q with %d replica sets", got, len(w.sets))
	}
}

func TestRollbackRenumbersTheOldReplicaSet(t *testing.T) {
	w := newWorld(t, newDeployment(2))
	w.run(20)
	first := w.sets[0].Name
	w.setImage("v2")
	w.run(20)
	w.setImage("v1") // kubectl rollout undo
	w.run(20)
	rs := w.byName(first)
	if rs.Annotations["deployment.kubernetes.io/revision"] != "3" || rs.Annotations["deployment.kubernetes.io/revision-history"] != "1" {
		t.Errorf("rolled-back replica set: revision %q history %q, want 3 and 1", rs.Annotations["deployment.kubernetes.io/revision"], rs.Annotations["deployment.kubernetes.io/revision-history"])
	}
	if w.d.Annotations["deployment.kubernetes.io/revision"] != "3" || len(w.sets) != 2 || replicasOf(rs) != 2 {
		t.Errorf("deployment revision %q, %d replica sets, %s has %d; want 3, 2, 2", w.d.Annotations["deployment.kubernetes.io/revision"], len(w.sets), first, replicasOf(rs))
	}
}

func TestHistoryLimit(t *testing.T) {
	w := newWorld(t, newDeployment(1, func(d *appsv1.Deployment) { d.Spec.RevisionHistoryLimit = ptr.To[int32](1) }))
	w.run(20)
	for _, img := range []string{"v2", "v3", "v4"} {
		w.setImage(img)
		w.run(20)
	}
	if got := w.sizes(); got != "v3=0 v4=1" {
		t.Errorf("got %q, want the newest old replica set kept", got)
	}
}

func TestNewReplicaSet(t *testing.T) {
	d := newDeployment(3, func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 5 })
	rs := deployment.NewReplicaSet(d)
	hash := replicaset.TemplateHash(&d.Spec.Template, nil)
	if rs.Name != "web-"+hash || rs.Namespace != "default" {
		t.Errorf("got %s/%s, want default/web-%s", rs.Namespace, rs.Name, hash)
	}
	if rs.Labels["pod-template-hash"] != hash || rs.Spec.Template.Labels["pod-template-hash"] != hash || rs.Spec.Selector.MatchLabels["pod-template-hash"] != hash ||
		rs.Spec.Selector.MatchLabels["app"] != "web" {
		t.Errorf("got labels %v, template labels %v, selector %v", rs.Labels, rs.Spec.Template.Labels, rs.Spec.Selector)
	}
	if ref := metav1.GetControllerOf(rs); ref == nil || ref.Kind != "Deployment" || ref.UID != d.UID || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("got controller %+v", ref)
	}
	if rs.Spec.MinReadySeconds != 5 || *rs.Spec.Replicas != 0 {
		t.Errorf("got minReadySeconds %d replicas %d", rs.Spec.MinReadySeconds, *rs.Spec.Replicas)
	}
	if d.Spec.Template.Labels["pod-template-hash"] != "" || d.Spec.Selector.MatchLabels["pod-template-hash"] != "" {
		t.Error("building the replica set changed the deployment")
	}
	if !deployment.SameTemplate(&rs.Spec.Template, &d.Spec.Template) {
		t.Error("the new replica set's template is not the deployment's")
	}
	if collided := deployment.NewReplicaSet(deployment.Collided(d)); collided.Name == rs.Name {
		t.Errorf("a collision did not change the name %s", rs.Name)
	}
}

func TestDecideCases(t *testing.T) {
	d := newDeployment(3)
	current := deployment.NewReplicaSet(d)
	current.UID = "rs-cur"
	current.Spec.Replicas = ptr.To[int32](3)
	current.Annotations = map[string]string{"deployment.kubernetes.io/revision": "1", "deployment.kubernetes.io/desired-replicas": "3"}
	current.Status = appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, TerminatingReplicas: ptr.To[int32](2)}

	t.Run("an empty selector is refused with a warning and only observedGeneration is written", func(t *testing.T) {
		bad := newDeployment(3, func(d *appsv1.Deployment) { d.Spec.Selector = &metav1.LabelSelector{}; d.Generation = 4 })
		p, err := deployment.Decide(deployment.Input{Deployment: bad, ReplicaSets: []*appsv1.ReplicaSet{current}, Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Events) != 1 || p.Events[0].Reason != "SelectingAll" || p.Events[0].Type != corev1.EventTypeWarning {
			t.Errorf("got events %+v", p.Events)
		}
		if p.Deployment == nil || p.Deployment.Status.ObservedGeneration != 4 || p.Create != nil || len(p.Updates) != 0 || len(p.Adopt) != 0 {
			t.Errorf("got %+v", p)
		}
	})
	t.Run("a matching orphan replica set is adopted and one relabelled away is released", func(t *testing.T) {
		orphan := current.DeepCopy()
		orphan.OwnerReferences = nil
		stray := current.DeepCopy()
		stray.Name, stray.UID = "stray", "rs-stray"
		stray.Labels = map[string]string{"app": "debug"}
		foreign := current.DeepCopy()
		foreign.Name, foreign.UID = "foreign", "rs-foreign"
		foreign.OwnerReferences[0].UID = "someone"
		p, err := deployment.Decide(deployment.Input{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{orphan, stray, foreign}, Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Adopt) != 1 || p.Adopt[0].Name != orphan.Name || len(p.Release) != 1 || p.Release[0].Name != "stray" {
			t.Errorf("got adopt %v release %v", p.Adopt, p.Release)
		}
		if p.Create != nil {
			t.Errorf("the adopted replica set runs the template, yet a new one is created: %s", p.Create.RS.Name)
		}
	})
	t.Run("the status adds up the replica sets, terminating replicas included", func(t *testing.T) {
		p, _ := deployment.Decide(deployment.Input{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{current}, Now: t0})
		if p.Deployment == nil {
			t.Fatal("no status written")
		}
		st := p.Deployment.Status
		if st.Replicas != 3 || st.AvailableReplicas != 3 || st.UnavailableReplicas != 0 || ptr.Deref(st.TerminatingReplicas, -1) != 2 || st.ObservedGeneration != 1 {
			t.Errorf("got %+v", st)
		}
	})
	t.Run("a deployment being deleted only writes its status", func(t *testing.T) {
		going := newDeployment(3, func(d *appsv1.Deployment) {
			d.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
			d.Spec.Replicas = ptr.To[int32](9)
		})
		p, _ := deployment.Decide(deployment.Input{Deployment: going, ReplicaSets: []*appsv1.ReplicaSet{current}, Now: t0})
		if p.Create != nil || len(p.Updates) != 0 || len(p.Delete) != 0 || p.Deployment == nil {
			t.Errorf("got %+v", p)
		}
	})
	t.Run("Recreate waits while an old pod still runs, even a terminating one", func(t *testing.T) {
		rd := newDeployment(3, recreate)
		rd.Spec.Template.Spec.Containers[0].Image = "v2"
		old := current.DeepCopy()
		old.Spec.Replicas = ptr.To[int32](0)
		old.Status = appsv1.ReplicaSetStatus{}
		running := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", DeletionTimestamp: ptr.To(metav1.NewTime(t0))}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		failed := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q"}, Status: corev1.PodStatus{Phase: corev1.PodFailed}}
		p, _ := deployment.Decide(deployment.Input{Deployment: rd, ReplicaSets: []*appsv1.ReplicaSet{old}, Pods: map[types.UID][]*corev1.Pod{old.UID: {running, failed}}, Now: t0})
		if p.Create != nil {
			t.Errorf("created %s while an old pod runs", p.Create.RS.Name)
		}
		p, _ = deployment.Decide(deployment.Input{Deployment: rd, ReplicaSets: []*appsv1.ReplicaSet{old}, Pods: map[types.UID][]*corev1.Pod{old.UID: {failed}}, Now: t0})
		if p.Create == nil || *p.Create.RS.Spec.Replicas != 3 {
			t.Errorf("with only a failed old pod: got create %+v, want the new replica set at 3", p.Create)
		}
	})
	t.Run("a refused replica set marks the rollout failed", func(t *testing.T) {
		failed, ev := deployment.CreateFailed(d, "web-x", errors.New("quota exceeded"), t0)
		c := condition(failed, appsv1.DeploymentProgressing)
		if c == nil || c.Status != corev1.ConditionFalse || c.Reason != "ReplicaSetCreateError" || c.Message != `Failed to create new replica set "web-x": quota exceeded` {
			t.Errorf("got %+v", c)
		}
		if ev.Type != corev1.EventTypeWarning || ev.Reason != "ReplicaSetCreateError" || ev.Message != c.Message {
			t.Errorf("got event %+v", ev)
		}
		if len(d.Status.Conditions) != 0 {
			t.Error("CreateFailed changed its input")
		}
	})
}
