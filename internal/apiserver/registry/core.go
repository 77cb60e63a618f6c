package registry

import (
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeplane/nodeplane/internal/apiserver/defaults"
	"github.com/nodeplane/nodeplane/internal/apiserver/printers"
	"github.com/nodeplane/nodeplane/internal/apiserver/validation"
)

var coreV1 = corev1.SchemeGroupVersion

var statusVerbs = []string{"get", "patch", "update"}

// Namespaces declares namespaces. Deleting one is handled by the server's
// namespace lifecycle (terminating, content removal, finalize).
func Namespaces() *Resource {
	return &Resource{
		GroupVersion: coreV1, Resource: "namespaces", Singular: "namespace", Kind: "Namespace", ListKind: "NamespaceList",
		ShortNames: []string{"ns"},
		New:        func() runtime.Object { return &corev1.Namespace{} },
		NewList:    func() runtime.Object { return &corev1.NamespaceList{} },
		Fields: func(obj runtime.Object) fields.Set {
			return fields.Set{"status.phase": string(obj.(*corev1.Namespace).Status.Phase)}
		},
		// finalize is PUT only: the namespace controller removes its
		// spec finalizer through it once the namespace is empty.
		Subresources: []Subresource{{Name: "status", Verbs: statusVerbs}, {Name: "finalize", Verbs: []string{"update"}}},
		Printer:      printers.Namespaces(),
		Strategy: Strategy{
			PrepareForCreate: func(obj runtime.Object) {
				ns := obj.(*corev1.Namespace)
				ns.Status = corev1.NamespaceStatus{}
				defaults.NamespaceForCreate(ns)
			},
			Default: func(obj runtime.Object) { defaults.Namespace(obj.(*corev1.Namespace)) },
			PrepareForUpdate: func(obj, old runtime.Object) {
				ns, o := obj.(*corev1.Namespace), old.(*corev1.Namespace)
				ns.Spec = o.Spec
				ns.Status = o.Status
			},
			PrepareForStatusUpdate: func(obj, old runtime.Object) {
				obj.(*corev1.Namespace).Spec = old.(*corev1.Namespace).Spec
			},
			PrepareForFinalizeUpdate: func(obj, old runtime.Object) {
				ns, o := obj.(*corev1.Namespace), old.(*corev1.Namespace)
				finalizers := ns.Spec.Finalizers
				ns.Spec = o.Spec
				ns.Spec.Finalizers = finalizers
				ns.Status = o.Status
			},
			Validate: func(obj runtime.Object) field.ErrorList { return validation.Namespace(obj.(*corev1.Namespace)) },
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.NamespaceUpdate(obj.(*corev1.Namespace), old.(*corev1.Namespace))
			},
			ValidateStatusUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.NamespaceStatusUpdate(obj.(*corev1.Namespace), old.(*corev1.Namespace))
			},
			ValidateFinalizeUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.NamespaceFinalizeUpdate(obj.(*corev1.Namespace), old.(*corev1.Namespace))
			},
		},
	}
}

// Nodes declares nodes (+status). A node's status is written with the
// create (the agent registers with its full status) and then through the
// status subresource.
func Nodes() *Resource {
	return &Resource{
		GroupVersion: coreV1, Resource: "nodes", Singular: "node", Kind: "Node", ListKind: "NodeList",
		ShortNames: []string{"no"},
		New:        func() runtime.Object { return &corev1.Node{} },
		NewList:    func() runtime.Object { return &corev1.NodeList{} },
		Fields: func(obj runtime.Object) fields.Set {
			n := obj.(*corev1.Node)
			return fields.Set{"spec.unschedulable": boolString(n.Spec.Unschedulable)}
		},
		IndexedFields: []string{"metadata.name"},
		Subresources:  []Subresource{{Name: "status", Verbs: statusVerbs}},
		Printer:       printers.Nodes(),
		Strategy: Strategy{
			Default: func(obj runtime.Object) { defaults.Node(obj.(*corev1.Node)) },
			PrepareForCreate: func(obj runtime.Object) {
				n := obj.(*corev1.Node)
				n.Spec.ConfigSource = nil
				n.Status.Config = nil
			},
			PrepareForUpdate: func(obj, old runtime.Object) {
				obj.(*corev1.Node).Status = old.(*corev1.Node).Status
			},
			PrepareForStatusUpdate: func(obj, old runtime.Object) {
				obj.(*corev1.Node).Spec = old.(*corev1.Node).Spec
			},
			Validate: func(obj runtime.Object) field.ErrorList { return validation.Node(obj.(*corev1.Node)) },
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.NodeUpdate(obj.(*corev1.Node), old.(*corev1.Node))
			},
			ValidateStatusUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.NodeStatusUpdate(obj.(*corev1.Node), old.(*corev1.Node))
			},
		},
	}
}

// Pods declares pods (+status, binding, eviction) with graceful deletion.
func Pods() *Resource {
	return &Resource{
		GroupVersion: coreV1, Resource: "pods", Singular: "pod", Kind: "Pod", ListKind: "PodList",
		Namespaced: true,
		ShortNames: []string{"po"}, Categories: []string{"all"},
		New:     func() runtime.Object { return &corev1.Pod{} },
		NewList: func() runtime.Object { return &corev1.PodList{} },
		Fields: func(obj runtime.Object) fields.Set {
			p := obj.(*corev1.Pod)
			podIPs := ""
			if len(p.Status.PodIPs) > 0 {
				podIPs = p.Status.PodIPs[0].IP
			}
			return fields.Set{
				"spec.nodeName":            p.Spec.NodeName,
				"spec.restartPolicy":       string(p.Spec.RestartPolicy),
				"spec.schedulerName":       p.Spec.SchedulerName,
				"spec.serviceAccountName":  p.Spec.ServiceAccountName,
				"spec.hostNetwork":         boolString(p.Spec.HostNetwork),
				"status.phase":             string(p.Status.Phase),
				"status.podIP":             podIPs,
				"status.nominatedNodeName": p.Status.NominatedNodeName,
			}
		},
		IndexedFields: []string{"spec.nodeName", "metadata.name"},
		Subresources: []Subresource{
			{Name: "status", Verbs: statusVerbs},
			{Name: "binding", GVK: coreV1.WithKind("Binding"), Verbs: []string{"create"}},
			{Name: "eviction", GVK: policyV1.WithKind("Eviction"), Verbs: []string{"create"}},
			{Name: "log", Verbs: []string{"get"}},
		},
		Printer: printers.Pods(),
		Strategy: Strategy{
			PrepareForCreate: func(obj runtime.Object) {
				p := obj.(*corev1.Pod)
				p.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: qosClass(&p.Spec)}
			},
			Default: func(obj runtime.Object) { defaults.Pod(obj.(*corev1.Pod)) },
			PrepareForUpdate: func(obj, old runtime.Object) {
				obj.(*corev1.Pod).Status = old.(*corev1.Pod).Status
			},
			PrepareForStatusUpdate: func(obj, old runtime.Object) {
				p, o := obj.(*corev1.Pod), old.(*corev1.Pod)
				p.Spec = o.Spec
				p.OwnerReferences = o.OwnerReferences
			},
			Validate: func(obj runtime.Object) field.ErrorList { return validation.Pod(obj.(*corev1.Pod)) },
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.PodUpdate(obj.(*corev1.Pod), old.(*corev1.Pod))
			},
			ValidateStatusUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validation.PodStatusUpdate(obj.(*corev1.Pod), old.(*corev1.Pod))
			},
			SpecChanged: func(obj, old runtime.Object) bool {
				return !apiequality.Semantic.DeepEqual(obj.(*corev1.Pod).Spec, old.(*corev1.Pod).Spec)
			},
			DeleteGracePeriod: podGracePeriod,
		},
	}
}

// podGracePeriod: pods that never reached a node, or already finished,
// go at once; others wait for their agent up to the grace period.
func podGracePeriod(obj runtime.Object, requested *int64) int64 {
	p := obj.(*corev1.Pod)
	if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return 0
	}
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if p.Spec.TerminationGracePeriodSeconds != nil {
		grace = *p.Spec.TerminationGracePeriodSeconds
	}
	if requested != nil {
		grace = *requested
	}
	if grace < 0 {
		grace = 1
	}
	return grace
}

// qosClass computes the pod's QoS class from its container resources.
func qosClass(spec *corev1.PodSpec) corev1.PodQOSClass {
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	any, allGuaranteed := false, true
	containers := append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
	for _, c := range containers {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, hasReq := c.Resources.Requests[name]
			lim, hasLim := c.Resources.Limits[name]
			if hasReq && !req.IsZero() {
				any = true
				addQuantity(requests, name, req)
			}
			if hasLim && !lim.IsZero() {
				any = true
				addQuantity(limits, name, lim)
			}
			if !hasLim || lim.IsZero() || (hasReq && req.Cmp(lim) != 0) {
				allGuaranteed = false
			}
		}
	}
	switch {
	case !any:
		return corev1.PodQOSBestEffort
	case allGuaranteed && len(limits) == 2:
		return corev1.PodQOSGuaranteed
	default:
		return corev1.PodQOSBurstable
	}
}

func addQuantity(list corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	cur := list[name]
	cur.Add(q)
	list[name] = cur
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
