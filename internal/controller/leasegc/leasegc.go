// Package leasegc deletes node heartbeat Leases whose owner Node is gone —
// the one part of the garbage collector (kube-controller-manager's
// garbage-collector-controller) the node plane needs first: a Lease in
// kube-node-lease carries an owner reference to its Node (SPEC KUB-13) and
// must go with it.
//
// Orphaned is the pure decision; Controller is the shell (informers, one
// worker, deletes with a UID precondition). It touches only Leases.
package leasegc

import (
	"context"
	"log/slog"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeplane/nodeplane/internal/controller/manager"
)

// Name is the controller's --controllers name.
const Name = "garbage-collector-controller"

// Orphaned reports whether lease has an owner reference to a Node that no
// longer exists: none with that name, or one with another UID (the Node was
// deleted and re-created). nodeUID returns the UID of the named Node.
func Orphaned(lease *coordinationv1.Lease, nodeUID func(name string) (types.UID, bool)) bool {
	for _, ref := range lease.OwnerReferences {
		if ref.APIVersion != "v1" || ref.Kind != "Node" {
			continue
		}
		uid, ok := nodeUID(ref.Name)
		if ok && uid == ref.UID {
			return false
		}
		return true
	}
	return false // not owned by a Node: not ours to collect
}

// Controller is the shell.
type Controller struct {
	client kubernetes.Interface
	logger *slog.Logger
	// sweep is how often every lease is re-checked (a missed delete event).
	sweep time.Duration

	nodes  corelisters.NodeLister
	leases coordinationlisters.LeaseLister
	synced []cache.InformerSynced
	kick   chan struct{}
}

// New returns the controller.
func New(client kubernetes.Interface, logger *slog.Logger) *Controller {
	if logger == nil {
		logger = slog.Default()
	}
	return &Controller{client: client, logger: logger.With("controller", Name), sweep: 30 * time.Second}
}

// Name implements manager.Controller.
func (c *Controller) Name() string { return Name }

// Prepare implements manager.Controller.
func (c *Controller) Prepare(term *manager.Term) error {
	ni := term.Informers.Core().V1().Nodes()
	li := term.Informers.Coordination().V1().Leases()
	c.nodes, c.leases = ni.Lister(), li.Lister()
	c.kick = make(chan struct{}, 1)
	_, err := ni.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(any) {
			select {
			case c.kick <- struct{}{}:
			default:
			}
		},
	})
	c.synced = []cache.InformerSynced{ni.Informer().HasSynced, li.Informer().HasSynced}
	return err
}

// Run implements manager.Controller: it collects on every Node deletion and
// every sweep period.
func (c *Controller) Run(ctx context.Context) {
	t := time.NewTicker(c.sweep)
	defer t.Stop()
	for {
		c.collect(ctx)
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		case <-t.C:
		}
	}
}

func (c *Controller) collect(ctx context.Context) {
	leases, err := c.leases.Leases(corev1.NamespaceNodeLease).List(labels.Everything())
	if err != nil {
		return
	}
	nodeUID := func(name string) (types.UID, bool) {
		n, err := c.nodes.Get(name)
		if err != nil {
			return "", false
		}
		return n.UID, true
	}
	for _, l := range leases {
		if !Orphaned(l, nodeUID) || c.ownerExists(ctx, l) {
			continue
		}
		uid := l.UID
		err := c.client.CoordinationV1().Leases(l.Namespace).Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		switch {
		case err == nil:
			c.logger.Info("deleted lease of a deleted node", "lease", l.Namespace+"/"+l.Name)
		case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
			c.logger.Warn("delete orphaned lease", "lease", l.Namespace+"/"+l.Name, "err", err)
		}
	}
}

// ownerExists confirms with a live read that the owner Node is really gone:
// the cache may not have seen a just-created Node yet.
func (c *Controller) ownerExists(ctx context.Context, l *coordinationv1.Lease) bool {
	for _, ref := range l.OwnerReferences {
		if ref.Kind != "Node" {
			continue
		}
		n, err := c.client.CoreV1().Nodes().Get(ctx, ref.Name, metav1.GetOptions{})
		return err == nil && n.UID == ref.UID || err != nil && !apierrors.IsNotFound(err)
	}
	return false
}
