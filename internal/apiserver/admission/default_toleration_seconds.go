package admission

import (
	"context"

	corev1 "k8s.io/api/core/v1"
)

// Taint keys the node lifecycle controller applies to unhealthy nodes.
const (
	taintNotReady    = "node.kubernetes.io/not-ready"
	taintUnreachable = "node.kubernetes.io/unreachable"
)

// DefaultTolerationSeconds adds NoExecute tolerations for the not-ready and
// unreachable taints to every pod that does not already tolerate them (SPEC
// DTS-1/DTS-2), so that pods leave a failed node after a bounded time.
type DefaultTolerationSeconds struct {
	// NotReadySeconds and UnreachableSeconds are the tolerationSeconds added
	// (flags --default-not-ready-toleration-seconds and
	// --default-unreachable-toleration-seconds, default 300).
	NotReadySeconds    int64
	UnreachableSeconds int64
}

// Name implements Plugin.
func (DefaultTolerationSeconds) Name() string { return "DefaultTolerationSeconds" }

// Admit implements Plugin: pods only, create and update of the main resource.
func (d DefaultTolerationSeconds) Admit(_ context.Context, a Attributes) error {
	if a.Resource.Group != "" || a.Resource.Resource != "pods" || a.Subresource != "" {
		return nil
	}
	if a.Operation != Create && a.Operation != Update {
		return nil
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return nil
	}
	pod.Spec.Tolerations = WithDefaultTolerations(pod.Spec.Tolerations, d.NotReadySeconds, d.UnreachableSeconds)
	return nil
}

// WithDefaultTolerations returns tolerations plus the default not-ready and
// unreachable NoExecute tolerations for the families not already tolerated.
// A family counts as tolerated when any toleration has its key (or an empty
// key) and effect NoExecute (or an empty effect); operator and value are not
// inspected, as upstream.
func WithDefaultTolerations(tolerations []corev1.Toleration, notReadySeconds, unreachableSeconds int64) []corev1.Toleration {
	hasNotReady, hasUnreachable := false, false
	for _, t := range tolerations {
		effectOK := t.Effect == corev1.TaintEffectNoExecute || t.Effect == ""
		if !effectOK {
			continue
		}
		if t.Key == taintNotReady || t.Key == "" {
			hasNotReady = true
		}
		if t.Key == taintUnreachable || t.Key == "" {
			hasUnreachable = true
		}
	}
	if !hasNotReady {
		s := notReadySeconds
		tolerations = append(tolerations, corev1.Toleration{Key: taintNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &s})
	}
	if !hasUnreachable {
		s := unreachableSeconds
		tolerations = append(tolerations, corev1.Toleration{Key: taintUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &s})
	}
	return tolerations
}
