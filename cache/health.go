package cache

import (
	"log/slog"
	"sync"
	"time"
)

// health remembers that the store failed, so that for RetryInterval afterwards
// requests bypass it at once instead of each waiting for a timeout; then the next
// operation tries again, and its success brings the cache back.
type health struct {
	mu        sync.Mutex
	down      bool
	downUntil time.Time
	interval  time.Duration
	log       *slog.Logger
}

// ok reports whether the store may be tried.
func (h *health) ok(now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.down || !now.Before(h.downUntil)
}

func (h *health) failed(now time.Time, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.down {
		h.log.Warn("cache: backend failed; serving from the directory until it answers again", "error", err, "retry_interval", h.interval)
	}
	h.down, h.downUntil = true, now.Add(h.interval)
}

func (h *health) succeeded() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down {
		h.log.Info("cache: backend answers again")
	}
	h.down = false
}
