package etcd

import (
	"context"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodeplane/nodeplane/internal/storage"
)

// Every write is one etcd transaction: one round trip, one raft proposal.
// Conditional writes read the current value in the Else branch of the same
// transaction, so a conflict costs no second request and a success reads
// nothing.
//
// Writes build etcd's request protos directly instead of going through
// clientv3's Op builders: Update is the lease-renewal path, and the builders
// cost ~14 allocations and a copy of the value per request.

// Create stores value under key if the key is absent:
//
//	If(CreateRevision(key) == 0) Then(Put(key, value))
func (s *Store) Create(ctx context.Context, key string, value []byte) (int64, error) {
	defer s.observe(storage.OpCreate, s.clock.Now())
	k := []byte(key)
	lease, err := s.leases.forKey(ctx, key)
	if err != nil {
		return 0, wrapError("create", key, err)
	}
	resp, err := s.txn(ctx, &pb.TxnRequest{
		Compare: []*pb.Compare{{
			Key:         k,
			Target:      pb.Compare_CREATE,
			Result:      pb.Compare_EQUAL,
			TargetUnion: &pb.Compare_CreateRevision{CreateRevision: 0},
		}},
		Success: []*pb.RequestOp{putOp(k, value, lease)},
	})
	if leaseLost(err) {
		s.leases.drop(lease)
	}
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
// expectedRevision must be positive: an absent key has ModRevision 0, so 0
// would turn the update into a create.
func (s *Store) Update(ctx context.Context, key string, value []byte, expectedRevision int64) (int64, error) {
	defer s.observe(storage.OpUpdate, s.clock.Now())
	if expectedRevision <= 0 {
		return 0, fmt.Errorf("update %q at revision %d: %w", key, expectedRevision, errInvalidRevision)
	}
	k := []byte(key)
	lease, err := s.leases.forKey(ctx, key)
	if err != nil {
		return 0, wrapError("update", key, err)
	}
	resp, err := s.txn(ctx, newCASTxn(k, value, lease, expectedRevision))
	if leaseLost(err) {
		s.leases.drop(lease)
	}
	if err != nil {
		return 0, wrapError("update", key, err)
	}
	if resp.Succeeded {
		return resp.Header.Revision, nil
	}
	return 0, mismatch("update", key, resp)
}

// Delete removes the key and returns what it held. With expectedRevision 0
// it is unconditional:
//
//	If() Then(Delete(key, prevKV))
//
// otherwise:
//
//	If(ModRevision(key) == expected) Then(Delete(key, prevKV)) Else(Get(key))
func (s *Store) Delete(ctx context.Context, key string, expectedRevision int64) (storage.KeyValue, int64, error) {
	defer s.observe(storage.OpDelete, s.clock.Now())
	if expectedRevision < 0 {
		return storage.KeyValue{}, 0, fmt.Errorf("delete %q at revision %d: %w", key, expectedRevision, errInvalidRevision)
	}
	k := []byte(key)
	req := &pb.TxnRequest{Success: []*pb.RequestOp{{
		Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: k, PrevKv: true}},
	}}}
	if expectedRevision > 0 {
		req.Compare = modRevisionIs(k, expectedRevision)
		req.Failure = []*pb.RequestOp{getOp(k)}
	}
	resp, err := s.txn(ctx, req)
	if err != nil {
		return storage.KeyValue{}, 0, wrapError("delete", key, err)
	}
	if !resp.Succeeded {
		return storage.KeyValue{}, 0, mismatch("delete", key, resp)
	}
	deleted := resp.Responses[0].GetResponseDeleteRange().GetPrevKvs()
	if len(deleted) == 0 {
		return storage.KeyValue{}, 0, fmt.Errorf("delete %q: %w", key, storage.ErrNotFound)
	}
	return toKeyValue(deleted[0]), resp.Header.Revision, nil
}

// txn sends one transaction and converts errors as clientv3 would.
func (s *Store) txn(ctx context.Context, req *pb.TxnRequest) (*pb.TxnResponse, error) {
	resp, err := s.rawKV.Txn(ctx, req, s.callOpts...)
	if err != nil {
		return nil, clientv3.ContextError(ctx, err)
	}
	return resp, nil
}

// casTxn is the request of an update, If(mod_revision == rev)
// Then(Put(key, value)) Else(Get(key)), with all its parts in one
// allocation: an update is the heartbeat path's write, and the same
// request built from parts takes a dozen.
type casTxn struct {
	req              pb.TxnRequest
	cmp              pb.Compare
	cmpRev           pb.Compare_ModRevision
	put, get         pb.RequestOp
	putReq           pb.RequestOp_RequestPut
	getReq           pb.RequestOp_RequestRange
	putBody          pb.PutRequest
	getBody          pb.RangeRequest
	cmps             [1]*pb.Compare
	success, failure [1]*pb.RequestOp
}

// newCASTxn is the compare-and-swap of value under key at revision rev,
// attached to lease unless it is 0; its Else branch reads the key.
func newCASTxn(key, value []byte, lease, rev int64) *pb.TxnRequest {
	t := &casTxn{}
	t.cmpRev.ModRevision = rev
	t.cmp = pb.Compare{Key: key, Target: pb.Compare_MOD, Result: pb.Compare_EQUAL, TargetUnion: &t.cmpRev}
	t.putBody = pb.PutRequest{Key: key, Value: value, Lease: lease}
	t.putReq.RequestPut = &t.putBody
	t.put.Request = &t.putReq
	t.getBody.Key = key
	t.getReq.RequestRange = &t.getBody
	t.get.Request = &t.getReq
	t.cmps[0], t.success[0], t.failure[0] = &t.cmp, &t.put, &t.get
	t.req.Compare, t.req.Success, t.req.Failure = t.cmps[:], t.success[:], t.failure[:]
	return &t.req
}

func modRevisionIs(key []byte, rev int64) []*pb.Compare {
	return []*pb.Compare{{
		Key:         key,
		Target:      pb.Compare_MOD,
		Result:      pb.Compare_EQUAL,
		TargetUnion: &pb.Compare_ModRevision{ModRevision: rev},
	}}
}

// putOp puts value under key, attached to lease unless it is 0.
func putOp(key, value []byte, lease int64) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: key, Value: value, Lease: lease}}}
}

func getOp(key []byte) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: key}}}
}

// mismatch turns the Else branch of a failed compare into ErrNotFound (the
// key is absent) or a *storage.ConflictError carrying the current value.
func mismatch(op, key string, resp *pb.TxnResponse) error {
	current := resp.Responses[0].GetResponseRange().GetKvs()
	if len(current) == 0 {
		return fmt.Errorf("%s %q: %w", op, key, storage.ErrNotFound)
	}
	return &storage.ConflictError{Key: key, Current: toKeyValue(current[0])}
}
