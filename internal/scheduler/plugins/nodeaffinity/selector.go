package nodeaffinity

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// term is one parsed NodeSelectorTerm: its label requirements and its
// metadata.name requirements, all ANDed. A term that failed to parse matches
// nothing (upstream ignores such terms for backwards compatibility).
type term struct {
	labels labels.Selector
	fields []fieldRequirement
	err    error
}

type fieldRequirement struct {
	in   bool // In (true) or NotIn (false)
	name string
}

func (t *term) match(node *corev1.Node) bool {
	if t.err != nil {
		return false
	}
	if t.labels != nil && !t.labels.Matches(labels.Set(node.Labels)) {
		return false
	}
	for _, f := range t.fields {
		if (node.Name == f.name) != f.in {
			return false
		}
	}
	return true
}

func isEmptyTerm(t *corev1.NodeSelectorTerm) bool {
	return len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0
}

var operators = map[corev1.NodeSelectorOperator]selection.Operator{
	corev1.NodeSelectorOpIn:           selection.In,
	corev1.NodeSelectorOpNotIn:        selection.NotIn,
	corev1.NodeSelectorOpExists:       selection.Exists,
	corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
	corev1.NodeSelectorOpGt:           selection.GreaterThan,
	corev1.NodeSelectorOpLt:           selection.LessThan,
}

// parseTerm parses the label expressions (In, NotIn, Exists, DoesNotExist,
// Gt, Lt, validated as label selectors are) and the field expressions (only
// metadata.name, only In/NotIn with exactly one value).
func parseTerm(nst *corev1.NodeSelectorTerm) term {
	var t term
	if len(nst.MatchExpressions) > 0 {
		sel := labels.NewSelector()
		for _, e := range nst.MatchExpressions {
			op, ok := operators[e.Operator]
			if !ok {
				t.err = fmt.Errorf("invalid node selector operator %q", e.Operator)
				return t
			}
			r, err := labels.NewRequirement(e.Key, op, e.Values)
			if err != nil {
				t.err = fmt.Errorf("node selector requirement %q: %w", e.Key, err)
				return t
			}
			sel = sel.Add(*r)
		}
		t.labels = sel
	}
	for _, e := range nst.MatchFields {
		if e.Key != metav1.ObjectNameField {
			t.err = fmt.Errorf("%q is not a valid node field selector key", e.Key)
			return t
		}
		if len(e.Values) != 1 {
			t.err = fmt.Errorf("node field selector %q needs exactly one value, got %d", e.Operator, len(e.Values))
			return t
		}
		switch e.Operator {
		case corev1.NodeSelectorOpIn:
			t.fields = append(t.fields, fieldRequirement{in: true, name: e.Values[0]})
		case corev1.NodeSelectorOpNotIn:
			t.fields = append(t.fields, fieldRequirement{in: false, name: e.Values[0]})
		default:
			t.err = fmt.Errorf("invalid node field selector operator %q", e.Operator)
			return t
		}
	}
	return t
}

// RequiredMatcher decides whether a node satisfies a pod's hard placement
// rules: every spec.nodeSelector label, and (when present) at least one term
// of requiredDuringSchedulingIgnoredDuringExecution. Empty terms and terms
// that fail to parse match no node.
type RequiredMatcher struct {
	nodeSelector map[string]string
	hasAffinity  bool
	terms        []term
}

// NewRequiredMatcher parses pod's nodeSelector and required node affinity.
func NewRequiredMatcher(pod *corev1.Pod) *RequiredMatcher {
	m := &RequiredMatcher{nodeSelector: pod.Spec.NodeSelector}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		m.hasAffinity = true
		for i := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			nst := &a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[i]
			if isEmptyTerm(nst) {
				continue
			}
			m.terms = append(m.terms, parseTerm(nst))
		}
	}
	return m
}

// Empty reports whether the pod has no hard placement rule at all.
func (m *RequiredMatcher) Empty() bool { return len(m.nodeSelector) == 0 && !m.hasAffinity }

// Match reports whether node satisfies the rules.
func (m *RequiredMatcher) Match(node *corev1.Node) bool {
	if node == nil {
		return false
	}
	for k, v := range m.nodeSelector {
		if got, ok := node.Labels[k]; !ok || got != v {
			return false
		}
	}
	if !m.hasAffinity {
		return true
	}
	for i := range m.terms {
		if m.terms[i].match(node) {
			return true
		}
	}
	return false
}

type preferredTerm struct {
	term
	weight int64
}

// parsePreferred parses the preferred terms, dropping zero weights, empty
// terms and terms that fail to parse.
func parsePreferred(pod *corev1.Pod) []preferredTerm {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil {
		return nil
	}
	var out []preferredTerm
	for i := range a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		p := &a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution[i]
		if p.Weight == 0 || isEmptyTerm(&p.Preference) {
			continue
		}
		t := parseTerm(&p.Preference)
		if t.err != nil {
			continue
		}
		out = append(out, preferredTerm{term: t, weight: int64(p.Weight)})
	}
	return out
}
