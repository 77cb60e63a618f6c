package agent

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Handlers receive what a reflector sees of one kind of object.
type Handlers[T runtime.Object] struct {
	Upsert  func(T)
	Delete  func(T)
	Replace func([]T)
}

// store adapts Handlers to cache.ReflectorStore.
type store[T runtime.Object] struct{ h Handlers[T] }

func (s store[T]) Add(obj any) error    { s.h.Upsert(obj.(T)); return nil }
func (s store[T]) Update(obj any) error { s.h.Upsert(obj.(T)); return nil }
func (s store[T]) Delete(obj any) error {
	if t, ok := obj.(T); ok {
		s.h.Delete(t)
	}
	return nil
}
func (s store[T]) Resync() error { return nil }
func (s store[T]) Replace(list []any, _ string) error {
	items := make([]T, 0, len(list))
	for _, o := range list {
		items = append(items, o.(T))
	}
	s.h.Replace(items)
	return nil
}

// ReflectPods lists and watches the pods bound to node (field selector
// spec.nodeName, which is all a node identity may list) into h until ctx
// ends.
func ReflectPods(ctx context.Context, core corev1client.CoreV1Interface, node string, h Handlers[*corev1.Pod]) {
	sel := fields.OneTermEqualSelector("spec.nodeName", node).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return core.Pods(metav1.NamespaceAll).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return core.Pods(metav1.NamespaceAll).Watch(ctx, o)
		},
	}
	cache.NewReflectorWithOptions(lw, &corev1.Pod{}, store[*corev1.Pod]{h}, cache.ReflectorOptions{
		Name: "pods@" + node, MinWatchTimeout: 5 * time.Minute,
	}).RunWithContext(ctx)
}

// ReflectNode lists and watches the node's own Node object (field selector
// metadata.name) into h until ctx ends.
func ReflectNode(ctx context.Context, core corev1client.CoreV1Interface, node string, h Handlers[*corev1.Node]) {
	sel := fields.OneTermEqualSelector("metadata.name", node).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return core.Nodes().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return core.Nodes().Watch(ctx, o)
		},
	}
	cache.NewReflectorWithOptions(lw, &corev1.Node{}, store[*corev1.Node]{h}, cache.ReflectorOptions{
		Name: "node@" + node, MinWatchTimeout: 5 * time.Minute,
	}).RunWithContext(ctx)
}
