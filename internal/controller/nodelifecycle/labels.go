package nodelifecycle

import corev1 "k8s.io/api/core/v1"

// betaLabels pairs each stable label with the deprecated beta label kept
// equal to it (SPEC NLC-24).
var betaLabels = [...][2]string{
	{corev1.LabelOSStable, "beta.kubernetes.io/os"},
	{corev1.LabelArchStable, "beta.kubernetes.io/arch"},
}

// BetaLabels returns the labels to set on node so that beta.kubernetes.io/os
// and beta.kubernetes.io/arch equal kubernetes.io/os and kubernetes.io/arch
// (SPEC NLC-24); nil when nothing needs changing. A missing stable label
// changes nothing.
func BetaLabels(node *corev1.Node) map[string]string {
	var out map[string]string
	for _, p := range betaLabels {
		v, ok := node.Labels[p[0]]
		if !ok {
			continue
		}
		if old, ok := node.Labels[p[1]]; ok && old == v {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[p[1]] = v
	}
	return out
}
