package etcd

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodeplane/nodeplane/internal/storage"
)

// Every write is one etcd transaction, so one round trip and one raft
// proposal. Conditional writes read the current value in the Else branch of
// the same transaction: a conflict costs no second request and a success
// reads nothing.

// Create stores value under key if the key is absent:
//
//	If(CreateRevision(key) == 0) Then(Put(key, value))
func (s *Store) Create(ctx context.Context, key string, value []byte) (int64, error) {
	defer s.observe(opCreate, s.clock.Now())
	resp, err := s.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value))).
		Commit()
	if err != nil {
		return 0, wrapError("create", key, err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("create %q: %w", key, storage.ErrAlreadyExists)
	}
	return resp.Header.Revision, nil
}

// Update replaces the value if the key's ModRevision is expectedRevision:
//
//	If(ModRevision(key) == expected) Then(Put(key, value)) Else(Get(key))
//
// This is the lease-renewal path: one round trip, nothing read on success.
// expectedRevision must be positive (an absent key has ModRevision 0, so 0
// would turn the update into a create).
func (s *Store) Update(ctx context.Context, key string, value []byte, expectedRevision int64) (int64, error) {
	defer s.observe(opUpdate, s.clock.Now())
	if expectedRevision <= 0 {
		return 0, fmt.Errorf("update %q at revision %d: %w", key, expectedRevision, errInvalidRevision)
	}
	resp, err := s.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", expectedRevision)).
		Then(clientv3.OpPut(key, string(value))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return 0, wrapError("update", key, err)
	}
	if resp.Succeeded {
		return resp.Header.Revision, nil
	}
	return 0, mismatch("update", key, resp)
}

// Delete removes the key. With expectedRevision 0 it is unconditional;
// otherwise:
//
//	If(ModRevision(key) == expected) Then(Delete(key, prevKV)) Else(Get(key))
func (s *Store) Delete(ctx context.Context, key string, expectedRevision int64) (storage.KeyValue, int64, error) {
	defer s.observe(opDelete, s.clock.Now())
	if expectedRevision < 0 {
		return storage.KeyValue{}, 0, fmt.Errorf("delete %q at revision %d: %w", key, expectedRevision, errInvalidRevision)
	}
	if expectedRevision == 0 {
		resp, err := s.kv.Delete(ctx, key, clientv3.WithPrevKV())
		if err != nil {
			return storage.KeyValue{}, 0, wrapError("delete", key, err)
		}
		if len(resp.PrevKvs) == 0 {
			return storage.KeyValue{}, 0, fmt.Errorf("delete %q: %w", key, storage.ErrNotFound)
		}
		return toKeyValue(resp.PrevKvs[0]), resp.Header.Revision, nil
	}
	resp, err := s.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", expectedRevision)).
		Then(clientv3.OpDelete(key, clientv3.WithPrevKV())).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return storage.KeyValue{}, 0, wrapError("delete", key, err)
	}
	if !resp.Succeeded {
		return storage.KeyValue{}, 0, mismatch("delete", key, resp)
	}
	// The compare held with a positive revision, so the key existed.
	deleted := resp.Responses[0].GetResponseDeleteRange().PrevKvs
	if len(deleted) == 0 {
		return storage.KeyValue{}, 0, fmt.Errorf("delete %q: %w", key, storage.ErrNotFound)
	}
	return toKeyValue(deleted[0]), resp.Header.Revision, nil
}

// mismatch turns the Else branch of a failed compare into ErrNotFound (the
// key is absent) or a *storage.ConflictError carrying the current value.
func mismatch(op, key string, resp *clientv3.TxnResponse) error {
	current := resp.Responses[0].GetResponseRange().Kvs
	if len(current) == 0 {
		return fmt.Errorf("%s %q: %w", op, key, storage.ErrNotFound)
	}
	return &storage.ConflictError{Key: key, Current: toKeyValue(current[0])}
}
