package nodeaffinity

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// RequiredMatcher decides whether a node satisfies a pod's hard placement
// rules: every spec.nodeSelector label, and (when present) at least one term
// of requiredDuringSchedulingIgnoredDuringExecution. Empty terms and terms
// that fail to parse match no node. The matching is k8s.io/component-helpers'.
type RequiredMatcher struct {
	required    nodeaffinity.RequiredNodeAffinity
	empty       bool
	hasAffinity bool
}

// NewRequiredMatcher parses pod's nodeSelector and required node affinity.
func NewRequiredMatcher(pod *corev1.Pod) *RequiredMatcher {
	a := pod.Spec.Affinity
	has := a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil
	return &RequiredMatcher{
		required:    nodeaffinity.GetRequiredNodeAffinity(pod),
		empty:       len(pod.Spec.NodeSelector) == 0 && !has,
		hasAffinity: has,
	}
}

// Empty reports whether the pod has no hard placement rule at all.
func (m *RequiredMatcher) Empty() bool { return m.empty }

// Match reports whether node satisfies the rules.
func (m *RequiredMatcher) Match(node *corev1.Node) bool {
	if node == nil {
		return false
	}
	ok, _ := m.required.Match(node)
	return ok
}

// preferredTerm is one preferred term, parsed alone so that a term that
// fails to parse drops out without the others.
type preferredTerm struct {
	terms *nodeaffinity.PreferredSchedulingTerms
}

func (t preferredTerm) score(node *corev1.Node) int64 { return t.terms.Score(node) }

// parsePreferred parses the preferred terms, dropping zero weights, empty
// terms and terms that fail to parse.
func parsePreferred(pod *corev1.Pod) []preferredTerm {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil {
		return nil
	}
	var out []preferredTerm
	for _, p := range a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		if p.Weight == 0 || (len(p.Preference.MatchExpressions) == 0 && len(p.Preference.MatchFields) == 0) {
			continue
		}
		t, err := nodeaffinity.NewPreferredSchedulingTerms([]corev1.PreferredSchedulingTerm{p})
		if err != nil {
			continue
		}
		out = append(out, preferredTerm{terms: t})
	}
	return out
}
