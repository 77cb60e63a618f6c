package admission

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodeplane/nodeplane/internal/apiserver/authz"
	"github.com/nodeplane/nodeplane/internal/nodelabels"
)

var (
	podsResource   = schema.GroupResource{Resource: "pods"}
	nodesResource  = schema.GroupResource{Resource: "nodes"}
	claimsResource = schema.GroupResource{Resource: "persistentvolumeclaims"}
	leasesResource = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
)

// mirrorPodAnnotation marks a pod the agent created for a static pod.
const mirrorPodAnnotation = corev1.MirrorPodAnnotationKey

// NodeRestriction limits what a node identity may write to what concerns
// itself (SPEC AUTH-7..AUTH-10): its own Node (no taint changes, no owner
// references, no labels outside the node label policy of package
// nodelabels), its own mirror
// pods, the status of pods bound to it, evictions of those pods, its own
// Lease in kube-node-lease and the status of claims. The authorizer has
// already decided the verb is allowed at all; this plugin looks at the
// objects. Requests from other users pass untouched.
type NodeRestriction struct{}

// Name implements Plugin.
func (NodeRestriction) Name() string { return "NodeRestriction" }

// Admit implements Plugin.
func (NodeRestriction) Admit(ctx context.Context, a Attributes) error {
	node, isNode := authz.NodeName(a.User)
	if !isNode {
		return nil
	}
	if node == "" {
		return forbidden(a, "could not determine node from user %q", a.User.Name)
	}
	switch a.Resource {
	case podsResource:
		return admitPod(ctx, node, a)
	case nodesResource:
		return admitNode(node, a)
	case leasesResource:
		return admitLease(node, a)
	case claimsResource:
		return admitClaim(node, a)
	}
	return nil
}

// forbidden builds the 403 for a refused write, naming the object.
func forbidden(a Attributes, format string, args ...any) error {
	return apierrors.NewForbidden(a.Resource, objectName(a), fmt.Errorf(format, args...))
}

// objectName is the name in the path, or on create the object's.
func objectName(a Attributes) string {
	if a.Name != "" || a.Object == nil {
		return a.Name
	}
	if m, err := meta.Accessor(a.Object); err == nil {
		return m.GetName()
	}
	return ""
}

// admitPod: a node creates only its own mirror pods, deletes only pods
// bound to it, updates the status of and evicts only pods bound to it.
func admitPod(ctx context.Context, node string, a Attributes) error {
	switch a.Subresource {
	case "":
		switch a.Operation {
		case Create:
			pod, ok := a.Object.(*corev1.Pod)
			if !ok {
				return forbidden(a, "unexpected type %T", a.Object)
			}
			return admitMirrorPod(ctx, node, a, pod)
		case Delete:
			pod, ok := a.OldObject.(*corev1.Pod)
			if !ok {
				return forbidden(a, "unexpected type %T", a.OldObject)
			}
			if pod.Spec.NodeName != node {
				return forbidden(a, "node %q can only delete pods with spec.nodeName set to itself", node)
			}
			return nil
		}
		return forbidden(a, "node %q can only create and delete mirror pods", node)
	case "status":
		pod, okNew := a.Object.(*corev1.Pod)
		old, okOld := a.OldObject.(*corev1.Pod)
		if a.Operation != Update || !okNew || !okOld {
			return forbidden(a, "node %q can only update pod status", node)
		}
		if old.Spec.NodeName != node {
			return forbidden(a, "node %q can only update pod status for pods with spec.nodeName set to itself", node)
		}
		if !equality.Semantic.DeepEqual(old.Labels, pod.Labels) {
			return forbidden(a, "node %q cannot update labels through pod status", node)
		}
		if !equality.Semantic.DeepEqual(old.Status.ResourceClaimStatuses, pod.Status.ResourceClaimStatuses) {
			return forbidden(a, "node %q cannot update resource claim statuses", node)
		}
		return nil
	case "eviction":
		pod, ok := a.OldObject.(*corev1.Pod)
		if a.Operation != Create || !ok {
			return forbidden(a, "node %q can only create evictions", node)
		}
		if pod.Spec.NodeName != node {
			return forbidden(a, "node %q can only evict pods with spec.nodeName set to itself", node)
		}
		return nil
	}
	return forbidden(a, "node %q may not write pods/%s", node, a.Subresource)
}

// admitMirrorPod checks a node's pod create (SPEC AUTH-7): a mirror pod,
// bound to the node, controlled by the node's own Node object, and
// referencing no other API object.
func admitMirrorPod(ctx context.Context, node string, a Attributes, pod *corev1.Pod) error {
	if _, ok := pod.Annotations[mirrorPodAnnotation]; !ok {
		return forbidden(a, "pod does not have %q annotation, node %q can only create mirror pods", mirrorPodAnnotation, node)
	}
	if pod.Spec.NodeName != node {
		return forbidden(a, "node %q can only create pods with spec.nodeName set to itself", node)
	}
	switch len(pod.OwnerReferences) {
	case 0:
		return forbidden(a, "node %q can only create pods with an owner reference set to itself", node)
	case 1:
	default:
		return forbidden(a, "node %q can only create pods with a single owner reference set to itself", node)
	}
	owner := pod.OwnerReferences[0]
	if owner.APIVersion != "v1" || owner.Kind != "Node" || owner.Name != node {
		return forbidden(a, "node %q can only create pods with an owner reference set to itself", node)
	}
	if owner.Controller == nil || !*owner.Controller {
		return forbidden(a, "node %q can only create pods with a controller owner reference set to itself", node)
	}
	if owner.BlockOwnerDeletion != nil && *owner.BlockOwnerDeletion {
		return forbidden(a, "node %q must not set blockOwnerDeletion on an owner reference", node)
	}
	if a.Objects == nil {
		return forbidden(a, "cannot verify the uid of node %q", node)
	}
	n, err := a.Objects.Node(ctx, node)
	if err != nil {
		return fmt.Errorf("read node %q to verify its uid: %w", node, err)
	}
	if n == nil {
		return apierrors.NewNotFound(nodesResource, node)
	}
	if owner.UID != n.UID {
		return forbidden(a, "node %s UID mismatch: expected %s got %s", node, owner.UID, n.UID)
	}
	if pod.Spec.ServiceAccountName != "" {
		return forbidden(a, "node %q can not create pods that reference a service account", node)
	}
	refs := podReferences(pod)
	switch {
	case refs.secrets:
		return forbidden(a, "node %q can not create pods that reference secrets", node)
	case refs.configMaps:
		return forbidden(a, "node %q can not create pods that reference configmaps", node)
	case refs.clusterTrustBundles:
		return forbidden(a, "node %q can not create pods that use clustertrustbundles", node)
	case refs.claims:
		return forbidden(a, "node %q can not create pods that reference persistentvolumeclaims", node)
	case len(pod.Spec.ResourceClaims) > 0:
		return forbidden(a, "node %q can not create pods that reference resourceclaims", node)
	}
	return nil
}

// references says which kinds of API objects a pod refers to.
type references struct {
	secrets, configMaps, clusterTrustBundles, claims bool
}

func podReferences(pod *corev1.Pod) references {
	var r references
	if len(pod.Spec.ImagePullSecrets) > 0 {
		r.secrets = true
	}
	for _, v := range pod.Spec.Volumes {
		volumeReferences(&r, v.VolumeSource)
	}
	env := func(envs []corev1.EnvVar, from []corev1.EnvFromSource) {
		for _, e := range envs {
			if e.ValueFrom == nil {
				continue
			}
			if e.ValueFrom.SecretKeyRef != nil {
				r.secrets = true
			}
			if e.ValueFrom.ConfigMapKeyRef != nil {
				r.configMaps = true
			}
		}
		for _, f := range from {
			if f.SecretRef != nil {
				r.secrets = true
			}
			if f.ConfigMapRef != nil {
				r.configMaps = true
			}
		}
	}
	for _, c := range pod.Spec.InitContainers {
		env(c.Env, c.EnvFrom)
	}
	for _, c := range pod.Spec.Containers {
		env(c.Env, c.EnvFrom)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		env(c.Env, c.EnvFrom)
	}
	return r
}

func volumeReferences(r *references, v corev1.VolumeSource) {
	switch {
	case v.Secret != nil:
		r.secrets = true
	case v.ConfigMap != nil:
		r.configMaps = true
	case v.PersistentVolumeClaim != nil, v.Ephemeral != nil:
		r.claims = true
	case v.Projected != nil:
		for _, s := range v.Projected.Sources {
			if s.Secret != nil {
				r.secrets = true
			}
			if s.ConfigMap != nil {
				r.configMaps = true
			}
			if s.ClusterTrustBundle != nil {
				r.clusterTrustBundles = true
			}
		}
	case v.CSI != nil && v.CSI.NodePublishSecretRef != nil,
		v.AzureFile != nil,
		v.CephFS != nil && v.CephFS.SecretRef != nil,
		v.Cinder != nil && v.Cinder.SecretRef != nil,
		v.FlexVolume != nil && v.FlexVolume.SecretRef != nil,
		v.ISCSI != nil && v.ISCSI.SecretRef != nil,
		v.RBD != nil && v.RBD.SecretRef != nil,
		v.ScaleIO != nil && v.ScaleIO.SecretRef != nil,
		v.StorageOS != nil && v.StorageOS.SecretRef != nil:
		r.secrets = true
	}
}

// admitNode: a node writes only its own Node; it may not change its taints
// after creation, nor add, change or remove labels the node label policy
// reserves (SPEC AUTH-8, AUTH-10). On create it may register with taints.
//
// Owner references are the node's to neither set nor change: an owner
// that does not exist (or is later deleted) makes the garbage collector
// delete the Node and, through its own owner reference, the node's Lease,
// which is a delete the node is not allowed to make directly.
func admitNode(node string, a Attributes) error {
	if name := objectName(a); name != node {
		return forbidden(a, "node %q is not allowed to modify node %q", node, name)
	}
	switch a.Operation {
	case Create:
		n, ok := a.Object.(*corev1.Node)
		if !ok {
			return forbidden(a, "unexpected type %T", a.Object)
		}
		if n.Spec.ConfigSource != nil {
			return forbidden(a, "node %q is not allowed to set spec.configSource", node)
		}
		if len(n.OwnerReferences) > 0 {
			return forbidden(a, "node %q is not allowed to set ownerReferences", node)
		}
		if len(n.Status.VolumesAttached) > 0 {
			return forbidden(a, "node %q is not allowed to set status.volumesAttached", node)
		}
		// The node IPAM controller owns spec.podCIDR(s) (SPEC IPAM-6):
		// stricter than upstream, a node may not claim a range itself.
		if n.Spec.PodCIDR != "" || len(n.Spec.PodCIDRs) > 0 {
			return forbidden(a, "node %q is not allowed to set spec.podCIDR or spec.podCIDRs", node)
		}
		keys := make([]string, 0, len(n.Labels))
		for k := range n.Labels {
			keys = append(keys, k)
		}
		if bad := nodelabels.Forbidden(keys); len(bad) > 0 {
			return forbidden(a, "node %q is not allowed to set the following labels: %s", node, strings.Join(bad, ", "))
		}
	case Update:
		n, okNew := a.Object.(*corev1.Node)
		old, okOld := a.OldObject.(*corev1.Node)
		if !okNew || !okOld {
			return forbidden(a, "unexpected types %T, %T", a.Object, a.OldObject)
		}
		if n.Spec.ConfigSource != nil && !equality.Semantic.DeepEqual(old.Spec.ConfigSource, n.Spec.ConfigSource) {
			return forbidden(a, "node %q is not allowed to change spec.configSource", node)
		}
		if !equality.Semantic.DeepEqual(old.Spec.Taints, n.Spec.Taints) {
			return forbidden(a, "node %q is not allowed to modify taints", node)
		}
		if !equality.Semantic.DeepEqual(old.OwnerReferences, n.OwnerReferences) {
			return forbidden(a, "node %q is not allowed to modify ownerReferences", node)
		}
		// The attach/detach controller owns status.volumesAttached (SPEC
		// ADC-2, ADC-5): the agent mounts a volume only once it is listed
		// there, so a node that could write it could mount a volume attached
		// elsewhere. Stricter than upstream, which trusts the kubelet here.
		if !equality.Semantic.DeepEqual(old.Status.VolumesAttached, n.Status.VolumesAttached) {
			return forbidden(a, "node %q is not allowed to modify status.volumesAttached", node)
		}
		if old.Spec.PodCIDR != n.Spec.PodCIDR || !equality.Semantic.DeepEqual(old.Spec.PodCIDRs, n.Spec.PodCIDRs) {
			return forbidden(a, "node %q is not allowed to modify spec.podCIDR or spec.podCIDRs", node)
		}
		if bad := nodelabels.Forbidden(modifiedLabels(old.Labels, n.Labels)); len(bad) > 0 {
			return forbidden(a, "node %q is not allowed to modify labels: %s", node, strings.Join(bad, ", "))
		}
	}
	return nil
}

// modifiedLabels returns the keys added, removed or changed between old
// and updated.
func modifiedLabels(old, updated map[string]string) []string {
	var keys []string
	for k, v := range updated {
		if ov, ok := old[k]; !ok || ov != v {
			keys = append(keys, k)
		}
	}
	for k := range old {
		if _, ok := updated[k]; !ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// admitLease: a node writes only the Lease named after itself in
// kube-node-lease (SPEC AUTH-9).
func admitLease(node string, a Attributes) error {
	if a.Namespace != corev1.NamespaceNodeLease {
		return forbidden(a, "can only access leases in the node lease namespace")
	}
	if objectName(a) != node {
		return forbidden(a, "can only access node lease with the same name as the requesting node")
	}
	return nil
}

// admitClaim: a node only updates a claim's status, and there only the
// capacity, conditions and the expansion fields (SPEC AUTH-9).
func admitClaim(node string, a Attributes) error {
	if a.Subresource != "status" || a.Operation != Update {
		return forbidden(a, "node %q can only update persistentvolumeclaim status", node)
	}
	pvc, okNew := a.Object.(*corev1.PersistentVolumeClaim)
	old, okOld := a.OldObject.(*corev1.PersistentVolumeClaim)
	if !okNew || !okOld {
		return forbidden(a, "unexpected types %T, %T", a.Object, a.OldObject)
	}
	if !equality.Semantic.DeepEqual(claimWithoutNodeFields(old), claimWithoutNodeFields(pvc)) {
		return forbidden(a, "node %q is not allowed to update fields other than status.capacity, status.conditions, status.allocatedResources and status.allocatedResourceStatuses", node)
	}
	return nil
}

// claimWithoutNodeFields is a copy of c without the fields a node may
// change (and without the resourceVersion and managed fields, which an
// update may leave out).
func claimWithoutNodeFields(c *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	c = c.DeepCopy()
	c.ResourceVersion = ""
	c.ManagedFields = nil
	c.Status.Capacity = nil
	c.Status.Conditions = nil
	c.Status.AllocatedResources = nil
	c.Status.AllocatedResourceStatuses = nil
	return c
}
