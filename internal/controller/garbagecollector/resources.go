package garbagecollector

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// resource is one kind the collector watches: as a dependent (its owner
// references) and as an owner (what references name).
type resource struct {
	kind       schema.GroupKind
	namespaced bool
	informer   func(informers.SharedInformerFactory) cache.SharedIndexInformer
	client     func(c kubernetes.Interface, namespace string) objectClient
}

// objectClient is the part of a typed client the collector uses.
type objectClient interface {
	Get(ctx context.Context, name string) (metav1.Object, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte) error
}

// typedClient is what every client-go typed client offers for kind T.
type typedClient[T metav1.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// adapt makes a typed client an objectClient.
func adapt[T metav1.Object](c typedClient[T]) objectClient { return adapter[T]{c} }

type adapter[T metav1.Object] struct{ c typedClient[T] }

func (a adapter[T]) Get(ctx context.Context, name string) (metav1.Object, error) {
	obj, err := a.c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return obj, nil
}

func (a adapter[T]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return a.c.Delete(ctx, name, opts)
}

func (a adapter[T]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte) error {
	_, err := a.c.Patch(ctx, name, pt, data, metav1.PatchOptions{FieldManager: ControllerName})
	return err
}

// watched are the kinds with owners or dependents in the node plane:
// workloads own pods and replica sets, nodes own their heartbeat leases
// (and mirror pods).
func watched() []resource {
	return []resource{
		{
			kind: schema.GroupKind{Kind: "Pod"}, namespaced: true,
			informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Core().V1().Pods().Informer()
			},
			client: func(c kubernetes.Interface, ns string) objectClient { return adapt(c.CoreV1().Pods(ns)) },
		},
		{
			kind: schema.GroupKind{Kind: "Node"},
			informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Core().V1().Nodes().Informer()
			},
			client: func(c kubernetes.Interface, _ string) objectClient { return adapt(c.CoreV1().Nodes()) },
		},
		{
			kind: schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}, namespaced: true,
			informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Apps().V1().ReplicaSets().Informer()
			},
			client: func(c kubernetes.Interface, ns string) objectClient { return adapt(c.AppsV1().ReplicaSets(ns)) },
		},
		{
			kind: schema.GroupKind{Group: "apps", Kind: "Deployment"}, namespaced: true,
			informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Apps().V1().Deployments().Informer()
			},
			client: func(c kubernetes.Interface, ns string) objectClient { return adapt(c.AppsV1().Deployments(ns)) },
		},
		{
			kind: schema.GroupKind{Group: "apps", Kind: "DaemonSet"}, namespaced: true,
			informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Apps().V1().DaemonSets().Informer()
			},
			client: func(c kubernetes.Interface, ns string) objectClient { return adapt(c.AppsV1().DaemonSets(ns)) },
		},
		{
			kind: schema.GroupKind{Group: "coordination.k8s.io", Kind: "Lease"}, namespaced: true,
			informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
				return f.Coordination().V1().Leases().Informer()
			},
			client: func(c kubernetes.Interface, ns string) objectClient { return adapt(c.CoordinationV1().Leases(ns)) },
		},
	}
}
