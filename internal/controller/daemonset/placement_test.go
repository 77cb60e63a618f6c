package daemonset_test

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodeplane/nodeplane/internal/controller/daemonset"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func mkDS(opts ...func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system", UID: "uid-agent", Generation: 3,
			Annotations: map[string]string{appsv1.DeprecatedTemplateGeneration: "2"}},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "v1"}}},
			},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &appsv1.RollingUpdateDaemonSet{
				MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			}},
		},
	}
	for _, o := range opts {
		o(ds)
	}
	return ds
}

func mkNode(name string, opts ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func taint(key string, effect corev1.TaintEffect) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: effect}) }
}

func label(k, v string) func(*corev1.Node) { return func(n *corev1.Node) { n.Labels[k] = v } }

func cordoned(n *corev1.Node) {
	n.Spec.Unschedulable = true
	taint(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule)(n)
}

func TestFits(t *testing.T) {
	hostNet := func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.HostNetwork = true }
	zoneAffinity := func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}},
		}}}
	}
	tests := []struct {
		name string
		ds   *appsv1.DaemonSet
		node *corev1.Node
		run  bool
		keep bool
	}{
		{name: "a plain node runs a daemon pod", ds: mkDS(), node: mkNode("n1"), run: true, keep: true},
		{name: "a cordoned node still runs daemon pods", ds: mkDS(), node: mkNode("n1", cordoned), run: true, keep: true},
		{name: "the not-ready and unreachable NoExecute taints are tolerated", ds: mkDS(), node: mkNode("n1", taint(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute), taint(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)), run: true, keep: true},
		{name: "a not-ready node takes no new daemon pod (its NoSchedule taint), but the one there is never evicted", ds: mkDS(), node: mkNode("n1", taint(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute), taint(corev1.TaintNodeNotReady, corev1.TaintEffectNoSchedule)), run: false, keep: true},
		{name: "an unreachable node likewise keeps its daemon pod", ds: mkDS(), node: mkNode("n1", taint(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute), taint(corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule)), run: false, keep: true},
		{name: "memory, disk and pid pressure are tolerated", ds: mkDS(), node: mkNode("n1", taint(corev1.TaintNodeMemoryPressure, corev1.TaintEffectNoSchedule), taint(corev1.TaintNodeDiskPressure, corev1.TaintEffectNoSchedule), taint(corev1.TaintNodePIDPressure, corev1.TaintEffectNoSchedule)), run: true, keep: true},
		{name: "an unavailable network keeps pod-network daemons off but a running one stays", ds: mkDS(), node: mkNode("n1", taint(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule)), run: false, keep: true},
		{name: "an unavailable network is tolerated by host-network daemons", ds: mkDS(hostNet), node: mkNode("n1", taint(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule)), run: true, keep: true},
		{name: "an untolerated NoSchedule taint takes no new pod, but the one there stays", ds: mkDS(), node: mkNode("n1", taint("dedicated", corev1.TaintEffectNoSchedule)), run: false, keep: true},
		{name: "an untolerated NoExecute taint takes no pod at all", ds: mkDS(), node: mkNode("n1", taint("dedicated", corev1.TaintEffectNoExecute)), run: false, keep: false},
		{name: "a PreferNoSchedule taint does not matter", ds: mkDS(), node: mkNode("n1", taint("dedicated", corev1.TaintEffectPreferNoSchedule)), run: true, keep: true},
		{name: "the template's own toleration counts", ds: mkDS(func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
		}), node: mkNode("n1", taint("dedicated", corev1.TaintEffectNoExecute)), run: true, keep: true},
		{name: "an empty-key Exists toleration tolerates every taint", ds: mkDS(func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}), node: mkNode("n1", taint("anything", corev1.TaintEffectNoExecute)), run: true, keep: true},
		{name: "a node without the selected label is not eligible", ds: mkDS(func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{"gpu": "yes"} }), node: mkNode("n1"), run: false, keep: false},
		{name: "a node with the selected label is eligible", ds: mkDS(func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{"gpu": "yes"} }), node: mkNode("n1", label("gpu", "yes")), run: true, keep: true},
		{name: "required node affinity admits a node in the zone", ds: mkDS(zoneAffinity), node: mkNode("n1", label("zone", "a")), run: true, keep: true},
		{name: "required node affinity excludes a node elsewhere", ds: mkDS(zoneAffinity), node: mkNode("n1", label("zone", "b")), run: false, keep: false},
		{name: "a template nodeName pins the pods to that node", ds: mkDS(func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeName = "n2" }), node: mkNode("n1"), run: false, keep: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, keep := daemonset.NewPlacer(tt.ds).Fits(tt.node)
			if run != tt.run || keep != tt.keep {
				t.Errorf("got run %v keep %v, want %v %v", run, keep, tt.run, tt.keep)
			}
		})
	}
}

func TestTolerations(t *testing.T) {
	exists := func(key string, effect corev1.TaintEffect) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect}
	}
	dts3 := []corev1.Toleration{
		exists("node.kubernetes.io/not-ready", corev1.TaintEffectNoExecute),
		exists("node.kubernetes.io/unreachable", corev1.TaintEffectNoExecute),
		exists("node.kubernetes.io/disk-pressure", corev1.TaintEffectNoSchedule),
		exists("node.kubernetes.io/memory-pressure", corev1.TaintEffectNoSchedule),
		exists("node.kubernetes.io/pid-pressure", corev1.TaintEffectNoSchedule),
		exists("node.kubernetes.io/unschedulable", corev1.TaintEffectNoSchedule),
	}
	custom := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infra", Effect: corev1.TaintEffectNoSchedule}
	notReady300 := exists("node.kubernetes.io/not-ready", corev1.TaintEffectNoExecute)
	notReady300.TolerationSeconds = ptr.To[int64](300)
	tests := []struct {
		name string
		spec corev1.PodSpec
		want []corev1.Toleration
	}{
		{name: "a pod-network daemon gets the six DTS-3 tolerations, without tolerationSeconds", want: dts3},
		{name: "a host-network daemon also tolerates an unavailable network", spec: corev1.PodSpec{HostNetwork: true},
			want: append(append([]corev1.Toleration(nil), dts3...), exists("node.kubernetes.io/network-unavailable", corev1.TaintEffectNoSchedule))},
		{name: "the template's tolerations come first and are kept", spec: corev1.PodSpec{Tolerations: []corev1.Toleration{custom}},
			want: append([]corev1.Toleration{custom}, dts3...)},
		{name: "a template's not-ready toleration with seconds becomes one for ever", spec: corev1.PodSpec{Tolerations: []corev1.Toleration{notReady300}},
			want: dts3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.spec.DeepCopy()
			if got := daemonset.Tolerations(&tt.spec); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
			if !reflect.DeepEqual(before, &tt.spec) {
				t.Error("the template was modified")
			}
		})
	}
}

func TestPodForNode(t *testing.T) {
	ds := mkDS(func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpExists}},
			}}},
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1}},
		}}
	})
	pod := daemonset.PodForNode(ds, "n7", "hash1")
	if pod.Spec.NodeName != "n7" || pod.GenerateName != "agent-" || pod.Namespace != "kube-system" {
		t.Errorf("got nodeName %q generateName %q namespace %q", pod.Spec.NodeName, pod.GenerateName, pod.Namespace)
	}
	if pod.Labels["controller-revision-hash"] != "hash1" || pod.Labels["pod-template-generation"] != "2" || pod.Labels["app"] != "agent" {
		t.Errorf("got labels %v", pod.Labels)
	}
	want := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n7"}}},
	}}}
	if got := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; !reflect.DeepEqual(got, want) {
		t.Errorf("got required affinity %+v, want only metadata.name In [n7]", got)
	}
	if len(pod.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Error("the preferred terms were dropped")
	}
	if len(ds.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields) != 0 {
		t.Error("the template's affinity was modified")
	}
	if len(pod.Spec.Tolerations) != 6 {
		t.Errorf("got %d tolerations, want the 6 of DTS-3", len(pod.Spec.Tolerations))
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "DaemonSet" || ref.UID != ds.UID || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("got controller %+v", ref)
	}
	// The scheduler's matcher agrees with the binding.
	p := daemonset.NewPlacer(&appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: pod.Spec}}})
	if run, _ := p.Fits(mkNode("n7")); !run {
		t.Error("the pod's own affinity refuses its node")
	}
	if run, _ := p.Fits(mkNode("n8")); run {
		t.Error("the pod's affinity admits another node")
	}
}
