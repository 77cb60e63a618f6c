package daemonset_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodeplane/nodeplane/internal/controller/daemonset"
	"github.com/nodeplane/nodeplane/internal/controller/replicaset"
)

type podOpt func(*corev1.Pod)

// daemonPod is ds's pod on node made from the current template, running
// and ready for an hour.
func daemonPod(ds *appsv1.DaemonSet, name, node string, opts ...podOpt) *corev1.Pod {
	p := daemonset.PodForNode(ds, node, replicaset.TemplateHash(&ds.Spec.Template, nil))
	p.Name, p.UID = name, types.UID("uid-"+name)
	p.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour))
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
		Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour)),
	}}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func deleting(p *corev1.Pod)          { p.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }
func notReady(p *corev1.Pod)          { p.Status.Conditions[0].Status = corev1.ConditionFalse }
func readySince(d time.Duration) podOpt {
	return func(p *corev1.Pod) { p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(d)) }
}
func created(d time.Duration) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t0.Add(d)) }
}
func oldTemplate(p *corev1.Pod) {
	p.Labels["controller-revision-hash"] = "old"
	p.Labels["pod-template-generation"] = "1"
}
func orphan(p *corev1.Pod) { p.OwnerReferences = nil }

func podNames(pods []*corev1.Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return strings.Join(out, ",")
}

func TestDecide(t *testing.T) {
	ds := mkDS()
	three := []*corev1.Node{mkNode("n1"), mkNode("n2"), mkNode("n3")}
	tests := []struct {
		name        string
		ds          *appsv1.DaemonSet
		nodes       []*corev1.Node
		pods        []*corev1.Pod
		unsettled   bool
		burst       int
		wantCreate  string
		wantDelete  string
		wantAdopt   string
		wantRelease string
		wantEvents  int
	}{
		{name: "every eligible node gets a pod, a cordoned one included", ds: ds, nodes: []*corev1.Node{mkNode("n2", cordoned), mkNode("n1"), mkNode("n3", taint("dedicated", corev1.TaintEffectNoSchedule))}, wantCreate: "n1,n2"},
		{name: "nodes that have their pod get none", ds: ds, nodes: three, pods: []*corev1.Pod{daemonPod(ds, "a", "n1"), daemonPod(ds, "b", "n2"), daemonPod(ds, "c", "n3")}},
		{name: "a deleted pod is replaced once it is gone, not while it terminates", ds: ds, nodes: three,
			pods: []*corev1.Pod{daemonPod(ds, "a", "n1", deleting), daemonPod(ds, "b", "n2", deleting, phase(corev1.PodFailed)), daemonPod(ds, "c", "n3")}, wantCreate: "n2"},
		{name: "a failed pod is deleted with a warning, to be replaced", ds: ds, nodes: three[:1], pods: []*corev1.Pod{daemonPod(ds, "a", "n1", phase(corev1.PodFailed))}, wantDelete: "a", wantEvents: 1},
		{name: "a succeeded pod is deleted", ds: ds, nodes: three[:1], pods: []*corev1.Pod{daemonPod(ds, "a", "n1", phase(corev1.PodSucceeded))}, wantDelete: "a"},
		{name: "of two running pods on a node the newer goes", ds: ds, nodes: three[:1], pods: []*corev1.Pod{daemonPod(ds, "new", "n1", created(time.Minute)), daemonPod(ds, "old", "n1")}, wantDelete: "new"},
		{name: "a pod on a node that lost the selected label goes", ds: mkDS(func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{"gpu": "yes"} }),
			nodes: []*corev1.Node{mkNode("n1")}, pods: []*corev1.Pod{daemonPod(ds, "a", "n1")}, wantDelete: "a"},
		{name: "a pod stays under an untolerated NoSchedule taint", ds: ds, nodes: []*corev1.Node{mkNode("n1", taint("dedicated", corev1.TaintEffectNoSchedule))}, pods: []*corev1.Pod{daemonPod(ds, "a", "n1")}},
		{name: "a pod goes under an untolerated NoExecute taint", ds: ds, nodes: []*corev1.Node{mkNode("n1", taint("dedicated", corev1.TaintEffectNoExecute))}, pods: []*corev1.Pod{daemonPod(ds, "a", "n1")}, wantDelete: "a"},
		{name: "a pod stays on a not-ready, unreachable node", ds: ds, nodes: []*corev1.Node{mkNode("n1",
			taint(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute), taint(corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule))},
			pods: []*corev1.Pod{daemonPod(ds, "a", "n1")}},
		{name: "while earlier writes are unobserved nothing is created or deleted", ds: ds, nodes: three, unsettled: true, pods: []*corev1.Pod{daemonPod(ds, "a", "n1", phase(corev1.PodSucceeded))}},
		{name: "creations are capped by the burst", ds: ds, nodes: three, burst: 2, wantCreate: "n1,n2"},
		{name: "an orphan daemon pod is adopted and counts for its node", ds: ds, nodes: three[:1], pods: []*corev1.Pod{daemonPod(ds, "a", "n1", orphan)}, wantAdopt: "a"},
		{name: "an owned pod relabelled away is released and replaced", ds: ds, nodes: three[:1],
			pods: []*corev1.Pod{daemonPod(ds, "a", "n1", func(p *corev1.Pod) { p.Labels["app"] = "debug" })}, wantRelease: "a", wantCreate: "n1"},
		{name: "an unbound pod aimed at a node that is gone is deleted", ds: ds, nodes: three[:1],
			pods: []*corev1.Pod{daemonPod(ds, "a", "n1"), daemonPod(ds, "lost", "n9", func(p *corev1.Pod) { p.Spec.NodeName = "" })}, wantDelete: "lost"},
		{name: "a daemon set being deleted does nothing", ds: mkDS(func(ds *appsv1.DaemonSet) { ds.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }), nodes: three},
		{name: "an empty selector is refused with a warning", ds: mkDS(func(ds *appsv1.DaemonSet) { ds.Spec.Selector = &metav1.LabelSelector{} }), nodes: three, wantEvents: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := daemonset.New().Decide(daemonset.Input{DS: tt.ds, Nodes: tt.nodes, Pods: tt.pods, Settled: !tt.unsettled, BurstReplicas: tt.burst, Now: t0})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct{ what, got, want string }{
				{"create", strings.Join(p.Create, ","), tt.wantCreate},
				{"delete", podNames(p.Delete), tt.wantDelete},
				{"adopt", podNames(p.Adopt), tt.wantAdopt},
				{"release", podNames(p.Release), tt.wantRelease},
			} {
				if c.got != c.want {
					t.Errorf("%s: got %q, want %q", c.what, c.got, c.want)
				}
			}
			if len(p.Events) != tt.wantEvents {
				t.Errorf("got events %+v, want %d", p.Events, tt.wantEvents)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	ds := mkDS(func(ds *appsv1.DaemonSet) { ds.Spec.MinReadySeconds = 60 })
	nodes := []*corev1.Node{
		mkNode("available"), mkNode("warming"), mkNode("notready"), mkNode("old"), mkNode("empty"),
		mkNode("tainted", taint("dedicated", corev1.TaintEffectNoSchedule)), mkNode("tainted-empty", taint("dedicated", corev1.TaintEffectNoSchedule)),
	}
	pods := []*corev1.Pod{
		daemonPod(ds, "a", "available"),
		daemonPod(ds, "w", "warming", readySince(-40*time.Second)),
		daemonPod(ds, "n", "notready", notReady),
		daemonPod(ds, "o", "old", oldTemplate),
		daemonPod(ds, "t", "tainted"),
	}
	p, err := daemonset.New().Decide(daemonset.Input{DS: ds, Nodes: nodes, Pods: pods, Settled: false, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	want := appsv1.DaemonSetStatus{
		DesiredNumberScheduled: 5, CurrentNumberScheduled: 4, NumberReady: 3, NumberAvailable: 2, NumberUnavailable: 3,
		UpdatedNumberScheduled: 3, NumberMisscheduled: 1, ObservedGeneration: 3,
	}
	if !reflect.DeepEqual(p.Status, want) {
		t.Errorf("got  %+v\nwant %+v", p.Status, want)
	}
	if want := 20*time.Second + time.Millisecond; p.RequeueAfter != want {
		t.Errorf("requeue after %v, want %v (when the warming pod becomes available)", p.RequeueAfter, want)
	}
}

func TestFailedPodBackoff(t *testing.T) {
	ds := mkDS()
	nodes := []*corev1.Node{mkNode("n1")}
	core := daemonset.New()
	steps := []struct {
		at         time.Duration
		wantDelete bool
		wantWake   time.Duration
	}{
		{at: 0, wantDelete: true},
		{at: 500 * time.Millisecond, wantWake: 500 * time.Millisecond},
		{at: time.Second, wantDelete: true},
		{at: 2 * time.Second, wantWake: time.Second},
		{at: 3 * time.Second, wantDelete: true},
		{at: 6 * time.Second, wantWake: time.Second},
		{at: 7 * time.Second, wantDelete: true},
		// Quiet for more than twice the maximum: back to one second.
		{at: 7*time.Second + 31*time.Minute, wantDelete: true},
		{at: 7*time.Second + 31*time.Minute + 999*time.Millisecond, wantWake: time.Millisecond},
	}
	for i, s := range steps {
		failed := daemonPod(ds, fmt.Sprintf("p%d", i), "n1", phase(corev1.PodFailed))
		p, err := core.Decide(daemonset.Input{DS: ds, Nodes: nodes, Pods: []*corev1.Pod{failed}, Settled: true, Now: t0.Add(s.at)})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(p.Delete) == 1; got != s.wantDelete || p.RequeueAfter != s.wantWake {
			t.Errorf("step %d at +%v: got delete %v wake %v, want %v %v", i, s.at, got, p.RequeueAfter, s.wantDelete, s.wantWake)
		}
		if s.wantDelete && (len(p.Events) != 1 || p.Events[0].Reason != "FailedDaemonPod" ||
			p.Events[0].Message != fmt.Sprintf("Found failed daemon pod kube-system/p%d on node n1, will try to kill it", i)) {
			t.Errorf("step %d: got events %+v", i, p.Events)
		}
	}
	// Another daemon set on the same node has its own back-off.
	other := mkDS(func(ds *appsv1.DaemonSet) { ds.UID = "uid-other" })
	p, _ := core.Decide(daemonset.Input{DS: other, Nodes: nodes, Pods: []*corev1.Pod{daemonPod(other, "x", "n1", phase(corev1.PodFailed))}, Settled: true, Now: t0.Add(7*time.Second + 31*time.Minute + time.Millisecond)})
	if len(p.Delete) != 1 {
		t.Error("another daemon set was held back by this one's back-off")
	}
}

func TestRollingUpdate(t *testing.T) {
	budget := func(v intstr.IntOrString) func(*appsv1.DaemonSet) {
		return func(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = &v }
	}
	five := []*corev1.Node{mkNode("n1"), mkNode("n2"), mkNode("n3"), mkNode("n4"), mkNode("n5")}
	oldOn := func(ds *appsv1.DaemonSet, nodes ...string) []*corev1.Pod {
		var out []*corev1.Pod
		for _, n := range nodes {
			out = append(out, daemonPod(ds, "old-"+n, n, oldTemplate))
		}
		return out
	}
	tests := []struct {
		name       string
		ds         *appsv1.DaemonSet
		pods       func(ds *appsv1.DaemonSet) []*corev1.Pod
		wantDelete string
	}{
		{name: "one unavailable at a time: the first old pod by node name goes", ds: mkDS(),
			pods: func(ds *appsv1.DaemonSet) []*corev1.Pod { return oldOn(ds, "n1", "n2", "n3", "n4", "n5") }, wantDelete: "old-n1"},
		{name: "30% of five nodes rounds up to two", ds: mkDS(budget(intstr.FromString("30%"))),
			pods: func(ds *appsv1.DaemonSet) []*corev1.Pod { return oldOn(ds, "n1", "n2", "n3", "n4", "n5") }, wantDelete: "old-n1,old-n2"},
		{name: "a new pod not yet available uses up the budget", ds: mkDS(),
			pods: func(ds *appsv1.DaemonSet) []*corev1.Pod {
				return append(oldOn(ds, "n2", "n3", "n4", "n5"), daemonPod(ds, "new-n1", "n1", notReady))
			}},
		{name: "a node whose old pod is terminating counts as unavailable", ds: mkDS(),
			pods: func(ds *appsv1.DaemonSet) []*corev1.Pod {
				return append(oldOn(ds, "n2", "n3", "n4", "n5"), daemonPod(ds, "old-n1", "n1", oldTemplate, deleting))
			}},
		{name: "an old pod that is not available is replaced at once, beyond the budget", ds: mkDS(),
			pods: func(ds *appsv1.DaemonSet) []*corev1.Pod {
				return append(oldOn(ds, "n2", "n3", "n4"), daemonPod(ds, "new-n1", "n1", notReady), daemonPod(ds, "old-n5", "n5", oldTemplate, notReady))
			}, wantDelete: "old-n5"},
		{name: "with the new pods available the next old one goes", ds: mkDS(),
			pods: func(ds *appsv1.DaemonSet) []*corev1.Pod {
				return append(oldOn(ds, "n3", "n4", "n5"), daemonPod(ds, "new-n1", "n1"), daemonPod(ds, "new-n2", "n2"))
			}, wantDelete: "old-n3"},
		{name: "a pod with the current template generation counts as updated", ds: mkDS(),
			pods: func(ds *appsv1.DaemonSet) []*corev1.Pod {
				pods := oldOn(ds, "n1", "n2", "n3", "n4", "n5")
				for _, p := range pods {
					p.Labels["pod-template-generation"] = "2"
				}
				return pods
			}},
		{name: "OnDelete replaces nothing by itself", ds: mkDS(func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
		}), pods: func(ds *appsv1.DaemonSet) []*corev1.Pod { return oldOn(ds, "n1", "n2", "n3", "n4", "n5") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := daemonset.New().Decide(daemonset.Input{DS: tt.ds, Nodes: five, Pods: tt.pods(tt.ds), Settled: true, Now: t0})
			if err != nil {
				t.Fatal(err)
			}
			if got := podNames(p.Delete); got != tt.wantDelete || len(p.Create) != 0 {
				t.Errorf("got delete %q create %q, want delete %q", got, p.Create, tt.wantDelete)
			}
		})
	}
}
