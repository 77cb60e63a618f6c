package deployment_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodeplane/nodeplane/internal/controller/deployment"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// world is a tiny cluster for Decide: it applies each plan as the API
// server would, then plays the ReplicaSet controller at once — every
// ReplicaSet gets its pods, and they are ready and available unless their
// image is "broken".
type world struct {
	t    *testing.T
	d    *appsv1.Deployment
	sets []*appsv1.ReplicaSet
	now  time.Time
	uid  int
	// lastPlan is the plan of the latest step.
	lastPlan deployment.Plan
}

func newDeployment(replicas int32, opts ...func(*appsv1.Deployment)) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web", Generation: 1},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "v1"}}},
			},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromString("25%")), MaxUnavailable: ptr.To(intstr.FromString("25%")),
			}},
			RevisionHistoryLimit:    ptr.To[int32](10),
			ProgressDeadlineSeconds: ptr.To[int32](600),
		},
	}
	for _, o := range opts {
		o(d)
	}
	return d
}

func surge(s, u string) func(*appsv1.Deployment) {
	return func(d *appsv1.Deployment) {
		d.Spec.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.Parse(s))
		d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.Parse(u))
	}
}

func recreate(d *appsv1.Deployment) {
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
}

func newWorld(t *testing.T, d *appsv1.Deployment) *world {
	return &world{t: t, d: d, now: t0}
}

// step runs one sync and applies it.
func (w *world) step() deployment.Plan {
	w.t.Helper()
	p, err := deployment.Decide(deployment.Input{Deployment: w.d, ReplicaSets: w.sets, Pods: w.pods(), Now: w.now})
	if err != nil {
		w.t.Fatal(err)
	}
	w.lastPlan = p
	for _, rs := range p.Adopt {
		w.byName(rs.Name).OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(w.d, deployment.Kind)}
	}
	for _, rs := range p.Release {
		w.byName(rs.Name).OwnerReferences = nil
	}
	if p.Create != nil {
		rs := p.Create.RS.DeepCopy()
		w.uid++
		rs.UID = types.UID(fmt.Sprintf("rs-%d", w.uid))
		rs.CreationTimestamp = metav1.NewTime(w.now)
		rs.Generation = 1
		w.sets = append(w.sets, rs)
	}
	for _, u := range p.Updates {
		cur := w.byName(u.RS.Name)
		if cur.UID != u.RS.UID {
			w.t.Fatalf("update of %s names uid %q, have %q", u.RS.Name, u.RS.UID, cur.UID)
		}
		next := u.RS.DeepCopy()
		next.Status = cur.Status
		if replicasOf(cur) != replicasOf(next) || cur.Spec.MinReadySeconds != next.Spec.MinReadySeconds {
			next.Generation = cur.Generation + 1
		}
		*cur = *next
	}
	for _, rs := range p.Delete {
		for i, s := range w.sets {
			if s.UID == rs.UID {
				w.sets = append(w.sets[:i], w.sets[i+1:]...)
				break
			}
		}
	}
	if p.Deployment != nil {
		w.d = p.Deployment.DeepCopy()
	}
	w.settle()
	w.now = w.now.Add(time.Second)
	return p
}

// settle plays the ReplicaSet controller: pods as many as wanted, all
// available unless broken.
func (w *world) settle() {
	for _, rs := range w.sets {
		n := replicasOf(rs)
		rs.Status.Replicas = n
		rs.Status.ReadyReplicas, rs.Status.AvailableReplicas = n, n
		if rs.Spec.Template.Spec.Containers[0].Image == "broken" {
			rs.Status.ReadyReplicas, rs.Status.AvailableReplicas = 0, 0
		}
		rs.Status.ObservedGeneration = rs.Generation
	}
}

// pods are none: the world's ReplicaSets remove their pods at once.
func (w *world) pods() map[types.UID][]*corev1.Pod { return nil }

func (w *world) byName(name string) *appsv1.ReplicaSet {
	for _, rs := range w.sets {
		if rs.Name == name {
			return rs
		}
	}
	w.t.Fatalf("no replica set %s", name)
	return nil
}

// newSet returns the ReplicaSet whose template is the Deployment's.
func (w *world) newSet() *appsv1.ReplicaSet {
	for _, rs := range w.sets {
		if deployment.SameTemplate(&rs.Spec.Template, &w.d.Spec.Template) {
			return rs
		}
	}
	return nil
}

// sizes renders the sizes of the ReplicaSets by image, oldest first, e.g.
// "v1=8 v2=3".
func (w *world) sizes() string {
	sets := append([]*appsv1.ReplicaSet(nil), w.sets...)
	sort.SliceStable(sets, func(i, j int) bool { return sets[i].CreationTimestamp.Before(&sets[j].CreationTimestamp) })
	var out []string
	for _, rs := range sets {
		out = append(out, fmt.Sprintf("%s=%d", rs.Spec.Template.Spec.Containers[0].Image, replicasOf(rs)))
	}
	return strings.Join(out, " ")
}

// setImage changes the template as `kubectl set image` does.
func (w *world) setImage(image string) {
	w.d = w.d.DeepCopy()
	w.d.Spec.Template.Spec.Containers[0].Image = image
	w.d.Generation++
}

func (w *world) scaleTo(n int32) {
	w.d = w.d.DeepCopy()
	w.d.Spec.Replicas = &n
	w.d.Generation++
}

// run steps until nothing changes (at most max steps) and returns the
// sizes after each step that changed something.
func (w *world) run(max int) []string {
	w.t.Helper()
	var trace []string
	for range max {
		p := w.step()
		if p.Create == nil && len(p.Updates) == 0 && len(p.Delete) == 0 {
			if p.Deployment == nil {
				return trace
			}
			continue
		}
		trace = append(trace, w.sizes())
	}
	w.t.Fatalf("no fixed point after %d steps: %q", max, trace)
	return nil
}

// rolledOut reports what `kubectl rollout status` would: done, or what it
// waits for.
func rolledOut(d *appsv1.Deployment) string {
	st := d.Status
	switch {
	case d.Generation > st.ObservedGeneration:
		return "waiting for the spec update to be observed"
	case st.UpdatedReplicas < *d.Spec.Replicas:
		return fmt.Sprintf("%d out of %d new replicas updated", st.UpdatedReplicas, *d.Spec.Replicas)
	case st.Replicas > st.UpdatedReplicas:
		return fmt.Sprintf("%d old replicas pending termination", st.Replicas-st.UpdatedReplicas)
	case st.AvailableReplicas < st.UpdatedReplicas:
		return fmt.Sprintf("%d of %d updated replicas available", st.AvailableReplicas, st.UpdatedReplicas)
	}
	return "successfully rolled out"
}

func replicasOf(rs *appsv1.ReplicaSet) int32 { return ptr.Deref(rs.Spec.Replicas, 1) }

func condition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == t {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}
