package ownership

import (
	"context"
	"sync"
)

// SlowStart calls create count times in batches of 1, 2, 4, … (the calls
// of a batch run concurrently) and stops after the first batch in which a
// call fails, so a template the API server refuses costs one request, not
// hundreds. It returns how many calls succeeded and the first error (or
// ctx's, if it ended first); count − succeeded calls failed or were never
// made.
func SlowStart(ctx context.Context, count int, create func(context.Context) error) (succeeded int, err error) {
	for batch, left := 1, count; left > 0 && ctx.Err() == nil; batch *= 2 {
		n := min(batch, left)
		left -= n
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- create(ctx)
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			if e == nil {
				succeeded++
			} else if err == nil {
				err = e
			}
		}
		if err != nil {
			return succeeded, err
		}
	}
	if err == nil && ctx.Err() != nil && succeeded < count {
		err = ctx.Err()
	}
	return succeeded, err
}
