package daemonset

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/nodeplane/nodeplane/internal/controller/replicaset"
)

// Labels the controller puts on its pods, as upstream.
const (
	// HashLabel carries replicaset.TemplateHash of the template the pod
	// was made from (upstream: the ControllerRevision's hash).
	HashLabel = appsv1.DefaultDaemonSetUniqueLabelKey
	// GenerationLabel carries the DaemonSet's template generation (the
	// API server's deprecated.daemonset.template.generation annotation).
	GenerationLabel = "pod-template-generation"
)

// daemonTolerations are the tolerations every daemon pod gets (SPEC
// DTS-3): it is never evicted from a not-ready or unreachable node, and it
// lands on nodes under pressure or cordoned.
var daemonTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

// hostNetworkToleration is added for pods on the host network, which do
// not need the node's pod network.
var hostNetworkToleration = corev1.Toleration{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

// Tolerations returns spec's tolerations with the daemon tolerations
// (DTS-3) added. A toleration of the template with the same key, operator,
// value and effect as one of them is replaced by it — so a template's
// not-ready toleration with tolerationSeconds becomes one without — as
// upstream. spec is not modified.
func Tolerations(spec *corev1.PodSpec) []corev1.Toleration {
	out := append([]corev1.Toleration(nil), spec.Tolerations...)
	add := daemonTolerations
	if spec.HostNetwork {
		add = append(append([]corev1.Toleration(nil), daemonTolerations...), hostNetworkToleration)
	}
	for _, t := range add {
		found := false
		for i := range out {
			if out[i].MatchToleration(&t) {
				out[i] = t
				found = true
			}
		}
		if !found {
			out = append(out, t)
		}
	}
	return out
}

// PodForNode is the pod ds runs on node: the template with the daemon
// tolerations, the hash and generation labels, bound to node directly
// (spec.nodeName, as the brief asks) and with a required node affinity to
// that node's name replacing the template's required terms, as upstream
// does so the scheduler would place it there too.
func PodForNode(ds *appsv1.DaemonSet, node, hash string) *corev1.Pod {
	pod := replicaset.PodFromTemplate(&ds.Spec.Template, ds.Namespace, ds.Name+"-", *metav1.NewControllerRef(ds, Kind))
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[HashLabel] = hash
	if gen := ds.Annotations[appsv1.DeprecatedTemplateGeneration]; gen != "" {
		pod.Labels[GenerationLabel] = gen
	}
	pod.Spec.Tolerations = Tolerations(&ds.Spec.Template.Spec)
	pod.Spec.NodeName = node
	pod.Spec.Affinity = nodeNameAffinity(pod.Spec.Affinity, node)
	return pod
}

// nodeNameAffinity returns a (already a copy) with its required node
// affinity replaced by one term: metadata.name In [node].
func nodeNameAffinity(a *corev1.Affinity, node string) *corev1.Affinity {
	if a == nil {
		a = &corev1.Affinity{}
	}
	if a.NodeAffinity == nil {
		a.NodeAffinity = &corev1.NodeAffinity{}
	}
	a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
	}}}
	return a
}

// targetNode is the node a daemon pod belongs to: spec.nodeName, or for a
// pod not yet bound the single name its required node affinity allows.
func targetNode(pod *corev1.Pod) (string, bool) {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName, true
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return "", false
	}
	for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, r := range t.MatchFields {
			if r.Key == metav1.ObjectNameField && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
				return r.Values[0], true
			}
		}
	}
	return "", false
}

// Placer decides which nodes a DaemonSet's pods belong on. Build one per
// sync with NewPlacer.
type Placer struct {
	nodeName    string
	matcher     nodeaffinity.RequiredNodeAffinity
	tolerations []corev1.Toleration
}

// NewPlacer parses ds's template once: its spec.nodeName, node selector,
// required node affinity, and tolerations with the daemon ones added.
func NewPlacer(ds *appsv1.DaemonSet) *Placer {
	return &Placer{
		nodeName:    ds.Spec.Template.Spec.NodeName,
		matcher:     nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: ds.Spec.Template.Spec}),
		tolerations: Tolerations(&ds.Spec.Template.Spec),
	}
}

// Fits reports whether a daemon pod should run on node (run: create one
// if missing) and whether one already there may stay (keep). A node the
// template's nodeName, nodeSelector or required node affinity excludes
// gets neither. A node with a NoSchedule or NoExecute taint the pod (with
// the daemon tolerations) does not tolerate gets no new pod, but a pod
// already there stays unless a NoExecute taint is untolerated. Cordoning
// alone (spec.unschedulable) does not matter: its taint is tolerated.
func (p *Placer) Fits(node *corev1.Node) (run, keep bool) {
	if p.nodeName != "" && p.nodeName != node.Name {
		return false, false
	}
	if ok, _ := p.matcher.Match(node); !ok {
		return false, false
	}
	if _, bad := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, p.tolerations, doNotSchedule, false); !bad {
		return true, true
	}
	_, evicting := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, p.tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoExecute
	}, false)
	return false, !evicting
}

// doNotSchedule selects the taints that keep new pods off a node.
func doNotSchedule(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}
