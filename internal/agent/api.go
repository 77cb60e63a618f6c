package agent

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodeplane/nodeplane/internal/agent/lease"
)

// API adapts the typed clients to the small interfaces the agent's parts
// consume (register.Client, nodestatus.Client, pods.Client, events.Client,
// lease.Client, volumes.Client). nodeplane sim builds one per simulated node.
type API struct {
	Core         corev1client.CoreV1Interface
	Coordination coordinationv1client.CoordinationV1Interface
}

// Leases returns the lease client for kube-node-lease.
func (a API) Leases() lease.Client { return a.Coordination.Leases(lease.Namespace) }

// CreateNode creates the Node.
func (a API) CreateNode(ctx context.Context, n *corev1.Node) (*corev1.Node, error) {
	return a.Core.Nodes().Create(ctx, n, metav1.CreateOptions{})
}

// GetNode reads the Node.
func (a API) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	return a.Core.Nodes().Get(ctx, name, metav1.GetOptions{})
}

// PatchNode merge-patches the Node.
func (a API) PatchNode(ctx context.Context, name string, patch []byte) (*corev1.Node, error) {
	return a.Core.Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
}

// PatchNodeStatus merge-patches nodes/<name>/status.
func (a API) PatchNodeStatus(ctx context.Context, name string, patch []byte) (*corev1.Node, error) {
	return a.Core.Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
}

// UpdatePodStatus writes pods/<name>/status.
func (a API) UpdatePodStatus(ctx context.Context, p *corev1.Pod) (*corev1.Pod, error) {
	return a.Core.Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
}

// DeletePod deletes a pod with grace 0, only if it still has uid.
func (a API) DeletePod(ctx context.Context, namespace, name string, uid types.UID) error {
	return a.Core.Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
}

// GetConfigMap reads a ConfigMap (for a configMap volume).
func (a API) GetConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	return a.Core.ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
}

// GetSecret reads a Secret (for a secret volume).
func (a API) GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	return a.Core.Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
}

// GetPersistentVolumeClaim reads a claim a pod's volume names.
func (a API) GetPersistentVolumeClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return a.Core.PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
}

// GetPersistentVolume reads the volume a claim is bound to.
func (a API) GetPersistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	return a.Core.PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
}

// CreateEvent records an event.
func (a API) CreateEvent(ctx context.Context, namespace string, e *corev1.Event) error {
	_, err := a.Core.Events(namespace).Create(ctx, e, metav1.CreateOptions{})
	return err
}
