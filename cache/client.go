package cache

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
)

// NewRedisClient opens a client of its own on the cache's Redis settings, for the
// other state dirgate keeps there (auth/session's sessions and tokens), with
// timeout as its read and write timeout. Spans name the command only, never keys
// or values. The caller closes it.
func (c RedisConfig) NewRedisClient(timeout time.Duration) (redis.UniversalClient, error) {
	opts, err := c.options(timeout)
	if err != nil {
		return nil, err
	}
	client := redis.NewUniversalClient(opts)
	if err := c.instrumentTracing(client); err != nil {
		client.Close()
		return nil, fmt.Errorf("redis tracing: %w", err)
	}
	return client, nil
}

// instrumentTracing adds command spans when c.Tracing: they name the command only,
// never its keys or values.
func (c RedisConfig) instrumentTracing(client redis.UniversalClient) error {
	if !c.Tracing {
		return nil
	}
	return redisotel.InstrumentTracing(client, redisotel.WithDBStatement(false), redisotel.WithCallerEnabled(false))
}
