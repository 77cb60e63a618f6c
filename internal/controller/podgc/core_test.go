package podgc_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeplane/nodeplane/internal/controller/podgc"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type podOpt func(*corev1.Pod)

func mkPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0)},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func on(node string) podOpt           { return func(p *corev1.Pod) { p.Spec.NodeName = node } }
func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func ns(n string) podOpt              { return func(p *corev1.Pod) { p.Namespace = n } }
func created(d time.Duration) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t0.Add(d)) }
}
func evictedByKubelet(p *corev1.Pod) {
	p.Status.Phase = corev1.PodFailed
	p.Status.Reason = "Evicted"
}
func deleting(p *corev1.Pod) {
	ts := metav1.NewTime(t0)
	p.DeletionTimestamp = &ts
}

func mkNode(name string, ready bool, taints ...corev1.Taint) *corev1.Node {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}},
	}
}

func names(ds []podgc.Deletion) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Ref().String())
	}
	return out
}

func sameStrings(got, want []string) bool {
	if len(got) == 0 && len(want) == 0 {
		return true
	}
	return reflect.DeepEqual(got, want)
}

func cfg(threshold int) podgc.Config {
	c := podgc.DefaultConfig()
	c.TerminatedPodThreshold = threshold
	return c
}

func TestDefaultConfigIsUpstreams(t *testing.T) {
	got := podgc.DefaultConfig()
	want := podgc.Config{TerminatedPodThreshold: 12500, Quarantine: 40 * time.Second, Period: 20 * time.Second}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestTerminatedPods(t *testing.T) {
	tests := []struct {
		name      string
		threshold int
		pods      []*corev1.Pod
		want      []string
		wantFail  []bool
	}{
		{
			name: "at the threshold nothing is deleted", threshold: 2,
			pods: []*corev1.Pod{mkPod("a", phase(corev1.PodSucceeded)), mkPod("b", phase(corev1.PodFailed))},
		},
		{
			name: "over the threshold the oldest go first", threshold: 2,
			pods: []*corev1.Pod{
				mkPod("new", phase(corev1.PodSucceeded), created(3*time.Minute)),
				mkPod("old", phase(corev1.PodSucceeded), created(time.Minute)),
				mkPod("mid", phase(corev1.PodFailed), created(2*time.Minute)),
				mkPod("oldest", phase(corev1.PodFailed), created(0)),
			},
			want: []string{"default/oldest", "default/old"}, wantFail: []bool{false, false},
		},
		{
			name: "evicted pods go before older ones", threshold: 1,
			pods: []*corev1.Pod{
				mkPod("old", phase(corev1.PodSucceeded), created(0)),
				mkPod("evicted", evictedByKubelet, created(time.Hour)),
			},
			want: []string{"default/evicted"}, wantFail: []bool{false},
		},
		{
			name: "pods created at the same time go by name", threshold: 1,
			pods: []*corev1.Pod{mkPod("b", phase(corev1.PodSucceeded)), mkPod("c", phase(corev1.PodSucceeded)), mkPod("a", phase(corev1.PodSucceeded))},
			want: []string{"default/a", "default/b"}, wantFail: []bool{false, false},
		},
		{
			name: "running, pending and unknown pods do not count", threshold: 1,
			pods: []*corev1.Pod{
				mkPod("r", created(-3*time.Hour)), mkPod("p", phase(corev1.PodPending), created(-2*time.Hour)),
				mkPod("u", phase(corev1.PodUnknown), created(-time.Hour)), mkPod("done", phase(corev1.PodSucceeded)),
			},
		},
		{
			name: "an empty phase counts as terminated and is failed first, as upstream", threshold: 1,
			pods: []*corev1.Pod{mkPod("nophase", phase(""), created(-time.Hour)), mkPod("done", phase(corev1.PodSucceeded))},
			want: []string{"default/nophase"}, wantFail: []bool{true},
		},
		{
			name: "a threshold of zero turns the rule off", threshold: 0,
			pods: []*corev1.Pod{mkPod("a", phase(corev1.PodSucceeded)), mkPod("b", phase(corev1.PodFailed))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := podgc.New(cfg(tt.threshold)).Plan(t0, tt.pods, nil)
			if got := names(p.Terminated); !sameStrings(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			for i, d := range p.Terminated {
				if d.Reason != "terminated" || d.Fail != tt.wantFail[i] || d.Condition != nil {
					t.Errorf("%s: got reason %q fail %v condition %v, want terminated, %v, none", d.Ref(), d.Reason, d.Fail, d.Condition, tt.wantFail[i])
				}
			}
		})
	}
}

func TestOrphanQuarantine(t *testing.T) {
	orphan := mkPod("orphan", on("gone"))
	done := mkPod("done", on("gone"), phase(corev1.PodSucceeded))
	elsewhere := mkPod("elsewhere", on("n1"))
	n1 := mkNode("n1", true)
	back := mkNode("gone", true)
	pods := []*corev1.Pod{orphan, done, elsewhere}

	type pass struct {
		after       time.Duration
		nodes       []*corev1.Node
		pods        []*corev1.Pod
		wantConfirm []string
	}
	tests := []struct {
		name   string
		passes []pass
	}{
		{
			name: "a missing node is confirmed once 40 s have passed, not before",
			passes: []pass{
				{nodes: []*corev1.Node{n1}, pods: pods},
				{after: 20 * time.Second, nodes: []*corev1.Node{n1}, pods: pods},
				{after: 19 * time.Second, nodes: []*corev1.Node{n1}, pods: pods},
				{after: time.Second, nodes: []*corev1.Node{n1}, pods: pods, wantConfirm: []string{"gone"}},
				{after: 20 * time.Second, nodes: []*corev1.Node{n1}, pods: pods, wantConfirm: []string{"gone"}},
			},
		},
		{
			name: "a node that reappears ends the quarantine, and a new absence starts a new one",
			passes: []pass{
				{nodes: []*corev1.Node{n1}, pods: pods},
				{after: 20 * time.Second, nodes: []*corev1.Node{n1, back}, pods: pods},
				{after: 20 * time.Second, nodes: []*corev1.Node{n1}, pods: pods},
				{after: 20 * time.Second, nodes: []*corev1.Node{n1}, pods: pods},
				{after: 20 * time.Second, nodes: []*corev1.Node{n1}, pods: pods, wantConfirm: []string{"gone"}},
			},
		},
		{
			name: "a node no pod names any more leaves quarantine",
			passes: []pass{
				{nodes: []*corev1.Node{n1}, pods: pods},
				{after: 20 * time.Second, nodes: []*corev1.Node{n1}, pods: []*corev1.Pod{elsewhere}},
				{after: 20 * time.Second, nodes: []*corev1.Node{n1}, pods: pods},
				{after: 20 * time.Second, nodes: []*corev1.Node{n1}, pods: pods},
				{after: 20 * time.Second, nodes: []*corev1.Node{n1}, pods: pods, wantConfirm: []string{"gone"}},
			},
		},
		{
			name: "unscheduled pods name no node",
			passes: []pass{
				{pods: []*corev1.Pod{mkPod("pending", phase(corev1.PodPending))}},
				{after: time.Minute, pods: []*corev1.Pod{mkPod("pending", phase(corev1.PodPending))}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(t0)
			c := podgc.New(cfg(0))
			for i, ps := range tt.passes {
				clk.Step(ps.after)
				p := c.Plan(clk.Now(), ps.pods, ps.nodes)
				if !sameStrings(p.Confirm, ps.wantConfirm) {
					t.Errorf("pass %d at +%v: confirm %q, want %q (quarantined %v)", i, clk.Now().Sub(t0), p.Confirm, ps.wantConfirm, c.Quarantined())
				}
			}
		})
	}
}

func TestOrphansOfConfirmedNodes(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	c := podgc.New(cfg(0))
	pods := []*corev1.Pod{
		mkPod("web", on("gone")),
		mkPod("api", on("gone"), ns("prod")),
		mkPod("done", on("gone"), phase(corev1.PodSucceeded)),
		mkPod("lagging", on("cachelag")),
	}
	c.Plan(clk.Now(), pods, nil)
	clk.Step(40 * time.Second)
	p := c.Plan(clk.Now(), pods, nil)
	if want := []string{"cachelag", "gone"}; !reflect.DeepEqual(p.Confirm, want) {
		t.Fatalf("confirm: got %q, want %q", p.Confirm, want)
	}
	// The API server still has "cachelag": only "gone" is gone.
	orphans := p.Orphans([]string{"gone"})
	if got, want := names(orphans), []string{"default/done", "default/web", "prod/api"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for _, d := range orphans {
		if d.Reason != "orphaned" {
			t.Errorf("%s: got reason %q, want orphaned", d.Ref(), d.Reason)
		}
		if d.Pod.Name == "done" {
			if d.Fail || d.Condition != nil {
				t.Errorf("a succeeded orphan: got fail %v condition %v, want neither", d.Fail, d.Condition)
			}
			continue
		}
		if !d.Fail || d.Condition == nil || d.Condition.Type != corev1.DisruptionTarget || d.Condition.Status != corev1.ConditionTrue ||
			d.Condition.Reason != "DeletionByPodGC" || d.Condition.Message != "PodGC: node no longer exists" {
			t.Errorf("%s: got fail %v condition %+v, want Failed with DisruptionTarget DeletionByPodGC", d.Ref(), d.Fail, d.Condition)
		}
	}
	if got := p.Orphans(nil); len(got) != 0 {
		t.Errorf("no node gone: got %q, want nothing", names(got))
	}
}

func TestFailedStatus(t *testing.T) {
	pod := mkPod("web", on("gone"))
	pod.Generation = 3
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	clk := clocktesting.NewFakeClock(t0)
	c := podgc.New(cfg(0))
	c.Plan(clk.Now(), []*corev1.Pod{pod}, nil)
	clk.Step(time.Minute)
	d := c.Plan(clk.Now(), []*corev1.Pod{pod}, nil).Orphans([]string{"gone"})[0]

	st := d.FailedStatus(clk.Now())
	if st.Phase != corev1.PodFailed || len(st.Conditions) != 2 {
		t.Fatalf("got phase %q conditions %+v", st.Phase, st.Conditions)
	}
	dt := st.Conditions[1]
	if dt.Type != corev1.DisruptionTarget || dt.Reason != "DeletionByPodGC" || dt.ObservedGeneration != 3 || !dt.LastTransitionTime.Time.Equal(clk.Now()) {
		t.Errorf("got %+v", dt)
	}
	if pod.Status.Phase != corev1.PodRunning || len(pod.Status.Conditions) != 1 {
		t.Errorf("the cached pod was modified: %+v", pod.Status)
	}
}

func TestTerminatingPods(t *testing.T) {
	oos := corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}
	oosNoSchedule := corev1.Taint{Key: corev1.TaintNodeOutOfService, Effect: corev1.TaintEffectNoSchedule}
	nodes := []*corev1.Node{
		mkNode("down", false, oos),
		mkNode("down-noschedule", false, oosNoSchedule),
		mkNode("ready", true, oos),
		mkNode("notready", false),
		{ObjectMeta: metav1.ObjectMeta{Name: "nocondition"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{oos}}},
	}
	tests := []struct {
		name            string
		pods            []*corev1.Pod
		threshold       int
		wantTerminated  []string
		wantOOS         []string
		wantUnscheduled []string
	}{
		{
			name:    "a terminating pod on a not-ready out-of-service node is force-deleted, whatever the taint's effect",
			pods:    []*corev1.Pod{mkPod("a", on("down"), deleting), mkPod("b", on("down-noschedule"), deleting), mkPod("c", on("nocondition"), deleting)},
			wantOOS: []string{"default/a", "default/b", "default/c"},
		},
		{
			name: "a running pod on an out-of-service node is left to the taint eviction controller",
			pods: []*corev1.Pod{mkPod("a", on("down"))},
		},
		{
			name: "a terminating pod on a ready node, or a not-ready node without the taint, is left alone",
			pods: []*corev1.Pod{mkPod("a", on("ready"), deleting), mkPod("b", on("notready"), deleting)},
		},
		{
			name:    "out-of-service pods go evicted first, then oldest",
			pods:    []*corev1.Pod{mkPod("young", on("down"), deleting, created(time.Hour)), mkPod("evicted", on("down"), deleting, evictedByKubelet, created(2*time.Hour)), mkPod("old", on("down"), deleting)},
			wantOOS: []string{"default/evicted", "default/old", "default/young"},
		},
		{
			name:            "a terminating pod never scheduled is force-deleted",
			pods:            []*corev1.Pod{mkPod("b", phase(corev1.PodPending), deleting), mkPod("a", phase(corev1.PodPending), deleting), mkPod("pending", phase(corev1.PodPending))},
			wantUnscheduled: []string{"default/a", "default/b"},
		},
		{
			name:      "a pod that two rules name is deleted once, by the first",
			threshold: 1,
			pods: []*corev1.Pod{
				mkPod("x", phase(corev1.PodFailed), deleting, on("down"), created(-2*time.Hour)),
				mkPod("z", phase(corev1.PodFailed), deleting, created(-time.Hour)),
				mkPod("y", phase(corev1.PodSucceeded), on("ready")),
			},
			wantTerminated: []string{"default/x", "default/z"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := podgc.New(cfg(tt.threshold)).Plan(t0, tt.pods, nodes)
			for _, c := range []struct {
				what   string
				got    []podgc.Deletion
				want   []string
				reason string
			}{
				{"terminated", p.Terminated, tt.wantTerminated, "terminated"},
				{"out-of-service", p.OutOfService, tt.wantOOS, "out-of-service"},
				{"unscheduled", p.Unscheduled, tt.wantUnscheduled, "unscheduled"},
			} {
				if got := names(c.got); !sameStrings(got, c.want) {
					t.Errorf("%s: got %q, want %q", c.what, got, c.want)
				}
				for _, d := range c.got {
					wantFail := d.Pod.Status.Phase != corev1.PodSucceeded && d.Pod.Status.Phase != corev1.PodFailed
					if d.Reason != c.reason || d.Fail != wantFail || d.Condition != nil {
						t.Errorf("%s %s: got reason %q fail %v condition %v", c.what, d.Ref(), d.Reason, d.Fail, d.Condition)
					}
				}
			}
		})
	}
}

func TestDefaultThresholdKeepsTheNewest12500(t *testing.T) {
	var pods []*corev1.Pod
	for i := range 20000 {
		pods = append(pods, mkPod(fmt.Sprintf("p%05d", i), phase(corev1.PodSucceeded), on("n1"), created(time.Duration(i%977)*time.Second)))
	}
	p := podgc.New(podgc.DefaultConfig()).Plan(t0, pods, []*corev1.Node{mkNode("n1", true)})
	if len(p.Terminated) != 20000-12500 {
		t.Fatalf("got %d deletions, want %d", len(p.Terminated), 20000-12500)
	}
	deleted := map[string]bool{}
	var newestDeleted time.Time
	for _, d := range p.Terminated {
		deleted[d.Pod.Name] = true
		if ts := d.Pod.CreationTimestamp.Time; ts.After(newestDeleted) {
			newestDeleted = ts
		}
	}
	for _, pod := range pods {
		if !deleted[pod.Name] && pod.CreationTimestamp.Time.Before(newestDeleted) {
			t.Fatalf("kept %s created %v, older than a deleted pod (%v)", pod.Name, pod.CreationTimestamp.Time, newestDeleted)
		}
	}
}
