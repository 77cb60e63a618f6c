package apiserver

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodeplane/nodeplane/internal/apiserver/store"
	"github.com/nodeplane/nodeplane/internal/storage"
)

var (
	podsResource  = schema.GroupResource{Resource: "pods"}
	nodesGVR      = corev1.SchemeGroupVersion.WithResource("nodes")
	podsGVR       = corev1.SchemeGroupVersion.WithResource("pods")
	claimsGVR     = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	attachmentGVR = storagev1.SchemeGroupVersion.WithResource("volumeattachments")
)

// objectReader gives authorization (authz.Objects) and admission
// (admission.Objects) read access to stored objects. Every method returns
// nil and no error for an object that does not exist or a resource the
// server does not serve. Returned objects may be shared with the watch
// cache: callers must not mutate them.
type objectReader struct{ s *Server }

// Pod reads from the watch cache when it holds the pod bound to a node (a
// binding never changes), and from storage otherwise, so a pod bound a
// moment ago is not mistaken for an unbound one.
func (o objectReader) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	h := o.s.resources[podsGVR]
	if h == nil {
		return nil, nil
	}
	if obj, err := h.st.GetCached(namespace, name); err == nil {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			return p, nil
		}
	}
	obj, err := readStored(ctx, h, namespace, name)
	if obj == nil || err != nil {
		return nil, err
	}
	p, _ := obj.(*corev1.Pod)
	return p, nil
}

// PodsOnNode lists the node's pods from the watch cache once it has caught
// up with storage's current revision (from storage while it loads).
func (o objectReader) PodsOnNode(ctx context.Context, node string) ([]*corev1.Pod, error) {
	h := o.s.resources[podsGVR]
	if h == nil {
		return nil, nil
	}
	pred := store.Predicate{Field: fields.OneTermEqualSelector("spec.nodeName", node)}
	var page store.ListPage
	if h.st.Ready() {
		rv, err := h.st.CurrentRevision(ctx)
		if err != nil {
			return nil, err
		}
		if page, err = h.st.ListFromCache(ctx, pred, rv); err != nil {
			return nil, err
		}
	} else {
		var err error
		if page, err = h.st.ListFromStorage(ctx, pred, 0, "", 0); err != nil {
			return nil, err
		}
	}
	out := make([]*corev1.Pod, 0, len(page.Items))
	for _, item := range page.Items {
		if p, ok := item.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// PersistentVolumeClaim reads the claim from storage.
func (o objectReader) PersistentVolumeClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	obj, err := readStored(ctx, o.s.resources[claimsGVR], namespace, name)
	if obj == nil || err != nil {
		return nil, err
	}
	c, _ := obj.(*corev1.PersistentVolumeClaim)
	return c, nil
}

// VolumeAttachment reads the attachment from storage.
func (o objectReader) VolumeAttachment(ctx context.Context, name string) (*storagev1.VolumeAttachment, error) {
	obj, err := readStored(ctx, o.s.resources[attachmentGVR], "", name)
	if obj == nil || err != nil {
		return nil, err
	}
	va, _ := obj.(*storagev1.VolumeAttachment)
	return va, nil
}

// Node reads the node from storage.
func (o objectReader) Node(ctx context.Context, name string) (*corev1.Node, error) {
	obj, err := readStored(ctx, o.s.resources[nodesGVR], "", name)
	if obj == nil || err != nil {
		return nil, err
	}
	n, _ := obj.(*corev1.Node)
	return n, nil
}

// readStored reads an object from storage; nil and no error when it or
// the resource does not exist.
func readStored(ctx context.Context, h *resourceHandler, namespace, name string) (runtime.Object, error) {
	if h == nil {
		return nil, nil
	}
	obj, err := h.st.Get(ctx, namespace, name)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return obj, nil
}
