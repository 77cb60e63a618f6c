package cache

import (
	"github.com/nodeplane/nodeplane/internal/scheduler/framework"
)

// Snapshot is a point-in-time copy of the cache's nodes for scheduling
// cycles. It is owned by the scheduling goroutine: refresh it with
// Cache.UpdateSnapshot between cycles and read it during one; the NodeInfos
// it returns stay valid (and are updated in place) across refreshes.
type Snapshot struct {
	infos        map[string]*framework.NodeInfo
	list         []*framework.NodeInfo
	generation   int64
	orderVersion int64
}

// NewSnapshot returns an empty snapshot; the first UpdateSnapshot fills it.
func NewSnapshot() *Snapshot {
	return &Snapshot{infos: make(map[string]*framework.NodeInfo), orderVersion: -1}
}

// List returns the nodes, zones interleaved. The caller must not modify it.
func (s *Snapshot) List() []*framework.NodeInfo { return s.list }

// Get returns the named node, or nil.
func (s *Snapshot) Get(name string) *framework.NodeInfo {
	ni := s.infos[name]
	if ni == nil || ni.Node() == nil {
		return nil
	}
	return ni
}

// UpdateSnapshot brings s up to date, copying only the nodes that changed
// since s was last refreshed; the node list is rebuilt only when nodes were
// added, removed or moved between zones.
func (c *Cache) UpdateSnapshot(s *Snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for it := c.head; it != nil && it.info.Generation > s.generation; it = it.next {
		clone := it.info.Clone()
		if existing, ok := s.infos[it.name]; ok {
			*existing = *clone
		} else {
			s.infos[it.name] = clone
		}
	}
	if s.orderVersion != c.orderVersion || len(s.infos) != len(c.nodes) {
		for name := range s.infos {
			if _, ok := c.nodes[name]; !ok {
				delete(s.infos, name)
			}
		}
		s.list = s.list[:0]
		for i := 0; ; i++ {
			added := false
			for _, zone := range c.zoneOrder {
				names := c.zones[zone]
				if i < len(names) {
					s.list = append(s.list, s.infos[names[i]])
					added = true
				}
			}
			if !added {
				break
			}
		}
		s.orderVersion = c.orderVersion
	}
	s.generation = c.generation
}
