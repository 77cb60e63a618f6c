package registry

import policyv1 "k8s.io/api/policy/v1"

var policyV1 = policyv1.SchemeGroupVersion

// All returns every resource nodeplane serves, in discovery order.
func All() []*Resource {
	events := Events()
	return []*Resource{
		Namespaces(),
		Nodes(),
		Pods(),
		events,
		ConfigMaps(),
		Secrets(),
		PersistentVolumes(),
		PersistentVolumeClaims(),
		Deployments(),
		ReplicaSets(),
		DaemonSets(),
		PodDisruptionBudgets(),
		Leases(),
		EventsV1(events),
		VolumeAttachments(),
		StorageClasses(),
	}
}
