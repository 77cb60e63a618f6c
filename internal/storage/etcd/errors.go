package etcd

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodeplane/nodeplane/internal/storage"
)

// errInvalidRevision reports a caller bug: a conditional write without a
// revision to compare against.
var errInvalidRevision = errors.New("expected revision must be positive")

// wrapError is the one place etcd errors become storage errors. It names the
// operation and key, matches the storage sentinel for errors.Is and keeps the
// etcd error in the chain for the log.
func wrapError(op, key string, err error) error {
	return annotate(fmt.Sprintf("%s %q", op, key), err)
}

// annotate is wrapError for requests that are not about one key.
func annotate(what string, err error) error {
	if sentinel := classify(err); sentinel != nil {
		return fmt.Errorf("%s: %w: %w", what, sentinel, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// classify returns the storage sentinel an etcd client error stands for, or
// nil when none applies (for example a cancelled context, which is the
// caller's own doing).
func classify(err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return storage.ErrCompacted
	case errors.Is(err, rpctypes.ErrFutureRev):
		return storage.ErrFutureRevision
	case errors.Is(err, rpctypes.ErrTooManyRequests):
		return storage.ErrTooManyRequests
	case errors.Is(err, context.DeadlineExceeded):
		return storage.ErrUnavailable
	}
	var etcdErr rpctypes.EtcdError
	if errors.As(err, &etcdErr) {
		// ErrNoLeader, ErrLeaderChanged, ErrStopped, ErrTimeout* and friends
		// all carry codes.Unavailable.
		return sentinelForCode(etcdErr.Code())
	}
	if st, ok := status.FromError(err); ok {
		return sentinelForCode(st.Code())
	}
	return nil
}

func sentinelForCode(code codes.Code) error {
	switch code {
	case codes.Unavailable, codes.DeadlineExceeded:
		return storage.ErrUnavailable
	}
	return nil
}
