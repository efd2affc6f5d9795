package redisconn

import (
	"context"
	"errors"
	"net"

	"github.com/redis/go-redis/v9"
)

// reloadOnFailure makes a Cluster client read the slot map again as soon as a
// command fails without a Redis reply (a connection refused or timed out: a shard's
// primary died). go-redis itself reloads it on MOVED, or every minute; with retries
// off (every failure is a bypass), after a shard's failover nothing would answer MOVED
// and the cache would bypass Redis for up to that minute. go-redis coalesces the
// reloads (one at a time, 200 ms apart), so a burst of failures costs a few
// CLUSTER SLOTS.
type reloadOnFailure struct{ c *redis.ClusterClient }

func (h reloadOnFailure) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h reloadOnFailure) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.check(ctx, err)
		return err
	}
}

func (h reloadOnFailure) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.check(ctx, err)
		return err
	}
}

func (h reloadOnFailure) check(ctx context.Context, err error) {
	if err == nil || errors.Is(err, redis.Nil) {
		return
	}
	var reply redis.Error
	var netErr net.Error
	if errors.As(err, &reply) && !errors.As(err, &netErr) {
		return // the server answered: its map is not in question
	}
	h.c.ReloadState(ctx)
}
