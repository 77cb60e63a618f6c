package namespace

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ControllerName is the upstream kube-controller-manager name.
const ControllerName = "namespace-controller"

// Item is one object found in a terminating namespace.
type Item struct {
	Resource schema.GroupVersionResource
	Name     string
	// Deleting: metadata.deletionTimestamp is set.
	Deleting bool
	// Finalizers is the length of metadata.finalizers.
	Finalizers int
	// GracePeriod is metadata.deletionGracePeriodSeconds (0 when unset).
	GracePeriod int64
}

// Content is what the shell found in a namespace.
type Content struct {
	Items []Item
	// Failed counts the resources that could not be listed: their content
	// is unknown, so the namespace is not empty yet.
	Failed int
}

// Plan is what to do for one namespace.
type Plan struct {
	// Delete are the objects to delete now.
	Delete []Item
	// Finalize: the namespace is empty; remove the finalizer.
	Finalize bool
	// Finalizers is spec.finalizers once finalized (the others stay).
	Finalizers []corev1.FinalizerName
	// Wait: content remains; look again later.
	Wait bool
}

// Pending reports a namespace being deleted that still carries the
// finalizer: its content is this controller's to remove.
func Pending(ns *corev1.Namespace) bool {
	return ns.DeletionTimestamp != nil && slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
}

// Decide plans one pass over ns with its content. A namespace that is not
// being deleted, or from whose spec the finalizer is gone already, needs
// nothing. Objects already being deleted are left to finish: those waiting
// on their own finalizers or in a graceful deletion; the rest are deleted.
// The namespace is finalized once no object is left.
func Decide(ns *corev1.Namespace, c Content) Plan {
	if !Pending(ns) {
		return Plan{}
	}
	if len(c.Items) > 0 || c.Failed > 0 {
		var p Plan
		for _, it := range c.Items {
			if it.Deleting && (it.Finalizers > 0 || it.GracePeriod > 0) {
				continue
			}
			p.Delete = append(p.Delete, it)
		}
		p.Wait = true
		return p
	}
	var rest []corev1.FinalizerName
	for _, f := range ns.Spec.Finalizers {
		if f != corev1.FinalizerKubernetes {
			rest = append(rest, f)
		}
	}
	return Plan{Finalize: true, Finalizers: rest}
}
