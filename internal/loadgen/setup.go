package loadgen

import (
	"context"
	"fmt"
	"sync/atomic"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ensureNodes makes Nodes 0..n-1 exist, creating the missing ones, and
// returns their current objects.
func (r *runner) ensureNodes(ctx context.Context, n int) ([]*corev1.Node, *Setup, error) {
	start := r.cfg.Clock.Now()
	nodes := make([]*corev1.Node, n)
	var lat recorder
	var existing atomic.Int64
	created, err := r.parallel(ctx, n, func(ctx context.Context, c kubernetes.Interface, i int) (bool, error) {
		name := NodeName(r.cfg.Prefix, i)
		t0 := r.cfg.Clock.Now()
		out, err := c.CoreV1().Nodes().Create(ctx, NewNode(name, i, t0), metav1.CreateOptions{})
		if err == nil {
			lat.add(r.cfg.Clock.Since(t0))
			nodes[i] = out
			r.noteCreated(&r.createdNodes, name)
			return true, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("create node %s: %w", name, err)
		}
		existing.Add(1)
		if nodes[i], err = c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, fmt.Errorf("get node %s: %w", name, err)
		}
		return false, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return nodes, &Setup{Kind: "nodes", Created: created, Existing: int(existing.Load()), Seconds: r.cfg.Clock.Since(start).Seconds(), CreateLatency: lat.summary()}, nil
}

// ensureLeases makes the leases of Nodes 0..n-1 exist, creating the
// missing ones (owned by nodes[i] when nodes is not nil), and returns
// their current objects.
func (r *runner) ensureLeases(ctx context.Context, n int, nodes []*corev1.Node) ([]*coordinationv1.Lease, *Setup, error) {
	start := r.cfg.Clock.Now()
	leases := make([]*coordinationv1.Lease, n)
	var lat recorder
	var existing atomic.Int64
	created, err := r.parallel(ctx, n, func(ctx context.Context, c kubernetes.Interface, i int) (bool, error) {
		name := NodeName(r.cfg.Prefix, i)
		var node *corev1.Node
		if nodes != nil {
			node = nodes[i]
		}
		t0 := r.cfg.Clock.Now()
		out, err := c.CoordinationV1().Leases(NodeLeaseNamespace).Create(ctx, NewLease(name, t0, node), metav1.CreateOptions{})
		if err == nil {
			lat.add(r.cfg.Clock.Since(t0))
			leases[i] = out
			r.noteCreated(&r.createdLeases, name)
			return true, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("create lease %s: %w", name, err)
		}
		existing.Add(1)
		if leases[i], err = c.CoordinationV1().Leases(NodeLeaseNamespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, fmt.Errorf("get lease %s: %w", name, err)
		}
		return false, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return leases, &Setup{Kind: "leases", Created: created, Existing: int(existing.Load()), Seconds: r.cfg.Clock.Since(start).Seconds(), CreateLatency: lat.summary()}, nil
}

func (r *runner) noteCreated(list *[]string, name string) {
	r.createdMu.Lock()
	*list = append(*list, name)
	r.createdMu.Unlock()
}
