package admission

import (
	"context"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
)

type fakeNodes map[string]*corev1.Node

func (f fakeNodes) Node(_ context.Context, name string) (*corev1.Node, error) {
	return f[name], nil
}

func asNode(name string) *authn.User {
	return &authn.User{Name: "system:node:" + name, Groups: []string{authn.GroupNodes, authn.GroupAuthenticated}}
}

const nodeAUID = types.UID("uid-a")

func mirrorPod(mutate func(*corev1.Pod)) *corev1.Pod {
	yes := true
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "static-a", Namespace: "default",
			Annotations:     map[string]string{corev1.MirrorPodAnnotationKey: "hash"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "a", UID: nodeAUID, Controller: &yes}},
		},
		Spec: corev1.PodSpec{NodeName: "a", Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func boundPod(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "x"}}, Spec: corev1.PodSpec{NodeName: node}}
}

func node(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
}

// TestNodeRestriction walks every refusal upstream NodeRestriction makes
// (plugin/pkg/admission/noderestriction, v1.34) and what we do for it:
//
//	upstream refuses                                   nodeplane
//	pods create: not a mirror pod                      same
//	  bound elsewhere; no, several, foreign or         same
//	  non-controller owner; blockOwnerDeletion;
//	  stale node UID
//	  service account, secrets, config maps, trust     same, plus ephemeral
//	  bundles, claims                                  volumes and resource claims
//	pods update/patch                                  same
//	pods delete of a pod bound elsewhere               same
//	pods/status of a pod bound elsewhere; label or     same; owner references
//	  resource claim status changes                    are reset by the status
//	                                                   strategy, as upstream
//	pods/eviction of a pod bound elsewhere             same
//	other pod subresources                             same
//	nodes: another node's name                         same
//	  create with configSource or reserved labels      same
//	  create with ownerReferences                      refused (upstream admits)
//	  update: configSource to a new value, taints,     same
//	  ownerReferences, reserved labels
//	leases: outside kube-node-lease, other name        same
//	PVCs: anything but status; status changing more    same
//	  than capacity, conditions, allocated resources
//	serviceaccounts/token, csinodes, resourceslices,   not served: the API has
//	  certificatesigningrequests                       no such resources
func TestNodeRestriction(t *testing.T) {
	pods, nodes := podsResource, nodesResource
	noSchedule := corev1.Taint{Key: "k", Effect: corev1.TaintEffectNoSchedule}
	withStatus := func(p *corev1.Pod, phase corev1.PodPhase) *corev1.Pod {
		p = p.DeepCopy()
		p.Status.Phase = phase
		return p
	}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv"}}
	claimResized := claim.DeepCopy()
	claimResized.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
	claimRebound := claimResized.DeepCopy()
	claimRebound.Spec.VolumeName = "other"

	tests := []struct {
		name string
		user *authn.User
		a    Attributes
		// want is "" when admitted, else a substring of the Forbidden message.
		want string
	}{
		{"an administrator's write passes", &authn.User{Name: "admin", Groups: []string{authn.GroupMasters}}, Attributes{Operation: Update, Resource: nodes, Name: "b", Object: node("b", nil, noSchedule), OldObject: node("b", nil)}, ""},
		{"a node identity naming no node is refused", asNode(""), Attributes{Operation: Create, Resource: nodes, Object: node("a", nil)}, "could not determine node from user"},

		{"a node creates its own mirror pod", asNode("a"), Attributes{Operation: Create, Resource: pods, Namespace: "default", Object: mirrorPod(nil)}, ""},
		{"a pod without the mirror annotation is refused", asNode("a"), Attributes{Operation: Create, Resource: pods, Namespace: "default", Object: mirrorPod(func(p *corev1.Pod) { p.Annotations = nil })},
			`pods "static-a" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "a" can only create mirror pods`},
		{"a mirror pod bound elsewhere is refused", asNode("a"), Attributes{Operation: Create, Resource: pods, Object: mirrorPod(func(p *corev1.Pod) { p.Spec.NodeName = "b" })}, `node "a" can only create pods with spec.nodeName set to itself`},
		{"a mirror pod without an owner is refused", asNode("a"), Attributes{Operation: Create, Resource: pods, Object: mirrorPod(func(p *corev1.Pod) { p.OwnerReferences = nil })}, "with an owner reference set to itself"},
		{"a mirror pod owned by another node is refused", asNode("a"), Attributes{Operation: Create, Resource: pods, Object: mirrorPod(func(p *corev1.Pod) { p.OwnerReferences[0].Name = "b" })}, "with an owner reference set to itself"},
		{"a mirror pod with a stale node uid is refused", asNode("a"), Attributes{Operation: Create, Resource: pods, Object: mirrorPod(func(p *corev1.Pod) { p.OwnerReferences[0].UID = "old" })}, "UID mismatch"},
		{"a mirror pod that blocks owner deletion is refused", asNode("a"), Attributes{Operation: Create, Resource: pods, Object: mirrorPod(func(p *corev1.Pod) { yes := true; p.OwnerReferences[0].BlockOwnerDeletion = &yes })}, "must not set blockOwnerDeletion"},
		{"a mirror pod with a service account is refused", asNode("a"), Attributes{Operation: Create, Resource: pods, Object: mirrorPod(func(p *corev1.Pod) { p.Spec.ServiceAccountName = "default" })}, "reference a service account"},
		{"a mirror pod reading a secret into its env is refused", asNode("a"), Attributes{Operation: Create, Resource: pods, Object: mirrorPod(func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}}}
		})}, "reference secrets"},
		{"a mirror pod mounting a config map is refused", asNode("a"), Attributes{Operation: Create, Resource: pods, Object: mirrorPod(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}}}
		})}, "reference configmaps"},
		{"a mirror pod using a claim is refused", asNode("a"), Attributes{Operation: Create, Resource: pods, Object: mirrorPod(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}
		})}, "reference persistentvolumeclaims"},
		{"a mirror pod projecting a trust bundle is refused", asNode("a"), Attributes{Operation: Create, Resource: pods, Object: mirrorPod(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{}}}}}}}
		})}, "use clustertrustbundles"},

		{"a mirror pod with two owners is refused", asNode("a"), Attributes{Operation: Create, Resource: pods, Object: mirrorPod(func(p *corev1.Pod) { p.OwnerReferences = append(p.OwnerReferences, p.OwnerReferences[0]) })}, "with a single owner reference set to itself"},
		{"a mirror pod owned by something other than a Node is refused", asNode("a"), Attributes{Operation: Create, Resource: pods, Object: mirrorPod(func(p *corev1.Pod) {
			p.OwnerReferences[0].APIVersion, p.OwnerReferences[0].Kind = "apps/v1", "ReplicaSet"
		})}, "with an owner reference set to itself"},
		{"a mirror pod whose owner is not its controller is refused", asNode("a"), Attributes{Operation: Create, Resource: pods, Object: mirrorPod(func(p *corev1.Pod) { p.OwnerReferences[0].Controller = nil })}, "with a controller owner reference set to itself"},
		{"a mirror pod pulling with a secret is refused", asNode("a"), Attributes{Operation: Create, Resource: pods, Object: mirrorPod(func(p *corev1.Pod) { p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "s"}} })}, "reference secrets"},
		{"a mirror pod loading its env from a config map is refused", asNode("a"), Attributes{Operation: Create, Resource: pods, Object: mirrorPod(func(p *corev1.Pod) {
			p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{}}}
		})}, "reference configmaps"},
		{"a mirror pod with an ephemeral volume is refused", asNode("a"), Attributes{Operation: Create, Resource: pods, Object: mirrorPod(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}}
		})}, "reference persistentvolumeclaims"},
		{"a mirror pod with a resource claim is refused", asNode("a"), Attributes{Operation: Create, Resource: pods, Object: mirrorPod(func(p *corev1.Pod) { p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu"}} })}, "reference resourceclaims"},
		{"a node deletes a pod bound to it", asNode("a"), Attributes{Operation: Delete, Resource: pods, Name: "p", OldObject: boundPod("p", "a")}, ""},
		{"a node may not delete a pod bound elsewhere", asNode("a"), Attributes{Operation: Delete, Resource: pods, Name: "p", OldObject: boundPod("p", "b")}, `node "a" can only delete pods with spec.nodeName set to itself`},
		{"a node may not update a pod", asNode("a"), Attributes{Operation: Update, Resource: pods, Name: "p", Object: boundPod("p", "a"), OldObject: boundPod("p", "a")}, "can only create and delete mirror pods"},
		{"a node updates the status of a pod bound to it", asNode("a"), Attributes{Operation: Update, Resource: pods, Subresource: "status", Name: "p", Object: withStatus(boundPod("p", "a"), corev1.PodRunning), OldObject: boundPod("p", "a")}, ""},
		{"a node may not update the status of a pod bound elsewhere", asNode("a"), Attributes{Operation: Update, Resource: pods, Subresource: "status", Name: "p", Object: withStatus(boundPod("p", "b"), corev1.PodRunning), OldObject: boundPod("p", "b")},
			`node "a" can only update pod status for pods with spec.nodeName set to itself`},
		{"a node may not relabel a pod through its status", asNode("a"), Attributes{Operation: Update, Resource: pods, Subresource: "status", Name: "p", Object: boundPod("p", "a"), OldObject: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{NodeName: "a"}}},
			"cannot update labels through pod status"},
		{"a node may not rewrite a pod's resource claim statuses", asNode("a"), Attributes{Operation: Update, Resource: pods, Subresource: "status", Name: "p", Object: func() *corev1.Pod {
			p := boundPod("p", "a")
			claim := "other"
			p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &claim}}
			return p
		}(), OldObject: boundPod("p", "a")}, "cannot update resource claim statuses"},
		{"a node may not create a pod status", asNode("a"), Attributes{Operation: Create, Resource: pods, Subresource: "status", Name: "p", Object: boundPod("p", "a")}, "can only update pod status"},
		{"a node evicts a pod bound to it", asNode("a"), Attributes{Operation: Create, Resource: pods, Subresource: "eviction", Name: "p", Object: &policyv1.Eviction{}, OldObject: boundPod("p", "a")}, ""},
		{"a node may not evict a pod bound elsewhere", asNode("a"), Attributes{Operation: Create, Resource: pods, Subresource: "eviction", Name: "p", Object: &policyv1.Eviction{}, OldObject: boundPod("p", "b")}, "can only evict pods with spec.nodeName set to itself"},
		{"a node may not bind a pod", asNode("a"), Attributes{Operation: Create, Resource: pods, Subresource: "binding", Name: "p", Object: &corev1.Binding{}, OldObject: boundPod("p", "")}, "may not write pods/binding"},

		{"a node registers itself with taints and kubelet labels", asNode("a"), Attributes{Operation: Create, Resource: nodes, Object: node("a", map[string]string{"kubernetes.io/hostname": "a", "rack": "r1"}, noSchedule)}, ""},
		{"a node may not register another node", asNode("a"), Attributes{Operation: Create, Resource: nodes, Object: node("b", nil)}, `node "a" is not allowed to modify node "b"`},
		{"a node may not register with a reserved label", asNode("a"), Attributes{Operation: Create, Resource: nodes, Object: node("a", map[string]string{"node-role.kubernetes.io/control-plane": "", "node-restriction.kubernetes.io/x": "y"})},
			`node "a" is not allowed to set the following labels: node-restriction.kubernetes.io/x, node-role.kubernetes.io/control-plane`},
		{"a node may not register with a config source", asNode("a"), Attributes{Operation: Create, Resource: nodes, Object: func() *corev1.Node {
			n := node("a", nil)
			n.Spec.ConfigSource = &corev1.NodeConfigSource{}
			return n
		}()}, `node "a" is not allowed to set spec.configSource`},
		{"a node may not register with an owner", asNode("a"), Attributes{Operation: Create, Resource: nodes, Object: owned(node("a", nil), "ghost")}, `node "a" is not allowed to set ownerReferences`},
		{"a node may not update another node", asNode("a"), Attributes{Operation: Update, Resource: nodes, Subresource: "status", Name: "b", Object: node("b", nil), OldObject: node("b", nil)}, `node "a" is not allowed to modify node "b"`},
		{"a node may not write its volumesAttached, which the attach/detach controller owns", asNode("a"), Attributes{Operation: Update, Resource: nodes, Subresource: "status", Name: "a", Object: func() *corev1.Node {
			n := node("a", nil)
			n.Status.VolumesAttached = []corev1.AttachedVolume{{Name: "kubernetes.io/csi/nodeplane.io/shared-dir^v1"}}
			return n
		}(), OldObject: node("a", nil)}, `node "a" is not allowed to modify status.volumesAttached`},
		{"a node may not register with volumes attached", asNode("a"), Attributes{Operation: Create, Resource: nodes, Object: func() *corev1.Node {
			n := node("a", nil)
			n.Status.VolumesAttached = []corev1.AttachedVolume{{Name: "kubernetes.io/csi/nodeplane.io/shared-dir^v1"}}
			return n
		}()}, `node "a" is not allowed to set status.volumesAttached`},
		{"a node may not register with a pod CIDR", asNode("a"), Attributes{Operation: Create, Resource: nodes, Object: func() *corev1.Node {
			n := node("a", nil)
			n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.9.0/24", []string{"10.244.9.0/24"}
			return n
		}()}, `node "a" is not allowed to set spec.podCIDR or spec.podCIDRs`},
		{"a node may not give itself pod CIDRs the IPAM controller has not", asNode("a"), Attributes{Operation: Update, Resource: nodes, Name: "a", Object: func() *corev1.Node {
			n := node("a", nil)
			n.Spec.PodCIDRs = []string{"10.244.9.0/24"}
			return n
		}(), OldObject: node("a", nil)}, `node "a" is not allowed to modify spec.podCIDR or spec.podCIDRs`},
		{"a node keeps the pod CIDRs it was given", asNode("a"), Attributes{Operation: Update, Resource: nodes, Name: "a", Object: func() *corev1.Node {
			n := node("a", map[string]string{"rack": "r2"})
			n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.9.0/24", []string{"10.244.9.0/24"}
			return n
		}(), OldObject: func() *corev1.Node {
			n := node("a", nil)
			n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.9.0/24", []string{"10.244.9.0/24"}
			return n
		}()}, ""},
		{"a node reports its volumes in use", asNode("a"), Attributes{Operation: Update, Resource: nodes, Subresource: "status", Name: "a", Object: func() *corev1.Node {
			n := node("a", nil)
			n.Status.VolumesInUse = []corev1.UniqueVolumeName{"kubernetes.io/csi/nodeplane.io/shared-dir^v1"}
			return n
		}(), OldObject: node("a", nil)}, ""},
		{"a node may not change its taints", asNode("a"), Attributes{Operation: Update, Resource: nodes, Name: "a", Object: node("a", nil), OldObject: node("a", nil, noSchedule)}, `node "a" is not allowed to modify taints`},
		{"a node may not point its config source elsewhere", asNode("a"), Attributes{Operation: Update, Resource: nodes, Name: "a", Object: func() *corev1.Node {
			n := node("a", nil)
			n.Spec.ConfigSource = &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Name: "other"}}
			return n
		}(), OldObject: node("a", nil)}, `node "a" is not allowed to change spec.configSource`},
		{"a node may drop its config source in a status update", asNode("a"), Attributes{Operation: Update, Resource: nodes, Subresource: "status", Name: "a", Object: node("a", nil), OldObject: func() *corev1.Node {
			n := node("a", nil)
			n.Spec.ConfigSource = &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Name: "c"}}
			return n
		}()}, ""},
		{"a node may not give itself an owner", asNode("a"), Attributes{Operation: Update, Resource: nodes, Name: "a", Object: owned(node("a", nil), "ghost"), OldObject: node("a", nil)}, `node "a" is not allowed to modify ownerReferences`},
		{"a node may not give itself an owner through its status", asNode("a"), Attributes{Operation: Update, Resource: nodes, Subresource: "status", Name: "a", Object: owned(node("a", nil), "ghost"), OldObject: node("a", nil)}, `node "a" is not allowed to modify ownerReferences`},
		{"a node may not replace the owner an admin set", asNode("a"), Attributes{Operation: Update, Resource: nodes, Name: "a", Object: owned(node("a", nil), "ghost"), OldObject: owned(node("a", nil), "real")}, `node "a" is not allowed to modify ownerReferences`},
		{"a node may not remove the owner an admin set", asNode("a"), Attributes{Operation: Update, Resource: nodes, Subresource: "status", Name: "a", Object: node("a", nil), OldObject: owned(node("a", nil), "real")}, `node "a" is not allowed to modify ownerReferences`},
		{"a node keeps the owner an admin set while updating its status", asNode("a"), Attributes{Operation: Update, Resource: nodes, Subresource: "status", Name: "a", Object: owned(node("a", map[string]string{"rack": "r2"}), "real"), OldObject: owned(node("a", nil), "real")}, ""},
		{"a node may not remove a reserved label", asNode("a"), Attributes{Operation: Update, Resource: nodes, Name: "a", Object: node("a", map[string]string{"rack": "r1"}), OldObject: node("a", map[string]string{"rack": "r1", "node-role.kubernetes.io/worker": ""})},
			`node "a" is not allowed to modify labels: node-role.kubernetes.io/worker`},
		{"a node may not change a reserved label's value", asNode("a"), Attributes{Operation: Update, Resource: nodes, Name: "a", Object: node("a", map[string]string{"kubernetes.io/role": "x"}), OldObject: node("a", map[string]string{"kubernetes.io/role": "y"})},
			"is not allowed to modify labels: kubernetes.io/role"},
		{"a node keeps a reserved label an admin set", asNode("a"), Attributes{Operation: Update, Resource: nodes, Subresource: "status", Name: "a", Object: node("a", map[string]string{"node-role.kubernetes.io/worker": "", "rack": "r2"}), OldObject: node("a", map[string]string{"node-role.kubernetes.io/worker": "", "rack": "r1"})}, ""},

		{"a node renews its lease", asNode("a"), Attributes{Operation: Update, Resource: leasesResource, Namespace: "kube-node-lease", Name: "a", Object: &coordinationv1.Lease{}}, ""},
		{"a node may not create another node's lease", asNode("a"), Attributes{Operation: Create, Resource: leasesResource, Namespace: "kube-node-lease", Object: &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "b"}}},
			`leases.coordination.k8s.io "b" is forbidden: can only access node lease with the same name as the requesting node`},
		{"a node may not renew another node's lease", asNode("a"), Attributes{Operation: Update, Resource: leasesResource, Namespace: "kube-node-lease", Name: "b", Object: &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "b"}}},
			"can only access node lease with the same name as the requesting node"},
		{"a node may not delete another node's lease", asNode("a"), Attributes{Operation: Delete, Resource: leasesResource, Namespace: "kube-node-lease", Name: "b", OldObject: &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "b"}}},
			"can only access node lease with the same name as the requesting node"},
		{"a node may not write a lease outside kube-node-lease", asNode("a"), Attributes{Operation: Update, Resource: leasesResource, Namespace: "default", Name: "a", Object: &coordinationv1.Lease{}}, "can only access leases in the node lease namespace"},

		{"a node records a claim's new capacity", asNode("a"), Attributes{Operation: Update, Resource: claimsResource, Subresource: "status", Name: "data", Object: claimResized, OldObject: claim}, ""},
		{"a node may not change a claim's spec through status", asNode("a"), Attributes{Operation: Update, Resource: claimsResource, Subresource: "status", Name: "data", Object: claimRebound, OldObject: claim}, "is not allowed to update fields other than status.capacity"},
		{"a node may not relabel a claim through its status", asNode("a"), Attributes{Operation: Update, Resource: claimsResource, Subresource: "status", Name: "data", Object: func() *corev1.PersistentVolumeClaim {
			c := claimResized.DeepCopy()
			c.Labels = map[string]string{"x": "y"}
			return c
		}(), OldObject: claim}, "is not allowed to update fields other than status.capacity"},
		{"a node may not update a claim", asNode("a"), Attributes{Operation: Update, Resource: claimsResource, Name: "data", Object: claimResized, OldObject: claim}, "can only update persistentvolumeclaim status"},
	}
	objs := fakeNodes{"a": {ObjectMeta: metav1.ObjectMeta{Name: "a", UID: nodeAUID}}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.a
			a.User, a.Objects = tt.user, objs
			err := NodeRestriction{}.Admit(context.Background(), a)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v, want admitted", err)
				}
				return
			}
			if !apierrors.IsForbidden(err) {
				t.Fatalf("got %v, want Forbidden", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %q, want it to contain %q", err.Error(), tt.want)
			}
		})
	}
}

// owned returns n with a single owner reference to a Node named owner.
func owned(n *corev1.Node, owner string) *corev1.Node {
	n.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: owner, UID: types.UID("uid-" + owner)}}
	return n
}

func TestNodeRestrictionMirrorPodOfUnknownNode(t *testing.T) {
	err := NodeRestriction{}.Admit(context.Background(), Attributes{Operation: Create, Resource: podsResource, Object: mirrorPod(nil), User: asNode("a"), Objects: fakeNodes{}})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("got %v, want NotFound for the node", err)
	}
}
