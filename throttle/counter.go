package throttle

import (
	"context"
	"errors"
	"time"
)

// Counter counts failures per key in a window: in this process (Local's views), in
// Redis shared by the replicas (*session.RedisFailures), or in both (Both). Keys
// are the throttle's: a client address, signInKey or clientSignInKey. A limit is
// passed with each call; the window is the counter's own.
type Counter interface {
	// Fail counts a failure of key and judges it in the same step: n is the count
	// the answer's hold follows, blocked whether key had already used up limit
	// before this failure, and wait, when blocked, how long until key may fail
	// again.
	Fail(ctx context.Context, key string, limit int, now time.Time) (n int, wait time.Duration, blocked bool, err error)
	// Take counts an attempt at key before it is judged, unless key has used up
	// limit: then give is nil and wait is how long until key may try again.
	// Otherwise n is the count with the attempt, and give gives the attempt back
	// (an attempt that succeeded).
	Take(ctx context.Context, key string, limit int, now time.Time) (n int, wait time.Duration, give func(context.Context) error, err error)
	// Blocked reports, counting nothing, whether key has used up limit and, if
	// so, how long until it may fail again.
	Blocked(ctx context.Context, key string, limit int, now time.Time) (wait time.Duration, blocked bool, err error)
}

// Both counts in local and in shared: a bound holds on this replica whatever Redis
// does, and across replicas while Redis answers. An error of shared only loses the
// shared count: Both returns local's result with the error, for the caller to log.
// Local's count is judged first, so a key it blocks costs no shared call.
func Both(local, shared Counter) Counter { return both{local, shared} }

type both struct{ local, shared Counter }

// Fail counts in both: the larger count holds the answer, and either refuses it,
// for the longer wait when both do.
func (b both) Fail(ctx context.Context, key string, limit int, now time.Time) (int, time.Duration, bool, error) {
	n, wait, blocked, err := b.local.Fail(ctx, key, limit, now)
	if err != nil {
		return n, wait, blocked, err
	}
	sn, swait, sblocked, err := b.shared.Fail(ctx, key, limit, now)
	if err != nil {
		return n, wait, blocked, err
	}
	if sblocked {
		blocked, wait = true, max(wait, swait)
	}
	return max(n, sn), wait, blocked, nil
}

// Take takes the attempt in local, then in shared; refused by shared, it gives
// local's back. Given back, it gives back both.
func (b both) Take(ctx context.Context, key string, limit int, now time.Time) (int, time.Duration, func(context.Context) error, error) {
	n, wait, give, err := b.local.Take(ctx, key, limit, now)
	if err != nil || give == nil {
		return n, wait, give, err
	}
	sn, swait, sgive, err := b.shared.Take(ctx, key, limit, now)
	switch {
	case err != nil:
		return n, 0, give, err
	case sgive == nil:
		return sn, swait, nil, give(ctx)
	}
	return max(n, sn), 0, func(ctx context.Context) error { return errors.Join(give(ctx), sgive(ctx)) }, nil
}

// Blocked asks local, then shared.
func (b both) Blocked(ctx context.Context, key string, limit int, now time.Time) (time.Duration, bool, error) {
	wait, blocked, err := b.local.Blocked(ctx, key, limit, now)
	if err != nil || blocked {
		return wait, blocked, err
	}
	return b.shared.Blocked(ctx, key, limit, now)
}
