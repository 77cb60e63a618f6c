package openapi

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	allVerbs    = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	statusVerbs = []string{"get", "update", "patch"}
)

// servedResources mirrors the resources nodeplane serves (SPEC P2-2).
func servedResources() []Resource {
	core := func(kind string) schema.GroupVersionKind { return schema.GroupVersionKind{Version: "v1", Kind: kind} }
	return []Resource{
		{GVK: core("Namespace"), Resource: "namespaces", Object: &corev1.Namespace{}, List: &corev1.NamespaceList{},
			Verbs:        []string{"get", "list", "watch", "create", "update", "patch", "delete"},
			Subresources: []Subresource{{Name: "status", Object: &corev1.Namespace{}, Verbs: statusVerbs}}},
		{GVK: core("Node"), Resource: "nodes", Object: &corev1.Node{}, List: &corev1.NodeList{}, Verbs: allVerbs,
			Subresources: []Subresource{{Name: "status", Object: &corev1.Node{}, Verbs: statusVerbs}}},
		{GVK: core("Pod"), Resource: "pods", Namespaced: true, Object: &corev1.Pod{}, List: &corev1.PodList{}, Verbs: allVerbs,
			Subresources: []Subresource{
				{Name: "status", Object: &corev1.Pod{}, Verbs: statusVerbs},
				{Name: "binding", GVK: core("Binding"), Object: &corev1.Binding{}, Verbs: []string{"create"}},
				{Name: "eviction", GVK: schema.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"},
					Object: &policyv1.Eviction{}, Verbs: []string{"create"}},
				{Name: "log", Verbs: []string{"get"}},
			}},
		{GVK: core("Event"), Resource: "events", Namespaced: true, Object: &corev1.Event{}, List: &corev1.EventList{}, Verbs: allVerbs},
		{GVK: core("PersistentVolume"), Resource: "persistentvolumes", Object: &corev1.PersistentVolume{},
			List: &corev1.PersistentVolumeList{}, Verbs: allVerbs,
			Subresources: []Subresource{{Name: "status", Object: &corev1.PersistentVolume{}, Verbs: statusVerbs}}},
		{GVK: core("PersistentVolumeClaim"), Resource: "persistentvolumeclaims", Namespaced: true,
			Object: &corev1.PersistentVolumeClaim{}, List: &corev1.PersistentVolumeClaimList{}, Verbs: allVerbs,
			Subresources: []Subresource{{Name: "status", Object: &corev1.PersistentVolumeClaim{}, Verbs: statusVerbs}}},
		{GVK: schema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}, Resource: "leases",
			Namespaced: true, Object: &coordinationv1.Lease{}, List: &coordinationv1.LeaseList{}, Verbs: allVerbs},
		{GVK: schema.GroupVersionKind{Group: "events.k8s.io", Version: "v1", Kind: "Event"}, Resource: "events",
			Namespaced: true, Object: &eventsv1.Event{}, List: &eventsv1.EventList{}, Verbs: allVerbs},
		{GVK: schema.GroupVersionKind{Group: "storage.k8s.io", Version: "v1", Kind: "VolumeAttachment"}, Resource: "volumeattachments",
			Object: &storagev1.VolumeAttachment{}, List: &storagev1.VolumeAttachmentList{}, Verbs: allVerbs,
			Subresources: []Subresource{{Name: "status", Object: &storagev1.VolumeAttachment{}, Verbs: statusVerbs}}},
	}
}
