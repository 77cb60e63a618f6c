package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodeplane/nodeplane/internal/storage"
)

func TestWrapError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want error // nil: no storage sentinel
	}{
		{"a compacted revision becomes ErrCompacted", rpctypes.ErrCompacted, storage.ErrCompacted},
		{"a future revision becomes ErrFutureRevision", rpctypes.ErrFutureRev, storage.ErrFutureRevision},
		{"a member without a leader is unavailable", rpctypes.ErrNoLeader, storage.ErrUnavailable},
		{"a request timeout inside etcd is unavailable", rpctypes.ErrTimeout, storage.ErrUnavailable},
		{"a stopped member is unavailable", rpctypes.ErrStopped, storage.ErrUnavailable},
		{"an expired deadline is unavailable", context.DeadlineExceeded, storage.ErrUnavailable},
		{"an unreachable endpoint is unavailable", status.Error(codes.Unavailable, "connection refused"), storage.ErrUnavailable},
		{"a wrapped etcd error is still recognised", fmt.Errorf("txn: %w", rpctypes.ErrCompacted), storage.ErrCompacted},
		{"a cancelled context is the caller's and stays as it is", context.Canceled, nil},
		{"a request that is too large is no storage condition", rpctypes.ErrRequestTooLarge, nil},
	}
	sentinels := []error{storage.ErrCompacted, storage.ErrFutureRevision, storage.ErrUnavailable, storage.ErrNotFound, storage.ErrConflict}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := wrapError("get", "/k", tt.err)
			if !errors.Is(got, tt.err) {
				t.Errorf("wrapError lost the etcd error: %v", got)
			}
			if !strings.HasPrefix(got.Error(), `get "/k": `) {
				t.Errorf("message %q does not name the operation and key", got)
			}
			for _, s := range sentinels {
				if want := s == tt.want; errors.Is(got, s) != want {
					t.Errorf("errors.Is(%v, %v) = %v, want %v", got, s, !want, want)
				}
			}
		})
	}
}
