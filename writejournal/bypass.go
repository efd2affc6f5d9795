package writejournal

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The journal's own bypass after a Redis failure, the cache's (cache/health.go) in
// small: a call that finds Redis down or silent fails within the timeout, and for
// RetryInterval afterwards calls fail at once instead of each waiting for the
// timeout; then the next call tries again, and its success ends the bypass. The
// adapter meanwhile lays only the writes of its own process over listings.
//
// It is the journal's own rather than the cache's because it needs nothing else of
// the cache: a journal call made while the cache bypasses Redis costs at most one
// timeout per retry interval. Nor does it stop on a change of Redis's history (a
// failover that may have lost writes), as the cache does until it has invalidated
// its entries (cache/history.go): nothing the journal holds can be repaired, what
// a promoted primary still holds is still true, and each instance keeps its own
// writes in process anyway (docs/cache.md, "Redis failovers").

// errBypassed fails a call made within RetryInterval of a failure.
var errBypassed = errors.New("writejournal: Redis failed recently; bypassed until the retry interval has passed")

// bypass remembers that Redis failed, and until when calls fail at once.
type bypass struct {
	mu       sync.Mutex
	down     bool
	until    time.Time
	interval time.Duration
	log      *slog.Logger
}

// ok reports whether Redis may be tried.
func (b *bypass) ok(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.down || !now.Before(b.until)
}

func (b *bypass) failed(now time.Time, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.down {
		b.log.Warn("writejournal: Redis failed; membership writes are shared with no other replica until it answers again", "error", err, "retry_interval", b.interval)
	}
	b.down, b.until = true, now.Add(b.interval)
}

func (b *bypass) succeeded() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.down {
		b.log.Info("writejournal: Redis answers again")
	}
	b.down = false
}

// run runs f under the timeout and the bypass. The timeout does not follow the
// caller's cancellation, so that a caller going away does not count as Redis
// failing. An error reply (a script refused, a key of the wrong type) is returned
// without counting as Redis down: Redis answered.
func (j *Journal) run(ctx context.Context, f func(ctx context.Context) error) error {
	if !j.health.ok(j.now()) {
		return errBypassed
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), j.timeout)
	defer cancel()
	err := f(sctx)
	var reply redis.Error
	if err != nil && !(errors.As(err, &reply) && !errors.Is(err, redis.Nil)) {
		j.health.failed(j.now(), err)
		return err
	}
	j.health.succeeded()
	return err
}
