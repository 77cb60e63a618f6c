package joinstate

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeplane/nodeplane/internal/join"
)

// APINodes reads Nodes and Leases through the API with the client it is
// given (the server's controller identity), for the join server's takeover
// check. The server builds that client only once it listens, after the
// join server exists: until SetClient, NodeState fails (the join is
// answered 503 and the agent retries). Safe for concurrent use.
type APINodes struct {
	client atomic.Pointer[kubernetes.Interface]
}

var _ join.NodeReader = (*APINodes)(nil)

// SetClient gives the client to read with.
func (n *APINodes) SetClient(c kubernetes.Interface) { n.client.Store(&c) }

// NodeState implements join.NodeReader. A missing Node or Lease is not an
// error.
func (n *APINodes) NodeState(ctx context.Context, node string) (join.NodeState, error) {
	cp := n.client.Load()
	if cp == nil {
		return join.NodeState{}, errors.New("the API client is not ready yet")
	}
	c := *cp
	var st join.NodeState
	_, err := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return st, nil
	case err != nil:
		return st, fmt.Errorf("get node %s: %w", node, err)
	}
	st.Exists = true
	lease, err := c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return st, nil
	case err != nil:
		return st, fmt.Errorf("get lease %s/%s: %w", corev1.NamespaceNodeLease, node, err)
	}
	if lease.Spec.RenewTime != nil {
		st.LeaseRenewed = lease.Spec.RenewTime.Time
	}
	if lease.Spec.LeaseDurationSeconds != nil {
		st.LeaseDuration = time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	}
	return st, nil
}
