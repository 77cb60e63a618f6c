package etcd

import (
	"reflect"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

func TestCASTxnIsTheRequestBuiltFromParts(t *testing.T) {
	tests := []struct {
		name  string
		lease int64
		rev   int64
	}{
		{name: "an update without a lease compares the revision, puts, and reads on mismatch", rev: 42},
		{name: "an update with a lease attaches it to the put", lease: 7, rev: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, value := []byte("/registry/leases/kube-node-lease/n1"), []byte("value")
			want := &pb.TxnRequest{
				Compare: modRevisionIs(key, tt.rev),
				Success: []*pb.RequestOp{putOp(key, value, tt.lease)},
				Failure: []*pb.RequestOp{getOp(key)},
			}
			got := newCASTxn(key, value, tt.lease, tt.rev)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
}
