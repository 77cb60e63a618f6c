package sim

import (
	"errors"

	"github.com/nodeplane/nodeplane/internal/agent/shutdown"
)

// Shutdown starts a graceful node shutdown of the selected nodes that are
// neither shutting down nor down, and returns how many it started. Each
// runs the agent's own shutdown manager (internal/agent/shutdown) over the
// node's pods: a NodeShutdown event, Ready=False "node is shutting down"
// posted first, new pods rejected with reason NodeShutdown, running pods
// stopped lowest priority group first within the budgets, each with its
// final status (Failed, Terminated, DisruptionTarget) posted. Then the node
// is down, as a machine that powered off: no more lease renewals or status
// updates, so the lifecycle controller sees it go.
func (s *Sim) Shutdown(sel Selector) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.ctx == nil || s.ctx.Err() != nil {
		return 0
	}
	table := shutdown.Table(s.cfg.ShutdownGracePeriod, s.cfg.ShutdownGracePeriodCriticalPods, nil)
	started := 0
	for _, n := range s.nodes {
		if !s.selects(sel, n) || n.down.Load() {
			continue
		}
		old := n.shutdown.Load()
		if old != nil { // under way (Boot clears it)
			continue
		}
		m, err := shutdown.New(shutdown.Config{
			Table: table, Pods: n.manager, SyncNodeStatus: n.updater.Sync, Recorder: simRecorder{s, n},
			Clock: s.cfg.Clock, Logger: s.cfg.Logger.With("node", n.name),
		})
		if err != nil || !n.shutdown.CompareAndSwap(old, m) {
			continue
		}
		started++
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			err := m.Shutdown(s.ctx)
			if errors.Is(err, shutdown.ErrCancelled) || s.ctx.Err() != nil {
				return
			}
			if err != nil {
				s.cfg.Logger.Warn("simulated node shutdown", "node", n.name, "err", err)
			}
			n.down.Store(true)
		}()
	}
	return started
}

// Boot starts the agents of the selected nodes that are down again: they
// renew their leases and post status (Ready once more) and admit pods. Pods
// stopped by the shutdown stay stopped. It returns how many booted.
func (s *Sim) Boot(sel Selector) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	booted := 0
	for _, n := range s.nodes {
		if !s.selects(sel, n) || !n.down.Load() {
			continue
		}
		n.shutdown.Store(nil)
		n.down.Store(false)
		n.updater.ReportNow()
		booted++
	}
	return booted
}

// selects reports whether sel picks node n. Nodes are spread over the zones
// round-robin, so n is the (index / zones)-th node of its zone.
func (s *Sim) selects(sel Selector, n *node) bool {
	if sel.Node != "" {
		return n.name == sel.Node
	}
	if sel.Zone == "" || n.zone != sel.Zone {
		return false
	}
	return sel.Count <= 0 || n.index/max(1, len(s.cfg.Zones)) < sel.Count
}
