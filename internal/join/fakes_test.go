package join_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"

	"github.com/nodeplane/nodeplane/internal/join"
)

// memTokens is an in-memory join.TokenStore.
type memTokens struct {
	mu sync.Mutex
	m  map[string]join.TokenRecord
}

func newMemTokens() *memTokens { return &memTokens{m: map[string]join.TokenRecord{}} }

func (s *memTokens) Token(_ context.Context, id string) (join.TokenRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.m[id]
	if !ok {
		return join.TokenRecord{}, fmt.Errorf("%w: %s", join.ErrTokenNotFound, id)
	}
	return rec, nil
}

func (s *memTokens) put(rec join.TokenRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[rec.ID] = rec
}

func (s *memTokens) delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// memIdentities is an in-memory join.IdentityStore with versions.
type memIdentities struct {
	mu      sync.Mutex
	m       map[string]join.IssuedIdentity
	version map[string]int64
	next    int64
}

func newMemIdentities() *memIdentities {
	return &memIdentities{m: map[string]join.IssuedIdentity{}, version: map[string]int64{}}
}

func (s *memIdentities) Identity(_ context.Context, node string) (join.IssuedIdentity, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.m[node]
	if !ok {
		return join.IssuedIdentity{}, 0, fmt.Errorf("%w: %s", join.ErrIdentityNotFound, node)
	}
	return id, s.version[node], nil
}

func (s *memIdentities) PutIdentity(_ context.Context, id join.IssuedIdentity, version int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.version[id.Node] != version {
		return fmt.Errorf("%w: %s", join.ErrIdentityConflict, id.Node)
	}
	s.next++
	s.m[id.Node], s.version[id.Node] = id, s.next
	return nil
}

func (s *memIdentities) get(node string) (join.IssuedIdentity, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.m[node]
	return id, ok
}

// fakeNodes is a join.NodeReader answering from a map.
type fakeNodes struct {
	mu    sync.Mutex
	m     map[string]join.NodeState
	reads int
}

func newFakeNodes() *fakeNodes { return &fakeNodes{m: map[string]join.NodeState{}} }

func (n *fakeNodes) NodeState(_ context.Context, node string) (join.NodeState, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.reads++
	return n.m[node], nil
}

func (n *fakeNodes) set(node string, st join.NodeState) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.m[node] = st
}

func sha256Sum(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}
