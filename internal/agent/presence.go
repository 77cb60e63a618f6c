package agent

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// presenceConfig configures a presence.
type presenceConfig struct {
	NodeName string
	// Register creates the Node again (registerNode=true) or waits for an
	// admin to create it (registerNode=false); it retries until it succeeds
	// or ctx ends, and then returns ctx's error.
	Register func(ctx context.Context) (*corev1.Node, error)
	// Heartbeats renews the Lease and posts the Node status until ctx ends.
	Heartbeats func(ctx context.Context)
	// Registered adopts a Node registered again (cache it, reset the lease
	// renewer), before heartbeats resume.
	Registered func(*corev1.Node)
	Logger     *slog.Logger
}

// presence runs the node's heartbeats while its Node exists. When the Node
// the agent registered is deleted, heartbeats stop at once — a lease
// renewed for a deleted Node is garbage collected again, and recreating it
// only hides what happened — the deletion is logged as an error, and the
// Node is registered again (or awaited); then heartbeats resume.
//
// The node reflector reports what it sees through Deleted and Listed; the
// UID of the Node the agent registered decides whether a report is news.
type presence struct {
	cfg        presenceConfig
	registered atomic.Pointer[types.UID]
	deleted    chan types.UID
}

// newPresence returns a presence for node, the Node as registered.
func newPresence(cfg presenceConfig, node *corev1.Node) *presence {
	p := &presence{cfg: cfg, deleted: make(chan types.UID, 1)}
	uid := node.UID
	p.registered.Store(&uid)
	return p
}

// Deleted reports that the watch saw node deleted.
func (p *presence) Deleted(node *corev1.Node) {
	if node.Name == p.cfg.NodeName {
		p.gone(node.UID)
	}
}

// Listed reports a full list of the node's Node objects (a relist): a list
// without the registered Node means it was deleted while the watch was
// down.
func (p *presence) Listed(nodes []*corev1.Node) {
	for _, n := range nodes {
		if n.Name == p.cfg.NodeName {
			return
		}
	}
	p.gone(*p.registered.Load())
}

// gone signals the deletion of the Node with uid if it is the registered
// one; a report about an older Node object is ignored.
func (p *presence) gone(uid types.UID) {
	if *p.registered.Load() != uid {
		return
	}
	select {
	case p.deleted <- uid:
	default: // a deletion is already pending
	}
}

// Run runs heartbeats until ctx ends.
func (p *presence) Run(ctx context.Context) {
	log := p.cfg.Logger
	uid := *p.registered.Load()
	for {
		hbCtx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); p.cfg.Heartbeats(hbCtx) }()
		p.waitDeleted(ctx, uid)
		stop()
		wg.Wait()
		if ctx.Err() != nil {
			return
		}
		log.Error("node was deleted from the cluster; lease renewals and status updates stop until it is registered again",
			"node", p.cfg.NodeName, "uid", uid)
		node, err := p.cfg.Register(ctx)
		if err != nil {
			return // only when ctx ended
		}
		uid = node.UID
		p.registered.Store(&uid)
		p.cfg.Registered(node)
		log.Info("node registered again; lease renewals and status updates resume", "node", p.cfg.NodeName, "uid", uid)
	}
}

// waitDeleted returns when the Node with uid is reported deleted or ctx
// ends; reports about other Node objects are dropped.
func (p *presence) waitDeleted(ctx context.Context, uid types.UID) {
	for {
		select {
		case <-ctx.Done():
			return
		case got := <-p.deleted:
			if got == uid {
				return
			}
		}
	}
}
